// rt::exec, the orchestrator: a list of verbs (host -> namespace -> container).
#include <sys/prctl.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "hpc/launcher.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "run/env.hpp"
#include "run/hostinfo.hpp"
#include "run/image_root.hpp"
#include "run/injection.hpp"
#include "run/join.hpp"
#include "run/launch.hpp"
#include "run/mount_apply.hpp"
#include "run/passwd.hpp"
#include "run/plan.hpp"
#include "run/userns.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace rt {
namespace {

using run::HostInfo;
using run::ImageRoot;

run::Identity identity(const ExecOptions& o, const HostInfo& h) {
  run::Identity id;
  id.uid = o.uid.value_or(h.uid);
  id.gid = o.gid.value_or(h.gid);
  if (id.uid == 0) {
    id.user = "root";
    id.home = "/root";
  } else {
    id.user = h.user;
    id.home = o.no_home ? "/" : h.home;
  }
  id.group = id.gid == 0 ? "root" : id.gid == h.gid ? h.group : "group" + std::to_string(id.gid);
  id.shell = "/bin/sh";  // the image's shell; the host's may not exist there
  return id;
}

void check_bind_sources(const ExecOptions& o, const HostInfo& h) {
  for (const auto& b : o.binds) {
    std::string src = util::normalize_path(b.src, h.cwd.empty() ? "/" : h.cwd);
    if (!util::path_exists(src)) throw Error("bind source `" + src + "` does not exist (from --bind " + b.src + ")");
  }
}

std::vector<std::string> env_file_entries(const ExecOptions& o) {
  std::vector<std::string> out;
  for (const auto& f : o.env_files) {
    auto text = util::read_file_if_exists(f);
    if (!text) throw Error("--env-file `" + f + "` does not exist");
    auto entries = run::parse_env_file(*text, f);
    out.insert(out.end(), entries.begin(), entries.end());
  }
  return out;
}

// Everything decided on the host: the mount plan, the environment, the
// command, and whether the ranks of the launch share one container.
struct Prepared {
  run::MountPlan plan;
  std::vector<std::string> env;
  std::vector<std::string> env_changes;  // for -v, when shown
  std::vector<std::string> argv;
  bool join = false;
};

Prepared prepare(const ExecOptions& o, HostInfo host, const ImageRoot& image, const hpc::Launcher& launcher,
                 const hpc::Injection& injection, bool show) {
  const run::ImageConfig* config = image.config();
  const run::Identity id = identity(o, host);
  run::PlanInputs pin;
  pin.options = &o;
  pin.host = &host;
  pin.rootfs = image.image().rootfs;
  pin.squashfs = image.image().squashfs;
  pin.staging = image.staging();
  if (o.mode == ExecMode::Run && config) pin.image_workdir = config->working_dir;
  pin.passwd = run::synth_passwd(image.passwd(), id);
  pin.group = run::synth_group(image.group(), id);
  pin.launcher_paths = launcher.paths;
  pin.injected = run::injected_mounts(injection);

  run::EnvInputs ein;
  ein.host = std::move(host.env);
  ein.clean = o.clean_env;
  if (config) ein.image = config->env;
  ein.unset = o.env_unset;
  ein.files = env_file_entries(o);
  ein.set = o.env_set;
  ein.container = image.name();
  if (id.uid == 0 || o.no_home) ein.home = id.home;
  Prepared p;
  p.env = run::compute_env(ein, show ? &p.env_changes : nullptr);
  run::apply_injected_env(injection, p.env);
  if (injection.gpu) pin.hidden = run::select_gpus(injection, p.env);
  p.plan = run::build_plan(pin);

  std::string shell;
  if (o.mode == ExecMode::Shell) {
    for (const auto& kv : p.env)
      if (kv.starts_with("SHELL=")) shell = kv.substr(6);
    if (!image.has(shell)) shell = "/bin/sh";
    // The shell it runs is the one its programs should start.
    std::erase_if(p.env, [](const std::string& kv) { return kv.starts_with("SHELL="); });
    p.env.push_back("SHELL=" + shell);
  }
  const run::ApptainerFiles apptainer = image.apptainer();
  p.argv = run::command_for(o.mode, o.command, config, image.name(), shell, apptainer);
  if (apptainer.env_scripts) p.argv = run::after_apptainer_env(std::move(p.argv));
  // An image's USER is not honoured: the program runs as the caller, as
  // under Apptainer. rt run says so, once per node (the first local rank).
  if (o.mode == ExecMode::Run && config && !config->user.empty() && launcher.local_rank <= 0) {
    const std::string asked = config->user.substr(0, config->user.find(':'));
    if (asked != id.user && asked != std::to_string(id.uid))
      util::warn("image `" + image.name() + "` asks to run as user `" + config->user + "`; rt runs it as " + id.user +
                 " (uid " + std::to_string(id.uid) + "), as Apptainer does");
  }
  p.join = o.join == ExecOptions::Inject::On || (o.join == ExecOptions::Inject::Auto && launcher.local_size > 1);
  return p;
}

// -v and --dry-run: the launcher, the injection, the plan, the environment
// changes and the command.
void show(const ExecOptions& o, const Prepared& p, const hpc::Launcher& launcher, const hpc::Injection& injection) {
  auto out = [&](const std::string& line) {
    if (o.dry_run)
      std::printf("%s\n", line.c_str());
    else
      util::info(line);
  };
  if (launcher.kind != hpc::Launcher::Kind::None)
    out("launcher: " + launcher.name + (launcher.job.empty() ? "" : ", job " + launcher.job) +
        (launcher.local_size ? ", " + std::to_string(launcher.local_size) + " ranks on this node" : ""));
  if (p.join) out("one container per node: ranks of this launch share it (--no-join: one each)");
  for (const auto& line : injection.notes) out(line);
  for (const auto& line : run::describe(p.plan)) out(line);
  for (const auto& line : p.env_changes) out(line);
  std::string cmd = "command:";
  for (const auto& a : p.argv) cmd += " " + a;
  out(cmd);
}

// Namespace: enters the container, building its tree, or joins the node's
// shared one; a SquashFS image comes from its server. Both are found by
// socket names keyed with the user's secret. Returns at the container's
// working directory, with no capability left to a root inside.
void enter(const ExecOptions& o, const Prepared& p, const ImageRoot& image, const hpc::Launcher& launcher) {
  auto secret = [&]() -> const std::string& { return store::Root::user(o.storage).secret(); };
  auto build = [&] { image.build(p.plan, secret); };
  if (p.join &&
      run::join_container(run::join_key(p.plan, launcher, secret()), launcher.local_size, p.plan.rootfs, build)) {
    util::timing("joined");
  } else {
    if (p.join) util::info("other users hold the names of this launch's shared container: running one of its own");
    build();
    util::timing("mounted");
  }
  run::enter_cwd(p.plan);
  // Root in the container keeps its capabilities across execve, in a user
  // namespace that owns the mount namespace (and, for a SquashFS image or
  // a shared container, the holder's): it could remount the image
  // read-write or reach the holder. One more user namespace below, mapping
  // the same ids, leaves it none over them: the mounts are locked
  // (mount_namespaces(7), "Restrictions on mount namespaces").
  if (p.plan.inner_uid == 0) run::enter_nested_user_namespace(p.plan.inner_uid, p.plan.inner_gid);
}

// Container: no privilege can be gained from here on; the program replaces rt.
[[noreturn]] void launch(const Prepared& p, const std::string& image) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw SysError{errno, "prctl(PR_SET_NO_NEW_PRIVS)"};
  if (util::log_enabled(util::Level::Debug)) {
    // rt's own peak memory (VmHWM counts this process image only, unlike
    // getrusage, which also counts whatever exec'd into rt).
    if (auto status = util::read_file_if_exists("/proc/self/status")) {
      size_t at = status->find("VmHWM:");
      if (at != std::string::npos) util::debug("peak RSS" + status->substr(at + 5, status->find('\n', at) - at - 5));
    }
  }
  util::timing("exec");
  run::exec_program(p.argv, p.env, image);
}

}  // namespace

void exec(const ExecOptions& o) {
  util::log_init(o.verbosity);
  util::timing("start");
  // Host: gather and decide everything while errors are easy to explain.
  HostInfo host = run::gather_host_info();
  const std::unique_ptr<ImageRoot> image = ImageRoot::open(o.image, host.cwd, o.storage);
  check_bind_sources(o, host);
  const hpc::Launcher launcher = hpc::detect_launcher([](const char* k) { return std::getenv(k); });
  const hpc::Injection injection = run::plan_injection(o, image->config(), *image);
  const bool shown = util::log_enabled(util::Level::Info) || o.dry_run;
  const Prepared p = prepare(o, std::move(host), *image, launcher, injection, shown);
  image->close();  // no handle on the host for a holder to keep
  if (shown) show(o, p, launcher, injection);
  if (o.dry_run) return;
  util::timing("planned");
  enter(o, p, *image, launcher);
  launch(p, image->name());
}

}  // namespace rt
