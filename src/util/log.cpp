// Logging to stderr (any world). Under a launcher every line carries the
// rank, "rt[17]: ", so a thousand ranks' logs can be told apart.
#include "util/log.hpp"

#include <cstdio>

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>

namespace rt::util {
namespace {

int g_verbosity = 0;
std::string g_prefix = "rt: ";
timespec g_start{};

const char* rank_from_env() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return v;
  return nullptr;
}

} // namespace

void log_init(int verbosity) {
  g_verbosity = verbosity;
  if (const char* rank = rank_from_env()) g_prefix = std::string("rt[") + rank + "]: ";
  clock_gettime(CLOCK_MONOTONIC, &g_start);
}

bool log_enabled(Level level) { return static_cast<int>(level) <= g_verbosity + 1; }

void log(Level level, std::string_view message) {
  if (!log_enabled(level)) return;
  std::string line = g_prefix;
  if (level == Level::Warn) line += "warning: ";
  line += message;
  line += '\n';
  // One write per line so that ranks' lines do not interleave mid-line.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void note(std::string_view message) {
  if (g_verbosity < 0) return;
  std::string line = g_prefix;
  line += message;
  line += '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

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

} // namespace rt::util
