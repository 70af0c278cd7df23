// `rt exec`, `rt run`, `rt shell`: fill rt::ExecOptions, call rt::exec.
#include <memory>
#include <optional>
#include <string_view>

#include "cli_split.hpp"
#include "commands.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"

namespace rt::cli {
namespace {

struct State {
  ExecOptions opts;
  std::vector<std::string> binds;
  std::vector<std::string> command;
  int verbose = 0;
  bool quiet = false;
  bool root = false;
};

unsigned parse_id(const std::string& v, const char* opt) {
  size_t used = 0;
  unsigned long n = 0;
  try {
    n = std::stoul(v, &used);
  } catch (const std::exception&) {
  }
  if (v.empty() || used != v.size() || n > 0xfffffffeUL)
    throw Error(std::string(opt) + " needs a numeric id, not " + (v.empty() ? "nothing" : "`" + v + "`"));
  return static_cast<unsigned>(n);
}

// The options of exec, run and shell, once: registered with CLI11 for
// --help and error messages, and read directly by the fast path below.
struct OptSpec {
  const char* names;  // CLI11 form
  const char* value;  // the value's name; nullptr for a flag
  const char* help;
  void (*apply)(State&, const std::string&);
};

constexpr OptSpec kOptions[] = {
    {"-v,--verbose", nullptr, "print the plan (ids, mounts, environment); twice adds timings",
     [](State& s, const std::string&) { ++s.verbose; }},
    {"-q,--quiet", nullptr, "print errors only", [](State& s, const std::string&) { s.quiet = true; }},
    {"--uid", "UID", "user id inside the container (default: yours)",
     [](State& s, const std::string& v) { s.opts.uid = parse_id(v, "--uid"); }},
    {"--gid", "GID", "group id inside the container (default: yours)",
     [](State& s, const std::string& v) { s.opts.gid = parse_id(v, "--gid"); }},
    {"--root", nullptr, "be uid 0 and gid 0 inside (same as --uid 0 --gid 0)",
     [](State& s, const std::string&) { s.root = true; }},
    {"-b,--bind", "SRC[:DST[:ro]]", "bind SRC at DST (default: SRC), read-only with :ro; repeatable",
     [](State& s, const std::string& v) { s.binds.push_back(v); }},
    {"-w,--write", nullptr, "make a directory image writable",
     [](State& s, const std::string&) { s.opts.write = true; }},
    {"--write-tmpfs", nullptr, "writable image with changes kept in memory and discarded at exit",
     [](State& s, const std::string&) { s.opts.write_tmpfs = true; }},
    {"--private-tmp", nullptr, "a private empty /tmp instead of the host's",
     [](State& s, const std::string&) { s.opts.private_tmp = true; }},
    {"--no-home", nullptr, "do not bind your home directory",
     [](State& s, const std::string&) { s.opts.no_home = true; }},
    {"--cd", "DIR", "start in DIR inside the container", [](State& s, const std::string& v) { s.opts.cd = v; }},
    {"-e,--env", "NAME=VALUE", "set NAME=VALUE inside; repeatable",
     [](State& s, const std::string& v) { s.opts.env_set.push_back(v); }},
    {"--env-file", "FILE", "read NAME=VALUE lines from FILE; repeatable",
     [](State& s, const std::string& v) { s.opts.env_files.push_back(v); }},
    {"--unset-env", "GLOB", "remove variables matching GLOB; repeatable",
     [](State& s, const std::string& v) { s.opts.env_unset.push_back(v); }},
    {"--clean-env", nullptr,
     "start from an empty environment (keeping HOME, USER, TERM, LANG and launcher variables)",
     [](State& s, const std::string&) { s.opts.clean_env = true; }},
    {"-n,--dry-run", nullptr, "print the plan and exit without running anything",
     [](State& s, const std::string&) { s.opts.dry_run = true; }},
    {"--storage", "DIR", "image store (default: $RT_STORAGE or /var/tmp/$USER.rt)",
     [](State& s, const std::string& v) { s.opts.storage = v; }},
    {"--mpi", "[openmpi|mpich|PATH]",
     "inject the host's MPI library, its dependencies and plugins (default: the image's MPI ABI)",
     [](State& s, const std::string& v) { s.opts.mpi = v.empty() ? "auto" : v; }},
    {"--gpu", nullptr, "inject the host's NVIDIA driver libraries and tools (automatic when the image asks)",
     [](State& s, const std::string&) { s.opts.gpu = ExecOptions::Inject::On; }},
    {"--no-gpu", nullptr, "never inject the NVIDIA driver",
     [](State& s, const std::string&) { s.opts.gpu = ExecOptions::Inject::Off; }},
    {"--ib", nullptr, "inject the host's InfiniBand verbs, providers and fabric plugins (automatic when present)",
     [](State& s, const std::string&) { s.opts.ib = ExecOptions::Inject::On; }},
    {"--no-ib", nullptr, "never inject the InfiniBand stack",
     [](State& s, const std::string&) { s.opts.ib = ExecOptions::Inject::Off; }},
    {"--join", nullptr, "share one container with the other ranks of this launch on this node (default with a launcher)",
     [](State& s, const std::string&) { s.opts.join = ExecOptions::Inject::On; }},
    {"--no-join", nullptr, "a container of its own for this rank",
     [](State& s, const std::string&) { s.opts.join = ExecOptions::Inject::Off; }},
    {"--device", "VENDOR/CLASS=NAME", "add a CDI device (e.g. nvidia.com/gpu=all); repeatable",
     [](State& s, const std::string& v) { s.opts.devices.push_back(v); }},
};

// Options whose value is optional ("--mpi" or "--mpi=mpich") take it only
// after "=".
bool optional_value(const OptSpec& o) { return o.value && o.value[0] == '['; }

// The spec whose names include `name` ("-b" or "--bind").
const OptSpec* find_option(std::string_view name) {
  for (const auto& o : kOptions) {
    std::string_view names = o.names;
    while (!names.empty()) {
      size_t comma = names.find(',');
      if (names.substr(0, comma) == name) return &o;
      if (comma == std::string_view::npos) break;
      names.remove_prefix(comma + 1);
    }
  }
  return nullptr;
}

bool takes_value(const std::string& name) {
  const OptSpec* o = find_option(name);
  return o && o->value && !optional_value(*o);
}

void add_options(CLI::App* sub, State& s) {
  for (const auto& o : kOptions) {
    if (o.value) {
      sub->add_option_function<std::vector<std::string>>(
             o.names,
             [&s, apply = o.apply](const std::vector<std::string>& vs) {
               for (const auto& v : vs) apply(s, v);
             },
             o.help)
          ->type_name(o.value)
          ->allow_extra_args(false);
    } else {
      sub->add_flag_function(
          o.names,
          [&s, apply = o.apply](std::int64_t n) {
            for (std::int64_t i = 0; i < n; ++i) apply(s, {});
          },
          o.help);
    }
  }
  sub->add_option("image", s.opts.image, "image directory or stored image name")->required()->type_name("IMAGE");
}

// Turns the parsed state into options and runs them.
int run_state(State& s, ExecMode mode) {
  s.opts.mode = mode;
  if (mode == ExecMode::Shell && !s.command.empty())
    throw Error("rt shell takes no command; use rt exec IMAGE PROG [ARGS...]");
  s.opts.command = s.command;
  for (const auto& b : s.binds) s.opts.binds.push_back(parse_bind(b));
  if (s.root) {
    s.opts.uid = 0;
    s.opts.gid = 0;
  }
  s.opts.verbosity = s.quiet ? -1 : s.verbose;
  exec(s.opts);
  return 0;  // reached only with --dry-run
}

void add_one(CLI::App& app, std::vector<Command>& out, const char* name, const char* help,
             ExecMode mode) {
  auto state = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand(name, help);
  add_options(sub, *state);
  if (mode == ExecMode::Exec) sub->footer(std::string("Usage: ") + "rt exec [OPTIONS] IMAGE [--] PROG [ARGS...]");
  if (mode == ExecMode::Run) sub->footer(std::string("Usage: ") + "rt run [OPTIONS] IMAGE [--] [ARGS...]");
  if (mode == ExecMode::Shell) sub->footer(std::string("Usage: ") + "rt shell [OPTIONS] IMAGE");
  Command c;
  c.app = sub;
  c.pre_parse = [sub, state](const std::vector<std::string>& words) {
    Split split = split_command(takes_value, words);
    state->command = std::move(split.command);
    for (auto& w : split.options_and_image) {  // CLI11 would take the next word as the value
      const OptSpec* o = w.starts_with("--") ? find_option(w) : nullptr;
      if (o && optional_value(*o)) w += "=";
    }
    return std::move(split.options_and_image);
  };
  c.run = [state, mode]() { return run_state(*state, mode); };
  out.push_back(std::move(c));
}

} // namespace

bool is_exec_verb(const std::string& w) { return w == "exec" || w == "run" || w == "shell"; }

std::optional<int> fast_exec(const std::vector<std::string>& words) {
  ExecMode mode = words[0] == "exec" ? ExecMode::Exec : words[0] == "run" ? ExecMode::Run : ExecMode::Shell;
  Split split = split_command(takes_value, std::vector<std::string>(words.begin() + 1, words.end()));
  State s;
  s.command = std::move(split.command);
  const auto& w = split.options_and_image;
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& a = w[i];
    if (a == "--") {
      if (i + 2 != w.size()) return std::nullopt;
      s.opts.image = w[i + 1];
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      if (i + 1 != w.size()) return std::nullopt;
      s.opts.image = a;
      break;
    }
    if (a[1] == '-') {
      size_t eq = a.find('=');
      const OptSpec* o = find_option(std::string_view(a).substr(0, eq));
      if (!o || (!o->value && eq != std::string::npos)) return std::nullopt;
      if (!o->value) o->apply(s, {});
      else if (eq != std::string::npos) o->apply(s, a.substr(eq + 1));
      else if (optional_value(*o)) o->apply(s, {});
      else if (i + 1 < w.size()) o->apply(s, w[++i]);
      else return std::nullopt;
      continue;
    }
    for (size_t c = 1; c < a.size(); ++c) {  // a cluster of short options
      const OptSpec* o = find_option(std::string("-") + a[c]);
      if (!o) return std::nullopt;
      if (!o->value) {
        o->apply(s, {});
        continue;
      }
      if (c + 1 < a.size()) o->apply(s, a.substr(c + 1));
      else if (i + 1 < w.size()) o->apply(s, w[++i]);
      else return std::nullopt;
      break;
    }
  }
  if (s.opts.image.empty()) return std::nullopt;  // let CLI11 explain
  return run_state(s, mode);
}

void add_exec_commands(CLI::App& app, std::vector<Command>& out, const std::string& only) {
  struct Verb {
    const char* name;
    const char* help;
    ExecMode mode;
  };
  static constexpr Verb kVerbs[] = {
      {"exec", "run PROG in IMAGE", ExecMode::Exec},
      {"run", "run the image's ENTRYPOINT/CMD in its WORKDIR", ExecMode::Run},
      {"shell", "start an interactive shell in IMAGE", ExecMode::Shell},
  };
  bool known = false;
  for (const auto& v : kVerbs) known = known || only == v.name;
  for (const auto& v : kVerbs)
    if (!known || only == v.name) add_one(app, out, v.name, v.help, v.mode);
}

} // namespace rt::cli
