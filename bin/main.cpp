// The rt program: parse the command line, call librt, map errors to exit codes.
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "commands.hpp"
#include "rt/error.hpp"

namespace {

// rt needs no privilege; installed setuid or setgid it would hand the
// caller's choice of mounts to another identity, so it refuses to start.
bool installed_privileged() {
  if (::getauxval(AT_SECURE) != 0) return true;
  if (::getuid() != ::geteuid() || ::getgid() != ::getegid()) return true;
  struct stat st;
  // The bits count even where a nosuid mount makes the kernel ignore them.
  return ::stat("/proc/self/exe", &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0;
}

void print_error(const rt::Error& e) {
  std::fprintf(stderr, "rt: error: %s\n", e.what());
  if (!e.hint().empty()) std::fprintf(stderr, "rt: hint: %s\n", e.hint().c_str());
}

} // namespace

int main(int argc, char** argv) {
  if (installed_privileged()) {
    std::fprintf(stderr,
                 "rt: error: refusing to run setuid or setgid (`/proc/self/exe`): rt needs no "
                 "privilege\nrt: hint: chmod u-s,g-s the rt binary\n");
    return rt::kExitRtFailed;
  }
  CLI::App app{"rt: rootless containers for HPC"};
  app.name("rt");
  app.set_version_flag("--version", std::string("rt ") + RT_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  std::vector<std::string> words(argv + 1, argv + argc);
  std::vector<rt::cli::Command> commands;
  rt::cli::add_exec_commands(app, commands, words.empty() ? std::string() : words[0]);

  // Let a subcommand see its words first (exec keeps PROG's options for PROG).
  if (!words.empty()) {
    for (auto& c : commands) {
      if (c.app->check_name(words[0]) && c.pre_parse) {
        std::vector<std::string> rest(words.begin() + 1, words.end());
        rest = c.pre_parse(rest);
        rest.insert(rest.begin(), words[0]);
        words = std::move(rest);
        break;
      }
    }
  }
  try {
    std::reverse(words.begin(), words.end());  // CLI11 takes them reversed
    app.parse(words);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : rt::kExitRtFailed;
  }
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const rt::Error& e) {
    print_error(e);
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rt: error: %s\n", e.what());
    return rt::kExitRtFailed;
  }
  return rt::kExitRtFailed;
}
