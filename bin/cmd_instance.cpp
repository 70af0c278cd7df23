// `rt instance start|list|stop|logs`: read the words, call rt's instance API.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "exec_args.hpp"
#include "rt/error.hpp"
#include "rt/instance.hpp"

namespace rt::cli {
namespace {

constexpr const char* kUsage =
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

struct Common {
  std::string storage;
  int verbosity = 0;
};

// Reads --storage, -v, -q and the options in `takes` (with a value) or
// `flags`; the rest are positional. Throws rt::Error for anything else.
std::vector<std::string> read_words(const std::vector<std::string>& words, Common& c,
                                    std::map<std::string, std::string>& values, const std::vector<std::string>& takes,
                                    const std::vector<std::string>& flags) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string w = words[i], value;
    const size_t eq = w.find('=');
    const bool inline_value = w.starts_with("--") && eq != std::string::npos;
    if (inline_value) {
      value = w.substr(eq + 1);
      w.resize(eq);
    }
    auto next = [&]() -> std::string {
      if (inline_value) return value;
      if (i + 1 >= words.size()) throw Error("option " + w + " needs a value", "rt instance --help");
      return words[++i];
    };
    if (w == "--storage") {
      c.storage = next();
    } else if (w == "-v" || w == "--verbose") {
      ++c.verbosity;
    } else if (w == "-q" || w == "--quiet") {
      c.verbosity = -1;
    } else if (std::find(takes.begin(), takes.end(), w) != takes.end()) {
      values[w] = next();
    } else if (std::find(flags.begin(), flags.end(), w) != flags.end()) {
      values[w] = "1";
    } else if (w.starts_with("-") && w.size() > 1) {
      throw Error("unknown option `" + words[i] + "`", "rt instance --help lists the options");
    } else {
      rest.push_back(words[i]);
    }
  }
  return rest;
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
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (o->command.empty())
    throw Error("rt instance start needs IMAGE and NAME", "rt instance start [EXEC OPTIONS] IMAGE NAME [ARGS...]");
  const std::string name = o->command.front();
  o->command.erase(o->command.begin());
  const InstanceInfo i = start_instance(*o, name);
  if (o->verbosity >= 0)
    std::fprintf(stderr, "rt: started instance `%s` (pid %d): %s; logs in %s\n", i.name.c_str(), i.pid,
                 joined(i.command).c_str(), i.logs.c_str());
  return 0;
}

int list(const std::vector<std::string>& words) {
  Common c;
  std::map<std::string, std::string> v;
  if (!read_words(words, c, v, {}, {"--json"}).empty()) throw Error("rt instance list takes no name");
  const auto all = list_instances(c.storage);
  if (v.count("--json")) {
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
  Common c;
  std::map<std::string, std::string> v;
  auto names = read_words(words, c, v, {"--signal", "-s", "--timeout", "-t"}, {"--all", "-a"});
  const bool all = v.count("--all") || v.count("-a");
  if (all == !names.empty() || names.size() > 1)
    throw Error("rt instance stop takes one NAME, or --all",
                "rt instance stop [--signal SIG] [--timeout S] NAME|--all");
  int sig = SIGTERM, timeout = 10;
  for (const char* k : {"--signal", "-s"})
    if (v.count(k)) sig = signal_number(v[k]);
  for (const char* k : {"--timeout", "-t"})
    if (v.count(k)) {
      char* end = nullptr;
      long t = std::strtol(v[k].c_str(), &end, 10);
      if (v[k].empty() || *end || t < 0 || t > 86400)
        throw Error("--timeout: `" + v[k] + "` is not a number of seconds");
      timeout = static_cast<int>(t);
    }
  for (const auto& n : stop_instances(c.storage, all ? "" : names[0], sig, timeout))
    if (c.verbosity >= 0) std::fprintf(stderr, "rt: stopped instance `%s`\n", n.c_str());
  return 0;
}

int logs(const std::vector<std::string>& words) {
  Common c;
  std::map<std::string, std::string> v;
  auto names = read_words(words, c, v, {}, {});
  if (names.size() != 1) throw Error("rt instance logs takes one NAME");
  check_instance_name(names[0]);
  for (const auto& i : list_instances(c.storage))
    if (i.name == names[0]) {
      std::fflush(stdout);
      print_log(i.logs + "/out.log", stdout);
      std::fflush(stdout);
      print_log(i.logs + "/err.log", stderr);
      return 0;
    }
  throw Error("no instance `" + names[0] + "`", "rt instance list shows your instances");
}

}  // namespace

int instance_command(const std::vector<std::string>& words) {
  const std::string sub = words.size() > 1 ? words[1] : "";
  const std::vector<std::string> rest(words.begin() + std::min<size_t>(2, words.size()), words.end());
  if (sub == "start") return start(rest);
  for (const auto& w : rest)
    if (w == "-h" || w == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  if (sub == "list") return list(rest);
  if (sub == "stop") return stop(rest);
  if (sub == "logs") return logs(rest);
  if (sub.empty() || sub == "-h" || sub == "--help") {
    std::fputs(kUsage, stdout);
    return sub.empty() ? kExitRtFailed : 0;
  }
  throw Error("unknown instance command `" + sub + "`", "rt instance --help lists them: start, list, stop, logs");
}

}  // namespace rt::cli
