// `rt exec`, `rt run`, `rt shell`: read the words (exec_args), call rt::exec.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "apptainer.hpp"
#include "commands.hpp"
#include "exec_args.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "rt/slurm.hpp"

extern char** environ;

namespace rt::cli {
namespace {

// One usage line, with PROG, in place of CLI11's.
class Usage : public CLI::Formatter {
public:
  explicit Usage(std::string line) : line_(std::move(line)) {}
  std::string make_usage(const CLI::App*, std::string) const override { return "Usage: " + line_ + "\n"; }

private:
  std::string line_;
};

// The option table, shown by CLI11 as --help (it parses nothing else).
void add_one(CLI::App& app, std::vector<Command>& out, const char* name, const char* help, ExecMode mode) {
  CLI::App* sub = app.add_subcommand(name, help);
  for (const auto& o : exec_options()) {
    if (o.value)
      sub->add_option(o.names, o.help)->type_name(o.value);
    else
      sub->add_flag(o.names, o.help);
  }
  sub->add_option("image", "image directory, SquashFS file or stored image name")->type_name("IMAGE");
  sub->formatter(std::make_shared<Usage>(mode == ExecMode::Exec  ? "rt exec [OPTIONS] IMAGE [--] PROG [ARGS...]"
                                         : mode == ExecMode::Run ? "rt run [OPTIONS] IMAGE [--] [ARGS...]"
                                                                 : "rt shell [OPTIONS] IMAGE"));
  Command c;
  c.app = sub;
  c.run = [] { return 0; };
  out.push_back(std::move(c));
}

const char* verb_name(ExecMode mode) {
  return mode == ExecMode::Exec ? "exec" : mode == ExecMode::Run ? "run" : "shell";
}

// A name rt pull could fetch: a reference ([docker://][REGISTRY/]REPO[:TAG]),
// not a path, and not a file name mistyped (x.sqfs, x.sif, x.tar).
bool looks_pullable(const std::string& ref) {
  if (ref.starts_with("docker://")) return true;
  if (ref.empty() || ref[0] == '/' || ref[0] == '.' || ref[0] == '~') return false;
  for (const char* suffix : {".sqfs", ".squashfs", ".sif", ".tar", ".tar.gz", ".tgz"})
    if (ref.ends_with(suffix)) return false;
  return ref.find_first_of(" \t\n") == std::string::npos;
}

ExecMode mode_of(const std::string& verb) {
  return verb == "exec" ? ExecMode::Exec : verb == "run" ? ExecMode::Run : ExecMode::Shell;
}

}  // namespace

// Runs the full program (rt-image) with `args` and waits: its exit status.
int run_full_program(const std::vector<std::string>& args) {
  for (const auto& path : full_program_paths()) {
    if (::access(path.c_str(), X_OK) != 0) continue;
    std::vector<char*> argv{const_cast<char*>(path.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) throw rt::SysError{errno, "fork", path};
    if (pid == 0) {
      ::execv(path.c_str(), argv.data());
      ::_exit(127);
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0)
      if (errno != EINTR) throw rt::SysError{errno, "waitpid", path};
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  throw rt::Error("cannot find rt-image beside rt (" + full_program_paths().front() + ")");
}

bool is_exec_verb(const std::string& w) { return w == "exec" || w == "run" || w == "shell" || w == "instance"; }

void exec_full_program(const std::vector<std::string>& words, const char* argv0) {
  const std::vector<std::string> paths = full_program_paths();
  std::vector<char*> argv{const_cast<char*>(argv0)};
  for (const auto& w : words) argv.push_back(const_cast<char*>(w.c_str()));
  argv.push_back(nullptr);
  for (const auto& path : paths) {
    ::execv(path.c_str(), argv.data());
    if (errno != ENOENT) throw rt::SysError{errno, "execv", path};
  }
  throw rt::Error("cannot find rt-image (looked for `" + paths[0] + "` and `" + paths[1] + "`)",
                  "rt-image is installed with rt, beside it or in ../libexec/rt/");
}

std::vector<std::string> full_program_paths() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw rt::SysError{errno, "readlink", "/proc/self/exe"};
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));
  return {dir + "/rt-image", dir + "/../libexec/rt/rt-image"};
}

std::optional<int> exec_command(const std::vector<std::string>& words) {
  if (words[0] == "instance") return instance_command(words);
  auto opts = parse_exec_args(mode_of(words[0]), std::vector<std::string>(words.begin() + 1, words.end()));
  if (!opts) return std::nullopt;
  // Root emulation is built with libseccomp, which only rt-image links.
  if (opts->seccomp && !kProgram.full) exec_full_program(words);
  return run_exec(*opts);
}

// rt verify (rt-image's, GPGME) passes a file once per file and keys;
// later starts find the store's record and pay a stat.
void verify_sif_first(const ExecOptions& o) {
  auto v = sif_verification_needed(o);
  if (!v) return;
  std::vector<std::string> verify{"verify", "-q"};
  for (const auto& k : v->keys) verify.insert(verify.end(), {"--key", k});
  verify.push_back(v->file);
  if (int rc = run_full_program(verify); rc != 0)
    throw rt::Error("`" + v->file + "` is not run: its signatures do not verify with " +
                        (v->from_site ? "the site's keys (sif.keys)" : "the keys given") + " (rt verify said why, above)",
                    v->from_site ? "" : "check the file with rt verify --key KEY " + v->file);
  remember_sif_verified(*v);
}

int run_exec(const ExecOptions& given) {
  const ExecOptions* opts = &given;
  try {
    if (!opts->dry_run) verify_sif_first(*opts);
    if (!opts->dry_run && !opts->no_pull && step_image_to_send(*opts)) {
      std::vector<std::string> stage{"stage", "--step", "-q"};
      if (!opts->storage.empty()) stage.insert(stage.end(), {"--storage", opts->storage});
      stage.push_back(opts->image);
      if (int rc = run_full_program(stage); rc != 0)
        throw rt::Error("could not send `" + opts->image +
                        "` to the other nodes of the step (rt stage said why, above)");
    }
    exec(*opts);
  } catch (const ImageNotFound& e) {
    // A SIF file in a registry: read where it lies, by range, into the
    // node cache (rt-image lazy-open makes the entry, once per node).
    if (e.ref.starts_with("oras://")) {
      if (opts->no_pull) throw;
      std::vector<std::string> open{"lazy-open", opts->verbosity > 0 ? "-v" : "-q"};
      if (!opts->storage.empty()) open.insert(open.end(), {"--storage", opts->storage});
      if (!opts->policy.empty()) open.insert(open.end(), {"--policy", opts->policy});
      open.push_back(e.ref);
      if (int rc = run_full_program(open); rc != 0)
        throw rt::Error("could not open `" + e.ref + "` (said why, above)",
                        "or fetch it whole: rt pull " + e.ref + " FILE.sif");
      exec(*opts);
      return 0;
    }
    if (opts->no_pull || e.tagged || !looks_pullable(e.ref)) throw;
    // In a step over several nodes, the first node sends it.
    if (wait_for_step_image(*opts)) {
      exec(*opts);
      return 0;
    }
    // Pulled once per node: other ranks wait on the store's lock for the
    // image, then find it and ask the registry nothing.
    if (opts->verbosity >= 0)
      std::fprintf(stderr, "rt: `%s` is not in the store: pulling it (--no-pull to refuse instead)\n", e.ref.c_str());
    std::vector<std::string> pull{"pull", "-q", "--if-missing"};
    if (!opts->storage.empty()) pull.insert(pull.end(), {"--storage", opts->storage});
    if (!opts->policy.empty()) pull.insert(pull.end(), {"--policy", opts->policy});
    pull.push_back(e.ref);
    if (int rc = run_full_program(pull); rc != 0)
      throw rt::Error("could not pull `" + e.ref + "` (rt pull said why, above)",
                      "for an image file of your own: rt import FILE NAME, then rt " +
                          std::string(verb_name(opts->mode)) + " NAME");
    exec(*opts);
  }
  return 0;  // reached only with --dry-run
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
  if (!known) {  // listed by rt --help; instance_command reads its words and prints its usage
    Command c;
    c.app = app.add_subcommand("instance", "long-running containers: start, list, stop, logs, and instance://NAME");
    c.app->allow_extras();
    c.run = [] { return 0; };
    out.push_back(std::move(c));
  }
}

std::optional<int> slurm_task_command(std::vector<std::string>& words) {
  if (words.size() == 1 && words[0] == "--slurm-check") {
    slurm_check();
    return 0;
  }
  auto task = slurm_task(words, run_full_program);
  if (!task) return std::nullopt;
  if (task->on_host) {  // --container-name=NAME:no_exec
    std::vector<char*> argv;
    for (auto& w : task->words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    throw SysError{errno, "execvp", task->words[0]};
  }
  words = task->words;
  if (task->save.empty()) return std::nullopt;
  // --container-save: the program runs in a child; task 0 of the step
  // saves the container once it has ended.
  pid_t pid = ::fork();
  if (pid < 0) throw SysError{errno, "fork", "rt"};
  if (pid == 0) return std::nullopt;
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) throw SysError{errno, "waitpid", "rt"};
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  const char* rank = std::getenv("SLURM_PROCID");
  if (rc == 0 && rank && std::string(rank) == "0" &&
      run_full_program({"convert", "-q", "-f", "--to", "sqfs", task->container, task->save}) != 0)
    throw Error("--container-save: could not write `" + task->save + "` (rt convert said why, above)");
  return rc;
}

int apptainer_main(const std::vector<std::string>& words) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  const ApptainerPlan plan = translate_apptainer(words, env);
  if (!plan.print.empty()) {
    std::fputs(plan.print.c_str(), stdout);
    return 0;
  }
  struct stat st;
  if (!plan.refuse_if_exists.empty() && ::lstat(plan.refuse_if_exists.c_str(), &st) == 0)
    throw Error("image file `" + plan.refuse_if_exists + "` already exists: will not overwrite it",
                "give --force to replace it");
  // -W DIR --contain: DIR/tmp and DIR/var_tmp become the container's
  // /tmp and /var/tmp: each, and DIR, must be the user's alone (another
  // user could have made DIR/tmp first, in a shared place).
  auto own_dir = [](const std::string& d) {
    struct stat ds;
    if (::lstat(d.c_str(), &ds) != 0) throw SysError{errno, "stat", d};
    if (!S_ISDIR(ds.st_mode) || ds.st_uid != ::getuid() || (ds.st_mode & 022))
      throw Error("working directory `" + d + "` is not a directory of yours that only you can write",
                  "give -W a directory you own (mode 0700 or 0755)");
  };
  for (const auto& d : plan.make_dirs) {
    const size_t slash = d.rfind('/');
    own_dir(slash == 0 ? "/" : slash == std::string::npos ? "." : d.substr(0, slash));
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", d};
    own_dir(d);
  }
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const auto& step = plan.steps[s];
    const bool last = s + 1 == plan.steps.size();
    if (last && (step[0] == "exec" || step[0] == "run" || step[0] == "shell")) {
      const ExecMode mode = plan.test           ? ExecMode::Test
                            : step[0] == "exec" ? ExecMode::Exec
                            : step[0] == "run"  ? ExecMode::Run
                                                : ExecMode::Shell;
      auto opts = parse_exec_args(mode, std::vector<std::string>(step.begin() + 1, step.end()));
      if (!opts) return 0;
      opts->any_directory = true;  // Apptainer's sandbox: any directory
      if (opts->seccomp && !kProgram.full) exec_full_program(words, "apptainer");  // root emulation lives in rt-image
      return run_exec(*opts);
    }
    if (last && step[0] == "instance") return instance_command(step);
    if (!kProgram.full) exec_full_program(words, "apptainer");  // pull, build, inspect, cache: rt-image's
    if (int rc = run_full_program(step); rc != 0 || last) return rc;
  }
  return 0;
}

}  // namespace rt::cli
