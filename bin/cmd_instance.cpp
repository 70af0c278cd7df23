// `rt instance start|list|stop|logs`: read the words, call rt's instance API.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "exec_args.hpp"
#include "rt/error.hpp"
#include "rt/instance.hpp"

namespace rt::cli {
namespace {

constexpr const char* kInstanceUsage =
    "Usage:\n"
    "  rt instance start [EXEC OPTIONS] IMAGE NAME [--] [ARGS...]\n"
    "  rt instance list [--json]\n"
    "  rt instance stop [--signal SIG] [--timeout S] NAME|--all\n"
    "  rt instance logs NAME\n"
    "\n"
    "Long-running containers of this user. start runs the image's startscript\n"
    "(/.singularity.d/startscript) with ARGS, or else ARGS as the command, in the\n"
    "background, detached, logging to STORE/instances/NAME/{out,err}.log;\n"
    "rt exec instance://NAME PROG runs PROG in its container.\n"
    "EXEC OPTIONS are those of rt exec (rt exec --help). Every subcommand takes\n"
    "--storage DIR, -v and -q. Under Slurm an instance ends with its job.\n";

struct InstanceCommon {
  std::string storage;
  int verbose = 0;
  bool quiet = false;
  int verbosity() const { return quiet ? -1 : verbose; }
};

// Parses `words` for `app` with the options every instance command takes;
// CLI11's errors become rt's.
void parse(CLI::App& app, InstanceCommon& c, std::vector<std::string> words) {
  app.add_option("--storage", c.storage, "the image store");
  app.add_flag("-v,--verbose", c.verbose, "more detail");
  app.add_flag("-q,--quiet", c.quiet, "errors only");
  try {
    std::reverse(words.begin(), words.end());  // CLI11 takes them reversed
    app.parse(words);
  } catch (const CLI::ParseError& e) {
    throw Error(e.what(), "rt instance --help lists the options");
  }
}

int signal_number(const std::string& s) {
  std::string n = s.starts_with("SIG") ? s.substr(3) : s;
  static const std::pair<const char*, int> names[] = {{"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT},
                                                      {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
                                                      {"USR2", SIGUSR2}};
  for (const auto& [name, num] : names)
    if (n == name) return num;
  char* end = nullptr;
  long v = std::strtol(n.c_str(), &end, 10);
  if (!n.empty() && !*end && v > 0 && v < 65) return static_cast<int>(v);
  throw Error("unknown signal `" + s + "`", "give a name (TERM, INT, KILL, HUP, USR1...) or a number");
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

void print_log(const std::string& path, FILE* to) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) throw SysError{errno, "open", path};
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) std::fwrite(buf, 1, n, to);
  std::fclose(f);
}

int start(const std::vector<std::string>& words) {
  auto o = parse_exec_args(ExecMode::Exec, words);
  if (!o) {
    std::fputs(kInstanceUsage, stdout);
    return 0;
  }
  if (o->command.empty())
    throw Error("rt instance start needs IMAGE and NAME", "rt instance start [EXEC OPTIONS] IMAGE NAME [ARGS...]");
  const std::string name = o->command.front();
  o->command.erase(o->command.begin());
  verify_sif_first(*o);
  const InstanceInfo i = start_instance(*o, name);
  if (o->verbosity >= 0)
    std::fprintf(stderr, "rt: started instance `%s` (pid %d): %s; logs in %s\n", i.name.c_str(), i.pid,
                 joined(i.command).c_str(), i.logs.c_str());
  return 0;
}

int list(const std::vector<std::string>& words) {
  InstanceCommon c;
  bool json = false;
  CLI::App app{"rt instance list", "rt instance list"};
  app.add_flag("--json", json, "print JSON");
  parse(app, c, words);
  const auto all = list_instances(c.storage);
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& i : all)
      j.push_back({{"name", i.name},
                   {"pid", i.pid},
                   {"state", i.running ? "running" : "dead"},
                   {"image", i.image},
                   {"started", i.started},
                   {"command", i.command},
                   {"logs", i.logs}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  size_t w = 4;
  for (const auto& i : all) w = std::max(w, i.name.size());
  std::printf("%-*s  %-8s %-8s %-20s  %s\n", static_cast<int>(w), "NAME", "PID", "STATE", "STARTED", "IMAGE / COMMAND");
  for (const auto& i : all)
    std::printf("%-*s  %-8d %-8s %-20s  %s: %s\n", static_cast<int>(w), i.name.c_str(), i.pid,
                i.running ? "running" : "dead", i.started.c_str(), i.image.c_str(), joined(i.command).c_str());
  return 0;
}

int stop(const std::vector<std::string>& words) {
  InstanceCommon c;
  std::string name, sig = "TERM";
  bool all = false;
  int timeout = 10;
  CLI::App app{"rt instance stop", "rt instance stop"};
  app.add_option("name", name, "the instance");
  app.add_flag("-a,--all", all, "every instance");
  app.add_option("-s,--signal", sig, "the signal to send first");
  app.add_option("-t,--timeout", timeout, "seconds before SIGKILL")->check(CLI::Range(0, 86400));
  parse(app, c, words);
  if (all == !name.empty())
    throw Error("rt instance stop takes one NAME, or --all",
                "rt instance stop [--signal SIG] [--timeout S] NAME|--all");
  for (const auto& n : stop_instances(c.storage, name, signal_number(sig), timeout))
    if (c.verbosity() >= 0) std::fprintf(stderr, "rt: stopped instance `%s`\n", n.c_str());
  return 0;
}

int logs(const std::vector<std::string>& words) {
  InstanceCommon c;
  std::string name;
  CLI::App app{"rt instance logs", "rt instance logs"};
  app.add_option("name", name, "the instance")->required();
  parse(app, c, words);
  check_instance_name(name);
  for (const auto& i : list_instances(c.storage))
    if (i.name == name) {
      std::fflush(stdout);
      print_log(i.logs + "/out.log", stdout);
      std::fflush(stdout);
      print_log(i.logs + "/err.log", stderr);
      return 0;
    }
  throw Error("no instance `" + name + "`", "rt instance list shows your instances");
}

}  // namespace

int instance_command(const std::vector<std::string>& words) {
  const std::string sub = words.size() > 1 ? words[1] : "";
  const std::vector<std::string> rest(words.begin() + std::min<size_t>(2, words.size()), words.end());
  if (sub == "start") return start(rest);
  for (const auto& w : rest)
    if (w == "-h" || w == "--help") {
      std::fputs(kInstanceUsage, stdout);
      return 0;
    }
  if (sub == "list") return list(rest);
  if (sub == "stop") return stop(rest);
  if (sub == "logs") return logs(rest);
  if (sub.empty() || sub == "-h" || sub == "--help") {
    std::fputs(kInstanceUsage, stdout);
    return sub.empty() ? kExitRtFailed : 0;
  }
  throw Error("unknown instance command `" + sub + "`", "rt instance --help lists them: start, list, stop, logs");
}

}  // namespace rt::cli
