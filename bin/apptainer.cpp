// Apptainer's command line, turned into rt's; see apptainer.hpp.
#include "apptainer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "exec_args.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"

namespace rt::cli {
namespace {

constexpr const char* kUsage =
    "Usage: apptainer [-q|-s|-d|-v] COMMAND [OPTIONS] ...   (rt's Apptainer command line)\n"
    "\n"
    "  exec [OPTIONS] IMAGE PROG [ARGS...]   run PROG in IMAGE\n"
    "  run [OPTIONS] IMAGE [ARGS...]         the image's runscript, or its ENTRYPOINT/CMD\n"
    "  shell [OPTIONS] IMAGE                 an interactive shell\n"
    "  test [OPTIONS] IMAGE                  the image's test script\n"
    "  pull [--force] [--name FILE] [FILE] docker://REF|oras://REF\n"
    "  push FILE.sif oras://REF\n"
    "  build [--force] [--sandbox] [--notest] [--build-arg K=V] TARGET docker://REF|docker-archive://TAR|DIR|FILE.sif|FILE.def\n"
    "  inspect [--deffile|--labels|--runscript|--startscript|--test|--environment|--helpfile] IMAGE\n"
    "  overlay create [--size MiB] [--sparse] [--create-dir DIR] FILE\n"
    "  verify [--key FILE] [--legacy-insecure] FILE.sif | sign [--key FILE] FILE.sif\n"
    "  run-help IMAGE | instance start|stop|list | cache clean | version\n"
    "\n"
    "IMAGE: a SIF, SquashFS or .simg file, a directory, a stored name, docker://REF\n"
    "or instance://NAME. man rt-apptainer lists every option and what rt makes of it.\n";

[[noreturn]] void refuse(const std::string& option, const std::string& why, const std::string& hint = {}) {
  throw Error("apptainer: " + option + " is not supported by rt: " + why,
              hint.empty() ? "man rt-apptainer lists what rt supports" : hint);
}

std::string without_docker(const std::string& ref) {
  if (ref.starts_with("docker://")) return ref.substr(9);
  if (ref.starts_with("oras://"))
    refuse("`oras://` here", "rt runs a SIF file from a registry once it is pulled",
           "apptainer pull FILE.sif " + ref + ", then use FILE.sif");
  for (const char* scheme : {"library://", "shub://", "http://", "https://"})
    if (ref.starts_with(scheme))
      refuse("`" + std::string(scheme) + "`", "rt pulls from OCI registries only",
             "use docker://REGISTRY/REPO:TAG (rt pull and rt login speak to any OCI registry)");
  return ref;
}

// A definition file: named *.def, or a file whose first line that is
// neither blank nor a comment is a `Bootstrap:` header.
bool is_definition_file(const std::string& path) {
  if (path.ends_with(".def")) return true;
  struct stat st;
  if (path.find("://") != std::string::npos || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find_first_not_of(" \t\r");
    if (at == std::string::npos || line[at] == '#') continue;
    std::string head = line.substr(at, 10);
    for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return head == "bootstrap:";
  }
  return false;
}

// Apptainer's IMAGE is a path first: a bare name of a file or directory
// here is that (rt would look for a stored image). Where it is a stored
// image's name too, neither is taken: another user may have put the file
// in a shared directory.
std::string path_first(const std::string& image) {
  struct stat st;
  if (image.find('/') != std::string::npos || image.find("://") != std::string::npos ||
      ::lstat(image.c_str(), &st) != 0)
    return image;
  if (stored_image(image, ""))
    throw Error("`" + image + "` is both a file here and an image in your store",
                "write ./" + image + " for the file, or use rt exec " + image + " for the stored image");
  return "./" + image;
}

// Apptainer's default file name for a pulled REF: NAME_TAG.sif.
std::string default_pull_name(const std::string& ref) {
  std::string r = ref.substr(ref.rfind('/') == std::string::npos ? 0 : ref.rfind('/') + 1);
  if (size_t at = r.find('@'); at != std::string::npos) r = r.substr(0, at);
  size_t colon = r.find(':');
  std::string name = r.substr(0, colon), tag = colon == std::string::npos ? "latest" : r.substr(colon + 1);
  return name + "_" + tag + ".sif";
}

// The words of one command, with Go's flag forms: --name=value, --name
// value, -x value, -xvalue, and clusters of one-letter flags (-ce).
class Words {
public:
  explicit Words(const std::vector<std::string>& w, size_t from) : w_(w), i_(from) {}
  bool done() const { return i_ >= w_.size(); }
  const std::string& peek() const { return w_[i_]; }
  std::string take() { return w_[i_++]; }
  // The next word, an option: "--name=value" gives "--name" and sets
  // `inline_value` (for value_for).
  std::string take_option(std::optional<std::string>& inline_value) {
    std::string word = take();
    if (size_t eq = word.find('='); eq != std::string::npos && word.starts_with("--")) {
      inline_value = word.substr(eq + 1);
      word.resize(eq);
    }
    return word;
  }
  std::vector<std::string> rest() const { return {w_.begin() + static_cast<long>(i_), w_.end()}; }
  std::string value_for(const std::string& opt, std::optional<std::string>& inline_value) {
    if (inline_value) return *std::exchange(inline_value, std::nullopt);
    if (done()) throw Error("apptainer: option " + opt + " needs a value");
    return take();
  }

private:
  const std::vector<std::string>& w_;
  size_t i_;
};

// What the options of exec/run/shell/test/instance start ask for.
struct Action {
  std::vector<std::string> rt;  // rt exec options
  bool contain = false, containall = false, cleanenv = false, net = false, pid = false, ipc = false;
  std::string network, workdir, home;
  bool no_home = false, help = false;
};

void add_binds(Action& a, const std::string& list, const char* from) {
  for (const auto& b : split_words(list, ',')) {
    if (b.empty()) continue;
    auto f = split_words(b, ':');
    if (f.size() > 3 || f[0].empty())
      throw Error("apptainer: bad bind `" + b + "` (" + from + "): expected SRC[:DST[:ro|rw]]");
    if (f.size() == 3 && f[2] != "ro" && f[2] != "rw")
      refuse("bind option `" + f[2] + "` (in `" + b + "`)", "rt binds take ro or rw only");
    a.rt.insert(a.rt.end(), {"--bind", f.size() == 1 ? f[0] : f.size() == 2 ? f[0] + ":" + f[1] : b});
  }
}

// --env A=1,B=2: a comma starts a new assignment only before NAME=.
void add_env_list(Action& a, const std::string& list) {
  std::vector<std::string> out;
  for (const auto& part : split_words(list, ',')) {
    const size_t eq = part.find('=');
    if (eq != std::string::npos && eq > 0 && part.find_first_of(" \t") > eq)
      out.push_back(part);
    else if (!out.empty())
      out.back() += "," + part;
    else
      throw Error("apptainer: bad --env `" + list + "`: expected NAME=VALUE[,NAME=VALUE...]");
  }
  for (const auto& kv : out) a.rt.insert(a.rt.end(), {"--env", kv});
}

// Reads the options of an action command up to IMAGE (Words stops there).
Action read_action_options(Words& w, const std::string& command) {
  Action out;
  struct Opt {
    const char* names;  // "-B,--bind"
    bool value;
    void (*apply)(Action&, const std::string&);
  };
  static const Opt opts[] = {
      {"-B,--bind", true, [](Action& a, const std::string& v) { add_binds(a, v, "--bind"); }},
      {"--mount", true,
       [](Action& a, const std::string& v) {
         a.rt.insert(a.rt.end(), {"--mount", v});
       }},
      {"-H,--home", true, [](Action& a, const std::string& v) { a.home = v; }},
      {"--no-home", false, [](Action& a, const std::string&) { a.no_home = true; }},
      {"--pwd", true,
       [](Action& a, const std::string& v) {
         a.rt.insert(a.rt.end(), {"--cd", v});
       }},
      {"-c,--contain", false, [](Action& a, const std::string&) { a.contain = true; }},
      {"-C,--containall", false, [](Action& a, const std::string&) { a.containall = true; }},
      {"-e,--cleanenv", false, [](Action& a, const std::string&) { a.cleanenv = true; }},
      {"--env", true, add_env_list},
      {"--env-file", true,
       [](Action& a, const std::string& v) {
         a.rt.insert(a.rt.end(), {"--env-file", v});
       }},
      // As Apptainer does, --nv on a host without NVIDIA's driver is a
      // warning, not an error: job scripts pass it on every node.
      {"--nv,--nvccli", false,
       [](Action& a, const std::string&) {
         if (::access("/proc/driver/nvidia/version", F_OK) == 0)
           a.rt.push_back("--gpu");
         else
           std::fputs("rt: warning: --nv: no NVIDIA driver on this host (/proc/driver/nvidia): running without\n",
                      stderr);
       }},
      {"-w,--writable", false, [](Action& a, const std::string&) { a.rt.push_back("--write"); }},
      {"--writable-tmpfs", false, [](Action& a, const std::string&) { a.rt.push_back("--write-tmpfs"); }},
      {"--app", true, [](Action& a, const std::string& v) { a.rt.insert(a.rt.end(), {"--app", v}); }},
      {"-o,--overlay", true,
       [](Action& a, const std::string& v) {
         a.rt.insert(a.rt.end(), {"--overlay", v});
       }},
      {"-f,--fakeroot", false,
       [](Action& a, const std::string&) {
         a.rt.insert(a.rt.end(), {"--root", "--seccomp"});
       }},
      {"-p,--pid", false, [](Action& a, const std::string&) { a.pid = true; }},
      {"-i,--ipc", false, [](Action& a, const std::string&) { a.ipc = true; }},
      {"-n,--net", false, [](Action& a, const std::string&) { a.net = true; }},
      {"--network", true, [](Action& a, const std::string& v) { a.network = v; }},
      {"-W,--workdir", true, [](Action& a, const std::string& v) { a.workdir = v; }},
      {"-S,--scratch", true,
       [](Action& a, const std::string& v) {
         for (const auto& d : split_words(v, ','))
           if (!d.empty()) a.rt.insert(a.rt.end(), {"--tmpfs", d});
       }},
      {"--compat", false,
       [](Action& a, const std::string&) {
         a.containall = true;
         a.rt.push_back("--write-tmpfs");
       }},
      {"--no-mount", true,
       [](Action& a, const std::string& v) {
         for (const auto& m : split_words(v, ',')) {
           if (m == "home")
             a.no_home = true;
           else if (m == "tmp")
             a.rt.push_back("--private-tmp");
           else if (m != "hostfs" && m != "bind-paths" && !m.empty())
             refuse("--no-mount " + m, "rt always mounts the host's /proc, /sys, /dev and working directory",
                    "--contain leaves the working directory out");
         }
       }},
      // Accepted, as they change nothing under rt: it always uses a user
      // namespace, has no init shim, never shell-evaluates arguments or
      // the environment, and gains no privilege.
      {"-u,--userns,--no-init,--no-eval,--no-privs,--unsquash,--sif-fuse,--disable-cache,--no-https,--nohttps,"
       "--no-umask,--cleanenv=false",
       false, [](Action&, const std::string&) {}},
  };
  struct Refused {
    const char* names;
    bool value;
    const char* why;
  };
  static const Refused refused[] = {
      {"--rocm", false, "rt injects NVIDIA's driver (--nv) but not AMD's ROCm"},
      {"--cpus,--memory,--memory-reservation,--memory-swap,--cpu-shares,--cpuset-cpus,--cpuset-mems,--blkio-weight,"
       "--pids-limit,--oom-kill-disable,--apply-cgroups",
       true,
       "limits need a cgroup delegated to the user; ask the batch system for them (Slurm --cpus-per-task, --mem)"},
      {"--keep-privs,--allow-setuid", false, "rt gives the container no privilege"},
      {"--add-caps,--drop-caps,--security", true, "rt gives the container no capability to add or drop"},
      {"--hostname", true, "rt shares the host's UTS namespace"},
      {"--dns", true, "rt uses the host's /etc/resolv.conf"},
      {"--network-args", true, "rt has no network but the host's and none"},
      {"--fusemount", true, "FUSE mounts into the container are not supported"},
      {"--boot", false, "rt runs no init system"},
      {"--uts", false, "rt shares the host's UTS namespace"},
      {"--userns=false", false, "rt always uses a user namespace"},
  };
  auto named = [](const char* names, const std::string& n) {
    for (const auto& x : split_words(names, ','))
      if (x == n) return true;
    return false;
  };
  while (!w.done()) {
    const std::string word = w.peek();
    if (word == "--") {
      w.take();
      break;
    }
    if (word.size() < 2 || word[0] != '-') break;  // IMAGE
    w.take();
    // One-letter flags may come clustered (-ce); a letter taking a value
    // takes the rest of the word.
    std::vector<std::pair<std::string, std::optional<std::string>>> given;
    if (word[1] == '-') {
      const size_t eq = word.find('=');
      bool whole = false;  // --userns=false and the like name a form of their own
      for (const auto& o : opts) whole |= named(o.names, word);
      for (const auto& r : refused) whole |= named(r.names, word);
      if (eq != std::string::npos && !whole)
        given.emplace_back(word.substr(0, eq), word.substr(eq + 1));
      else
        given.emplace_back(word, std::nullopt);
    } else {
      for (size_t c = 1; c < word.size(); ++c) {
        std::string n = std::string("-") + word[c];
        bool takes = false;
        for (const auto& o : opts) takes |= named(o.names, n) && o.value;
        for (const auto& r : refused) takes |= named(r.names, n) && r.value;
        if (takes && c + 1 < word.size()) {
          given.emplace_back(n, word.substr(c + 1 + (word[c + 1] == '=' ? 1 : 0)));
          break;
        }
        given.emplace_back(n, std::nullopt);
      }
    }
    for (auto& [name, inline_value] : given) {
      if (name == "-h" || name == "--help") {
        out.help = true;
        return out;
      }
      bool done = false;
      for (const auto& o : opts) {
        if (!named(o.names, name)) continue;
        if (!o.value && inline_value && *inline_value != "true")
          throw Error("apptainer: option " + name + " takes no value");
        o.apply(out, o.value ? w.value_for(name, inline_value) : std::string());
        done = true;
        break;
      }
      for (const auto& r : refused)
        if (!done && named(r.names, name)) refuse(name, r.why);
      if (!done)
        throw Error("apptainer " + command + ": unknown option `" + name + "`",
                    "man rt-apptainer lists the options rt knows");
    }
  }
  return out;
}

// The rt exec options an Action stands for; directories to make first.
std::vector<std::string> action_to_rt(const Action& a, std::vector<std::string>& make_dirs) {
  std::vector<std::string> rt = a.rt;
  const bool contain = a.contain || a.containall;
  if (contain) rt.push_back("--contain");
  if (a.cleanenv || a.containall) rt.push_back("--clean-env");
  if (a.pid || a.containall) rt.push_back("--pid");
  if (a.ipc || a.containall) rt.push_back("--ipc");
  if (a.net) {
    if (a.network != "none")
      refuse("--net" + (a.network.empty() ? std::string() : " --network " + a.network),
             "a network other than none needs root to set up", "--net --network none: only the loopback interface");
    rt.insert(rt.end(), {"--net", "none"});
  }
  if (!a.home.empty()) {
    if (std::count(a.home.begin(), a.home.end(), ':') > 1)
      throw Error("apptainer: bad --home `" + a.home + "`: expected SRC[:DST]");
    rt.insert(rt.end(), {"--home", a.home});
  } else if (a.no_home) {
    rt.push_back("--no-home");
  }
  // -W DIR: with --contain, /tmp and /var/tmp come from DIR/tmp and DIR/var_tmp.
  // Before the other binds: one below /tmp or /var/tmp stays visible.
  if (!a.workdir.empty() && contain) {
    for (const char* sub : {"tmp", "var_tmp"}) make_dirs.push_back(a.workdir + "/" + sub);
    rt.insert(rt.begin(), {"--bind", a.workdir + "/tmp:/tmp", "--bind", a.workdir + "/var_tmp:/var/tmp"});
  }
  return rt;
}

// APPTAINERENV_X / SINGULARITYENV_X: X inside (APPTAINERENV_ wins); they
// and APPTAINER_BIND, SINGULARITY_BIND(PATH) themselves stay outside.
void env_to_rt(Action& a, const std::vector<std::string>& env, const std::string& image) {
  std::vector<std::pair<std::string, std::string>> set;
  auto put = [&](const std::string& k, const std::string& v, bool wins) {
    for (auto& [pk, pv] : set)
      if (pk == k) {
        if (wins) pv = v;
        return;
      }
    set.emplace_back(k, v);
  };
  for (const auto& kv : env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k.starts_with("APPTAINERENV_") && k.size() > 13)
      put(k.substr(13), v, true);
    else if (k.starts_with("SINGULARITYENV_") && k.size() > 15)
      put(k.substr(15), v, false);
    else if (k == "APPTAINER_BIND" || k == "SINGULARITY_BIND" || k == "SINGULARITY_BINDPATH")
      add_binds(a, v, k.c_str());
  }
  // What Apptainer tells the program about its container.
  const std::string name = image.substr(image.rfind('/') == std::string::npos ? 0 : image.rfind('/') + 1);
  for (const char* p : {"APPTAINER", "SINGULARITY"}) {
    put(std::string(p) + "_CONTAINER", image, false);
    put(std::string(p) + "_NAME", name, false);
  }
  for (const char* glob :
       {"APPTAINERENV_*", "SINGULARITYENV_*", "APPTAINER_BIND", "SINGULARITY_BIND", "SINGULARITY_BINDPATH"})
    a.rt.insert(a.rt.end(), {"--unset-env", glob});
  for (const auto& [k, v] : set) a.rt.insert(a.rt.end(), {"--env", k + "=" + v});
}

bool is_action(const std::string& c) { return c == "exec" || c == "run" || c == "shell" || c == "test"; }

// pull/build --force|-F, --name FILE, --dir DIR, --sandbox|-s: read off the front.
struct OutputOptions {
  bool force = false, sandbox = false;
  std::string name, dir;
  std::vector<std::string> build;  // rt build's options for a definition file
};
OutputOptions read_output_options(Words& w, const std::string& command) {
  OutputOptions o;
  while (!w.done() && w.peek().size() > 1 && w.peek()[0] == '-') {
    std::optional<std::string> v;
    const std::string word = w.take_option(v);
    if (word == "-F" || word == "--force")
      o.force = true;
    else if ((word == "-s" || word == "--sandbox") && command == "build")
      o.sandbox = true;
    else if (word == "--name" && command == "pull")
      o.name = w.value_for(word, v);
    else if (word == "--dir" && command == "pull")
      o.dir = w.value_for(word, v);
    else if ((word == "-T" || word == "--notest") && command == "build")
      o.build.push_back("--notest");
    else if ((word == "--build-arg" || word == "--build-arg-file") && command == "build")
      o.build.insert(o.build.end(), {word, w.value_for(word, v)});
    else if (word == "--warn-unused-build-args" && command == "build")
      o.build.push_back(word);
    else if ((word == "--fakeroot" || word == "-f") && command == "build")
      ;  // rt builds under root emulation always
    else if (word == "--disable-cache" || word == "-U" || word == "--allow-unsigned" || word == "--no-https" ||
             word == "--nohttps")
      ;  // nothing to do: rt keeps a store, signs nothing, speaks TLS unless the registry is local
    else if (word == "--")
      break;
    else
      throw Error("apptainer " + command + ": unknown option `" + word + "`",
                  "man rt-apptainer lists the options rt knows");
  }
  return o;
}

}  // namespace

bool apptainer_personality(const char* argv0) {
  if (!argv0) return false;
  const char* base = std::strrchr(argv0, '/');
  base = base ? base + 1 : argv0;
  return std::strcmp(base, "apptainer") == 0 || std::strcmp(base, "singularity") == 0;
}

ApptainerPlan translate_apptainer(const std::vector<std::string>& words, const std::vector<std::string>& env) {
  ApptainerPlan plan;
  std::vector<std::string> global;  // rt's -q / -v
  size_t i = 0;
  for (; i < words.size() && words[i].size() > 1 && words[i][0] == '-'; ++i) {
    const std::string& g = words[i];
    if (g == "--version") {
      plan.print = std::string("apptainer version ") + kApptainerVersion + "\n";
      return plan;
    }
    if (g == "-h" || g == "--help") {
      plan.print = kUsage;
      return plan;
    }
    if (g == "-q" || g == "--quiet" || g == "-s" || g == "--silent")
      global = {"-q"};
    else if (g == "-d" || g == "--debug")
      global = {"-v", "-v"};
    else if (g == "-v" || g == "--verbose")
      global = {"-v"};
    else if (g != "--nocolor" && g != "--color")
      throw Error("apptainer: unknown global option `" + g + "`", "apptainer --help");
  }
  if (i >= words.size()) {
    plan.print = kUsage;
    return plan;
  }
  const std::string command = words[i++];
  Words w(words, i);
  if (command == "version") {
    plan.print = std::string(kApptainerVersion) + "\n";
    return plan;
  }
  if (command == "help") {
    plan.print = kUsage;
    return plan;
  }
  if (is_action(command) || command == "instance") {
    std::string sub;
    if (command == "instance") {
      if (w.done()) throw Error("apptainer instance: start, stop or list?");
      sub = w.take();
      if (sub == "list" || sub == "stop") {
        std::vector<std::string> step{"instance", sub};
        for (auto& x : w.rest()) {
          if (x == "-a") x = "--all";
          if (x == "-F" || x == "--force") x = "--signal=KILL";
          step.push_back(x);
        }
        plan.steps.push_back(step);
        return plan;
      }
      if (sub != "start") throw Error("apptainer instance " + sub + ": rt knows start, stop and list");
    }
    Action a = read_action_options(w, command);
    if (a.help) {
      plan.print = kUsage;
      return plan;
    }
    if (w.done()) throw Error("apptainer " + command + ": no image given");
    std::string image = w.take();
    image = path_first(image);
    image = without_docker(image);  // docker:// dropped, other schemes refused
    env_to_rt(a, env, image);
    std::vector<std::string> rt = action_to_rt(a, plan.make_dirs);
    rt.insert(rt.begin(), global.begin(), global.end());
    std::vector<std::string> step;
    if (command == "instance") {
      if (w.done()) throw Error("apptainer instance start: no instance name given");
      const std::string name = w.take();
      step = {"instance", "start"};
      step.insert(step.end(), rt.begin(), rt.end());
      step.insert(step.end(), {"--", image, name});
    } else {
      if (command == "exec" && w.done()) throw Error("apptainer exec: no program given to run in `" + image + "`");
      if (command == "shell" && !w.done()) throw Error("apptainer shell takes no command");
      step = {command == "test" ? "exec" : command};
      step.insert(step.end(), rt.begin(), rt.end());
      step.insert(step.end(), {"--", image, "--"});
      plan.test = command == "test";
    }
    for (const auto& x : w.rest()) step.push_back(x);
    plan.steps.push_back(step);
    return plan;
  }
  if (command == "pull" || command == "build") {
    OutputOptions o = read_output_options(w, command);
    std::vector<std::string> pos = w.rest();
    std::string target, source;
    if (command == "pull") {
      if (pos.empty() || pos.size() > 2)
        throw Error("usage: apptainer pull [--force] [--name FILE] [FILE] docker://REF|oras://REF");
      source = pos.back();
      const std::string ref = source.starts_with("oras://") ? source.substr(7) : without_docker(source);
      target = !o.name.empty() ? o.name : pos.size() == 2 ? pos[0] : default_pull_name(ref);
      if (!o.dir.empty()) target = o.dir + "/" + target;
    } else {
      if (pos.size() != 2) throw Error("usage: apptainer build [--force] [--sandbox] TARGET SOURCE");
      target = pos[0];
      source = pos[1];
    }
    const std::vector<std::string> to = {"--to", o.sandbox ? "rootfs" : "sif"};
    if (!o.build.empty() && !is_definition_file(source))
      throw Error("apptainer build: " + o.build.front() + " is for definition files, and `" + source + "` is none");
    if (!o.force) plan.refuse_if_exists = target;
    std::vector<std::string> q = global.empty() ? std::vector<std::string>{} : global;
    auto convert = [&](const std::string& from) {
      std::vector<std::string> c{"convert"};
      c.insert(c.end(), q.begin(), q.end());
      c.insert(c.end(), to.begin(), to.end());
      if (o.force) c.push_back("--force");
      c.insert(c.end(), {"--", from, target});
      return c;
    };
    if (command == "pull" && source.starts_with("oras://")) {
      // A SIF file in a registry: rt pull writes it as it is.
      std::vector<std::string> pull{"pull"};
      pull.insert(pull.end(), q.begin(), q.end());
      pull.insert(pull.end(), {"--", source, target});
      plan.steps.push_back(pull);
    } else if (source.starts_with("docker-archive://") || source.starts_with("oci-archive://")) {
      plan.steps.push_back(convert(source.substr(source.find("://") + 3)));
    } else if (source.find("://") != std::string::npos || command == "pull") {
      const std::string ref = without_docker(source);
      std::vector<std::string> pull{"pull"};
      pull.insert(pull.end(), q.begin(), q.end());
      pull.insert(pull.end(), {"--", ref});
      plan.steps.push_back(pull);
      plan.steps.push_back(convert(ref));
    } else if (is_definition_file(source)) {
      // rt build into the store under a name of its own, then the file or
      // sandbox from there; the name is removed (its layers stay cached).
      std::string name = "apptainer-build-";
      for (char c : target.substr(target.rfind('/') + 1))
        name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
      std::vector<std::string> build{"build"};
      build.insert(build.end(), q.begin(), q.end());
      build.insert(build.end(), {"-t", name, "-f", source});
      build.insert(build.end(), o.build.begin(), o.build.end());
      build.insert(build.end(), {"--", "."});
      plan.steps.push_back(build);
      plan.steps.push_back(convert(name));
      plan.steps.push_back({"rm", name});
    } else {
      plan.steps.push_back(convert(source));  // a sandbox directory, a SIF/SquashFS file, a stored name
    }
    return plan;
  }
  if (command == "push") {
    // apptainer push [-U] FILE.sif oras://REF: rt push sends it as Apptainer does.
    std::vector<std::string> pos;
    while (!w.done()) {
      std::optional<std::string> value;
      const std::string x = w.take_option(value);
      if (x == "-U" || x == "--allow-unsigned") {
        ;  // rt checks no signatures before a push
      } else if (x == "--") {
        for (const auto& y : w.rest()) pos.push_back(y);
        break;
      } else if (x.starts_with("-") && x != "-") {
        refuse("push " + x, "rt push takes the credentials of rt login", "man rt-apptainer");
      } else {
        pos.push_back(x);
      }
    }
    if (pos.size() != 2) throw Error("usage: apptainer push FILE.sif oras://REF");
    if (!pos[1].starts_with("oras://"))
      refuse("push to `" + pos[1] + "`", "rt's Apptainer command line pushes SIF files to oras:// only",
             "apptainer push FILE.sif oras://REGISTRY/REPO:TAG, or rt push for an OCI image");
    std::vector<std::string> step{"push"};
    step.insert(step.end(), global.begin(), global.end());
    step.insert(step.end(), {"--", path_first(pos[0]), pos[1]});
    plan.steps.push_back(step);
    return plan;
  }
  if (command == "verify" || command == "sign") {
    // apptainer verify|sign [--key FILE] FILE.sif: rt verify / rt sign
    // (OpenPGP only). Without --key, Apptainer's own keyring file:
    // $APPTAINER_KEYSDIR, else ~/.apptainer/keys (pgp-public, pgp-secret).
    std::vector<std::string> step{command};
    step.insert(step.end(), global.begin(), global.end());
    std::vector<std::string> pos;
    bool key = false;
    while (!w.done()) {
      std::optional<std::string> value;
      const std::string x = w.take_option(value);
      if (x == "--key") {
        step.insert(step.end(), {"--key", w.value_for(x, value)});
        key = true;
      } else if (x == "--legacy-insecure" && command == "verify") {
        step.push_back(x);
      } else if (x == "-l" || x == "--local" || x == "-a" || x == "--all") {
        ;  // rt asks no key server, and always covers every object of every group
      } else if (x == "-g" || x == "--group-id" || x == "-i" || x == "--sif-id" || x == "--id") {
        refuse(command + " " + x, "rt " + command + "s every object group of the file, whole");
      } else if (x == "-k" || x == "--keyidx") {
        refuse("sign " + x, "rt signs with the key file given", "apptainer sign --key FILE.asc IMAGE.sif");
      } else if (x == "-u" || x == "--url") {
        refuse(command + " " + x, "rt asks no key server: it trusts the keys given with --key");
      } else if (x == "-j" || x == "--json") {
        refuse(command + " " + x, "rt verify reports in lines of text");
      } else if (x.starts_with("--certificate") || x == "--ocsp-verify") {
        refuse(command + " " + x, "rt checks OpenPGP signatures only, not X.509 certificates");
      } else if (x == "--") {
        for (const auto& y : w.rest()) pos.push_back(y);
        break;
      } else if (x.starts_with("-") && x != "-") {
        throw Error("apptainer " + command + ": unknown option `" + x + "`", "man rt-apptainer");
      } else {
        pos.push_back(x);
      }
    }
    if (pos.size() != 1) throw Error("usage: apptainer " + command + " [--key FILE] FILE.sif");
    if (!key) {
      std::string dir, home;
      for (const auto& e : env) {
        if (e.starts_with("APPTAINER_KEYSDIR=")) dir = e.substr(18);
        if (e.starts_with("HOME=")) home = e.substr(5);
      }
      if (dir.empty() && !home.empty()) dir = home + "/.apptainer/keys";
      if (dir.empty()) throw Error("apptainer " + command + ": no --key FILE given, and no HOME for Apptainer's keyring");
      step.insert(step.end(), {"--key", dir + (command == "verify" ? "/pgp-public" : "/pgp-secret")});
    }
    step.insert(step.end(), {"--", path_first(pos[0])});
    plan.steps.push_back(step);
    return plan;
  }
  if (command == "inspect" || command == "run-help") {
    // One section by its flag (the first given); without one, all rt
    // knows, as JSON (--json, --all).
    static const std::map<std::string, std::string> kSections = {
        {"-d", "deffile"},      {"--deffile", "deffile"},         {"-l", "labels"},       {"--labels", "labels"},
        {"-r", "runscript"},    {"--runscript", "runscript"},     {"-t", "test"},         {"--test", "test"},
        {"-e", "environment"},  {"--environment", "environment"}, {"-H", "help"},         {"--helpfile", "help"},
        {"-s", "startscript"},  {"--startscript", "startscript"}};
    std::vector<std::string> step{"inspect"};
    if (command == "run-help") step.insert(step.end(), {"--section", "help"});
    std::vector<std::string> pos;
    for (const auto& x : w.rest()) {
      if (auto s = kSections.find(x); s != kSections.end() && step.size() == 1)
        step.insert(step.end(), {"--section", s->second});
      else if (x.empty() || x[0] != '-')
        pos.push_back(x);
    }
    if (pos.size() != 1) throw Error("usage: apptainer " + command + " IMAGE");
    step.push_back(without_docker(path_first(pos[0])));
    plan.steps.push_back(step);
    return plan;
  }
  if (command == "cache") {
    const std::string sub = w.done() ? "" : w.take();
    if (sub == "clean") {
      plan.steps.push_back({"prune"});
      return plan;
    }
    if (sub == "list") {
      plan.steps.push_back({"images"});
      return plan;
    }
    throw Error("apptainer cache " + sub + ": rt knows cache clean (rt prune) and cache list (rt images)");
  }
  if (command == "overlay") {
    // apptainer overlay create [--size MiB] [--sparse] [--create-dir DIR]... FILE
    if (w.done() || w.take() != "create") throw Error("usage: apptainer overlay create [OPTIONS] FILE");
    std::vector<std::string> step{"overlay", "create"};
    std::vector<std::string> pos;
    while (!w.done()) {
      std::optional<std::string> value;
      const std::string x = w.take_option(value);
      if (x == "-s" || x == "--size")
        step.insert(step.end(), {"--size", w.value_for(x, value)});
      else if (x == "--create-dir")
        step.insert(step.end(), {"--create-dir", w.value_for(x, value)});
      else if (x == "--sparse")
        step.push_back("--sparse");
      else if (x == "--fakeroot")
        refuse("overlay create --fakeroot", "rt's overlay images hold the user's own files");
      else if (x.starts_with("-") && x != "-")
        refuse("overlay create " + x, "rt takes --size, --sparse and --create-dir");
      else
        pos.push_back(x);
    }
    if (pos.size() != 1) throw Error("usage: apptainer overlay create [OPTIONS] FILE");
    step.insert(step.end(), {"--", pos[0]});
    plan.steps.push_back(step);
    return plan;
  }
  refuse("`" + command + "`",
         "rt's Apptainer command line has exec, run, shell, test, pull, push, build, inspect, run-help, "
         "instance, overlay create, verify, sign, cache and version");
}

}  // namespace rt::cli
