// Logging to stderr (any world). Under a launcher every line carries the
// rank, "rt[17]: ", so a thousand ranks' logs can be told apart.
#include "util/log.hpp"

#include <cstdio>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <string>

namespace rt::util {
namespace {

int g_verbosity = 0;
std::atomic<bool> g_bar_shown{false};
timespec g_start{};

// "rt: ", or "rt[RANK]: " under a launcher; decided on first use, so that
// errors found before log_init carry it too.
const std::string& prefix() {
  static const std::string p = [] {
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
      if (const char* v = std::getenv(var)) return std::string("rt[") + v + "]: ";
    return std::string("rt: ");
  }();
  return p;
}

void write_line(std::string_view kind, std::string_view message) {
  std::string line = g_bar_shown.exchange(false) ? "\r\033[K" + prefix() : prefix();
  line += kind;
  line += message;
  line += '\n';
  // One write per line so that ranks' lines do not interleave mid-line.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void log_init(int verbosity) {
  g_verbosity = verbosity;
  clock_gettime(CLOCK_MONOTONIC, &g_start);
}

bool log_enabled(Level level) { return static_cast<int>(level) <= g_verbosity + 1; }

void log(Level level, std::string_view message) {
  if (log_enabled(level)) write_line(level == Level::Warn ? "warning: " : "", message);
}

void error(std::string_view message, std::string_view hint) {
  write_line("error: ", message);
  if (!hint.empty()) write_line("hint: ", hint);
}

void note(std::string_view message) {
  if (g_verbosity >= 0) write_line("", message);
}

void set_bar_shown(bool shown) { g_bar_shown = shown; }

bool stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

double log_elapsed_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec - g_start.tv_sec) * 1e3 +
         static_cast<double>(now.tv_nsec - g_start.tv_nsec) / 1e6;
}

void timing(const char* stage) {
  if (!log_enabled(Level::Debug)) return;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3f ms: %s", log_elapsed_ms(), stage);
  debug(buf);
}

}  // namespace rt::util
