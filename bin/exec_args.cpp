// Reading the words of exec, run and shell (pure, CLI side); see exec_args.hpp.
#include "exec_args.hpp"

#include <string_view>

#include "rt/error.hpp"

namespace rt::cli {

struct ExecState {
  ExecOptions opts;
  std::vector<std::string> binds;
  int verbose = 0;
  bool quiet = false;
  bool root = false;
};

namespace {

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

// Docker's --mount type=bind,source=SRC,target=DST[,readonly] (the keys
// also as src, dst, destination; `readonly` also as ro, ro=true) as a
// --bind value.
std::string docker_mount(const std::string& v) {
  std::string src, dst, type = "bind";
  bool ro = false;
  for (const auto& field : split_words(v, ',')) {
    const size_t eq = field.find('=');
    const std::string k = field.substr(0, eq), val = eq == std::string::npos ? "" : field.substr(eq + 1);
    if (k == "type")
      type = val;
    else if (k == "source" || k == "src")
      src = val;
    else if (k == "target" || k == "dst" || k == "destination")
      dst = val;
    else if ((k == "readonly" || k == "ro") && (eq == std::string::npos || val == "true" || val == "1"))
      ro = true;
    else if (!((k == "readonly" || k == "ro") && (val == "false" || val == "0")))
      throw Error("--mount `" + v + "`: rt does not know `" + field + "`",
                  "rt takes type=bind,source=SRC,target=DST[,readonly]");
  }
  if (type != "bind") throw Error("--mount `" + v + "`: only type=bind is supported, not `" + type + "`");
  if (src.empty() || dst.empty()) throw Error("--mount `" + v + "` needs source= and target=");
  if (src.find(':') != std::string::npos || dst.find(':') != std::string::npos)
    throw Error("--mount `" + v + "`: a path with ':' cannot be bound");
  return src + ":" + dst + (ro ? ":ro" : "");
}

constexpr OptSpec kOptions[] = {
    {"-v,--verbose", nullptr, "print the plan (ids, mounts, environment); twice adds timings",
     [](ExecState& s, const std::string&) { ++s.verbose; }},
    {"-q,--quiet", nullptr, "print errors only", [](ExecState& s, const std::string&) { s.quiet = true; }},
    {"--uid", "UID", "user id inside the container (default: yours)",
     [](ExecState& s, const std::string& v) { s.opts.uid = parse_id(v, "--uid"); }},
    {"--gid", "GID", "group id inside the container (default: yours)",
     [](ExecState& s, const std::string& v) { s.opts.gid = parse_id(v, "--gid"); }},
    {"--root", nullptr, "be uid 0 and gid 0 inside (same as --uid 0 --gid 0)",
     [](ExecState& s, const std::string&) { s.root = true; }},
    {"-b,--bind,--volume", "SRC[:DST[:ro]]", "bind SRC at DST (default: SRC), read-only with :ro; repeatable",
     [](ExecState& s, const std::string& v) { s.binds.push_back(v); }},
    {"--mount", "type=bind,source=SRC,target=DST[,readonly]", "a bind in Docker's form; repeatable",
     [](ExecState& s, const std::string& v) { s.binds.push_back(docker_mount(v)); }},
    {"-w,--write", nullptr, "make a directory image writable",
     [](ExecState& s, const std::string&) { s.opts.write = true; }},
    {"--write-tmpfs", nullptr, "writable image with changes kept in memory and discarded at exit",
     [](ExecState& s, const std::string&) { s.opts.write_tmpfs = true; }},
    {"--app", "NAME",
     "a SCIF app of the image: its runscript (run), test (test), environment and PATH (/scif/apps/NAME)",
     [](ExecState& s, const std::string& v) { s.opts.app = v; }},
    {"--overlay", "DIR|FILE[:ro]",
     "lay a directory or an ext3 overlay image (rt overlay create) over the image: writes kept in its upper/ (one "
     "such), or read-only with :ro; repeatable",
     [](ExecState& s, const std::string& v) { s.opts.overlays.push_back(v); }},
    {"--seccomp", nullptr,
     "root emulation: chown, set*id, setgroups and device mknod succeed without effect (for package managers)",
     [](ExecState& s, const std::string&) { s.opts.seccomp = true; }},
    {"--private-tmp", nullptr, "a private empty /tmp instead of the host's",
     [](ExecState& s, const std::string&) { s.opts.private_tmp = true; }},
    {"--no-home", nullptr, "do not bind your home directory",
     [](ExecState& s, const std::string&) { s.opts.no_home = true; }},
    {"--home", "SRC[:DST]", "bind SRC at DST (default: SRC) as the home directory instead of yours",
     [](ExecState& s, const std::string& v) { s.opts.home = v; }},
    {"--contain", nullptr,
     "share no directory but /dev, /proc, /sys and binds: private /tmp and /var/tmp, an empty home, no working "
     "directory",
     [](ExecState& s, const std::string&) { s.opts.contain = true; }},
    {"--tmpfs", "DIR", "a private empty tmpfs at DIR inside; repeatable",
     [](ExecState& s, const std::string& v) { s.opts.tmpfs.push_back(v); }},
    {"--cd,--workdir", "DIR", "start in DIR inside the container",
     [](ExecState& s, const std::string& v) { s.opts.cd = v; }},
    {"--rm", nullptr, "accepted: nothing of a container is kept after it exits", [](ExecState&, const std::string&) {}},
    {"--net", "none", "a network namespace of its own with only the loopback interface",
     [](ExecState& s, const std::string& v) {
       if (v != "none" && v != "host")
         throw Error("--net " + v + ": rt has no network but the host's and none", "use --net none (or --net host)");
       s.opts.net_none = v == "none";
     }},
    {"--pid", nullptr, "a PID namespace of its own: the program is PID 1's child and nothing outlives it",
     [](ExecState& s, const std::string&) { s.opts.pid_namespace = true; }},
    {"--ipc", nullptr, "System V IPC and POSIX message queues of its own",
     [](ExecState& s, const std::string&) { s.opts.ipc_namespace = true; }},
    {"-e,--env", "NAME=VALUE", "set NAME=VALUE inside; repeatable",
     [](ExecState& s, const std::string& v) { s.opts.env_set.push_back(v); }},
    {"--env-file", "FILE", "read NAME=VALUE lines from FILE; repeatable",
     [](ExecState& s, const std::string& v) { s.opts.env_files.push_back(v); }},
    {"--unset-env", "GLOB", "remove variables matching GLOB; repeatable",
     [](ExecState& s, const std::string& v) { s.opts.env_unset.push_back(v); }},
    {"--clean-env", nullptr, "start from an empty environment (keeping HOME, USER, TERM, LANG and launcher variables)",
     [](ExecState& s, const std::string&) { s.opts.clean_env = true; }},
    {"-n,--dry-run", nullptr, "print the plan and exit without running anything",
     [](ExecState& s, const std::string&) { s.opts.dry_run = true; }},
    {"--storage", "DIR", "image store (default: $RT_STORAGE or /var/tmp/$USER.rt)",
     [](ExecState& s, const std::string& v) { s.opts.storage = v; }},
    {"--mpi", "[openmpi|mpich|PATH]",
     "inject the host's MPI library, its dependencies and plugins (default: the image's MPI ABI)",
     [](ExecState& s, const std::string& v) { s.opts.mpi = v.empty() ? "auto" : v; }},
    {"--gpu", nullptr, "inject the host's NVIDIA driver libraries and tools (automatic when the image asks)",
     [](ExecState& s, const std::string&) { s.opts.gpu = ExecOptions::Inject::On; }},
    {"--no-gpu", nullptr, "never inject the NVIDIA driver",
     [](ExecState& s, const std::string&) { s.opts.gpu = ExecOptions::Inject::Off; }},
    {"--ib", nullptr, "inject the host's InfiniBand verbs, providers and fabric plugins (automatic with a verbs device)",
     [](ExecState& s, const std::string&) { s.opts.ib = ExecOptions::Inject::On; }},
    {"--no-ib", nullptr, "never inject the InfiniBand stack",
     [](ExecState& s, const std::string&) { s.opts.ib = ExecOptions::Inject::Off; }},
    {"--fabric", nullptr, "inject only the host's fabric provider (libfabric, xpmem) under the image's own MPI",
     [](ExecState& s, const std::string&) { s.opts.fabric = true; }},
    {"--no-glibc-replace", nullptr,
     "refuse an image whose glibc is older than injected libraries need (default: use the host's glibc in it)",
     [](ExecState& s, const std::string&) { s.opts.glibc_replace = false; }},
    {"--join", nullptr,
     "share one container with the other ranks of this launch on this node (default with a launcher)",
     [](ExecState& s, const std::string&) { s.opts.join = ExecOptions::Inject::On; }},
    {"--no-join", nullptr, "a container of its own for this rank",
     [](ExecState& s, const std::string&) { s.opts.join = ExecOptions::Inject::Off; }},
    {"--no-pull", nullptr, "an image reference not in the store is an error (default: pull it once)",
     [](ExecState& s, const std::string&) { s.opts.no_pull = true; }},
    {"--verify-key", "FILE", "a SIF image runs only if it verifies with this OpenPGP key (rt verify); repeatable",
     [](ExecState& s, const std::string& v) { s.opts.verify_keys.push_back(v); }},
    {"--policy", "FILE", "the trust policy of a pull on first use (containers-policy.json; default: as rt pull)",
     [](ExecState& s, const std::string& v) { s.opts.policy = v; }},
    {"--device", "VENDOR/CLASS=NAME", "add a CDI device (e.g. nvidia.com/gpu=all); repeatable",
     [](ExecState& s, const std::string& v) { s.opts.devices.push_back(v); }},
};

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

const char* verb_of(ExecMode mode) {
  return mode == ExecMode::Exec ? "exec" : mode == ExecMode::Run ? "run" : mode == ExecMode::Test ? "test" : "shell";
}

Error usage(ExecMode mode, const std::string& what) {
  const std::string verb = verb_of(mode);
  const char* synopsis = mode == ExecMode::Exec  ? "IMAGE [--] PROG [ARGS...]"
                         : mode == ExecMode::Run ? "IMAGE [--] [ARGS...]"
                                                 : "IMAGE";
  return Error(what, "usage: rt " + verb + " [OPTIONS] " + synopsis + " (options go before IMAGE; rt " + verb +
                         " --help lists them)");
}

}  // namespace

std::span<const OptSpec> exec_options() { return kOptions; }

std::vector<std::string> split_words(std::string_view s, char sep) {
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t next = s.find(sep, at);
    out.emplace_back(s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return out;
    at = next + 1;
  }
}

std::optional<ExecOptions> parse_exec_args(ExecMode mode, const std::vector<std::string>& w) {
  ExecState s;
  const std::string verb = verb_of(mode);
  auto value_for = [&](const OptSpec& o, const std::string& shown, size_t& i) -> std::string {
    if (i + 1 >= w.size()) throw usage(mode, "rt " + verb + ": option `" + shown + "` needs a value (" + o.value + ")");
    return w[++i];
  };
  size_t i = 0;
  for (; i < w.size(); ++i) {
    const std::string& a = w[i];
    if (a == "-h" || a == "--help") return std::nullopt;
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // IMAGE
    if (a[1] == '-') {
      const size_t eq = a.find('=');
      const std::string name = a.substr(0, eq);
      const OptSpec* o = find_option(name);
      if (!o) throw usage(mode, "rt " + verb + ": unknown option `" + name + "`");
      if (!o->value && eq != std::string::npos)
        throw usage(mode, "rt " + verb + ": option `" + name + "` takes no value");
      if (!o->value || (optional_value(*o) && eq == std::string::npos))
        o->apply(s, {});
      else
        o->apply(s, eq != std::string::npos ? a.substr(eq + 1) : value_for(*o, name, i));
      continue;
    }
    for (size_t c = 1; c < a.size(); ++c) {  // a cluster of short options
      const std::string name = std::string("-") + a[c];
      if (name == "-h") return std::nullopt;
      const OptSpec* o = find_option(name);
      if (!o) throw usage(mode, "rt " + verb + ": unknown option `" + name + "`");
      if (!o->value) {
        o->apply(s, {});
        continue;
      }
      // The first one taking a value takes the rest of the word, or the next word.
      o->apply(s, c + 1 < a.size() ? a.substr(c + 1) : value_for(*o, name, i));
      break;
    }
  }
  if (i >= w.size()) throw usage(mode, "rt " + verb + " needs an IMAGE");
  s.opts.image = w[i++];
  // `rt exec img --bind a:b ls`: PROG would be `--bind`. No program is
  // called that; the option was meant for rt (rt run passes such words to
  // the image's entrypoint, where they may well be options).
  if (mode == ExecMode::Exec && i < w.size() && w[i].size() > 1 && w[i][0] == '-' && w[i] != "--" &&
      find_option(w[i].substr(0, w[i].find('='))))
    throw usage(mode, "rt " + verb + ": `" + w[i] + "` comes after IMAGE `" + s.opts.image +
                          "`, where the command starts (write IMAGE -- PROG to run a program of that name)");
  if (i < w.size() && w[i] == "--") ++i;
  s.opts.command.assign(w.begin() + static_cast<long>(i), w.end());

  s.opts.mode = mode;
  if (mode == ExecMode::Shell && !s.opts.command.empty())
    throw Error("rt shell takes no command; use rt exec IMAGE PROG [ARGS...]");
  for (const auto& b : s.binds) s.opts.binds.push_back(parse_bind(b));
  if (s.root) {
    s.opts.uid = 0;
    s.opts.gid = 0;
  }
  s.opts.verbosity = s.quiet ? -1 : s.verbose;
  return s.opts;
}

}  // namespace rt::cli
