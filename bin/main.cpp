// The rt program: parse the command line, call librt, map errors to exit codes.
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "apptainer.hpp"
#include "commands.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"

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

// `run`'s exit status; an error it throws is printed and becomes its exit
// code (a bug's exception: 125).
template <class F>
int reporting_errors(F run) {
  try {
    return run();
  } catch (const rt::Error& e) {
    rt::print_error(e);
    return e.exit_code();
  } catch (const std::exception& e) {
    rt::print_error(rt::Error(e.what()));
    return rt::kExitRtFailed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (installed_privileged()) {
    std::fprintf(stderr,
                 "rt: error: refusing to run setuid or setgid (`/proc/self/exe`): rt needs no "
                 "privilege\nrt: hint: chmod u-s,g-s the rt binary\n");
    return rt::kExitRtFailed;
  }
  std::vector<std::string> words(argv + 1, argv + argc);
  // A task of the Slurm plugin: its errors name the node.
  std::string node;
  auto report = [&node](const rt::Error& e) {
    rt::print_error(node.empty() ? e : rt::Error(node + ": " + e.what(), e.hint()));
    return e.exit_code();
  };
  if (const char* task = std::getenv("RT_SLURM_TASK"); task && *task) {
    if (const char* n = std::getenv("SLURMD_NODENAME")) node = n;
    try {
      if (auto rc = rt::cli::slurm_task_command(words)) return *rc;
    } catch (const rt::Error& e) {
      return report(e);
    }
  }
  if (rt::cli::kProgram.setup) rt::cli::kProgram.setup();
  // Started as apptainer or singularity: that command line (apptainer.hpp).
  if (rt::cli::apptainer_personality(argv[0])) return reporting_errors([&] { return rt::cli::apptainer_main(words); });
  if (!rt::cli::kProgram.full && words.size() == 1 && words[0] == "--version") {
    std::printf("rt %s\n", RT_VERSION);
    return 0;
  }
  if (!rt::cli::kProgram.full && (words.empty() || !rt::cli::is_exec_verb(words[0]))) {
    try {
      rt::cli::exec_full_program(words);
    } catch (const rt::Error& e) {
      rt::print_error(e);
      return rt::kExitRtFailed;
    }
  }
  if (!words.empty() && rt::cli::is_exec_verb(words[0])) {
    try {
      if (auto rc = rt::cli::exec_command(words)) return *rc;
    } catch (const rt::Error& e) {
      return report(e);
    } catch (const std::exception& e) {  // a bug, but never an abort: exit 125 with what it says
      rt::print_error(rt::Error(e.what()));
      return rt::kExitRtFailed;
    }
    words = {words[0], "--help"};  // asked for: CLI11 shows the option table
  }
  if (rt::cli::kProgram.before_commands) rt::cli::kProgram.before_commands();
  CLI::App app{"rt: rootless containers for HPC"};
  app.name("rt");
  app.set_version_flag("--version", std::string("rt ") + RT_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  std::vector<rt::cli::Command> commands;
  if (rt::cli::kProgram.add_commands) {
    rt::cli::add_exec_commands(app, commands, words.empty() ? std::string() : words[0]);
    rt::cli::kProgram.add_commands(app, commands);
  } else {
    rt::cli::add_exec_commands(app, commands, words[0]);
  }

  if (!words.empty() && !words[0].empty() && words[0][0] != '-') {
    bool known = false;
    for (auto& c : commands) known = known || c.app->check_name(words[0]);
    if (!known) {
      std::fprintf(stderr, "rt: error: unknown command `%s` (rt --help lists them)\n", words[0].c_str());
      return rt::kExitRtFailed;
    }
  }
  try {
    std::reverse(words.begin(), words.end());  // CLI11 takes them reversed
    app.parse(words);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's words, as rt's error, with where to look.
    std::string cmd;
    for (auto& c : commands)
      if (c.app->parsed()) cmd = " " + c.app->get_name();
    rt::print_error(rt::Error(e.what(), "rt" + cmd + " --help lists the options"));
    return rt::kExitRtFailed;
  }
  return reporting_errors([&] {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
    return static_cast<int>(rt::kExitRtFailed);
  });
}
