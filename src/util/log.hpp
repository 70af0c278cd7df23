// Logging to stderr with a rank prefix under launchers (any world).
#pragma once
#include <string_view>

namespace rt::util {

enum class Level { Error = 0, Warn = 1, Info = 2, Debug = 3, Trace = 4 };

// verbosity: -1 quiet (errors only), 0 default (warnings), 1 -v, 2 -vv.
void log_init(int verbosity);
bool log_enabled(Level level);
void log(Level level, std::string_view message);
// Seconds since log_init, for -vv stage timings.
double log_elapsed_ms();
// At -vv: "12.345 ms: STAGE", the time since log_init (start-up stages).
void timing(const char* stage);

inline void warn(std::string_view m) { log(Level::Warn, m); }
// A failure, always shown: "rt: error: MESSAGE" and "rt: hint: HINT".
void error(std::string_view message, std::string_view hint = {});
// Progress and results: shown unless -q.
void note(std::string_view message);
// True when stderr is a terminal (progress bars instead of lines).
bool stderr_is_tty();
// A progress bar is on stderr's last line (no newline): the next line
// logged clears it first, and the bar is drawn again after it.
void set_bar_shown(bool shown);
inline void info(std::string_view m) { log(Level::Info, m); }
inline void debug(std::string_view m) { log(Level::Debug, m); }

}  // namespace rt::util
