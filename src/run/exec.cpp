// rt::exec, the orchestrator: a list of verbs (host -> namespace -> container).
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "hpc/launcher.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "rt/instance.hpp"
#include "run/env.hpp"
#include "run/hostinfo.hpp"
#include "run/image_root.hpp"
#include "run/injection.hpp"
#include "run/instance.hpp"
#include "run/join.hpp"
#include "run/launch.hpp"
#include "run/mount_apply.hpp"
#include "run/overlay_dir.hpp"
#include "run/overlay_image.hpp"
#include "run/overlay_server.hpp"
#include "run/passwd.hpp"
#include "run/plan.hpp"
#include "run/root_emulation.hpp"
#include "run/userns.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

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
    id.home = run::home_inside(o, h);
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
  if (auto b = run::home_spec(o)) {
    std::string src = util::normalize_path(b->src, h.cwd.empty() ? "/" : h.cwd);
    if (!util::is_directory(src)) throw Error("--home " + o.home + ": `" + src + "` is not a directory");
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
  bool seccomp = false;  // root emulation
  bool skip_sync = false;
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
  pin.sif_overlay = image.sif_overlay();
  pin.staging = image.staging();
  if (o.mode == ExecMode::Run && config) pin.image_workdir = config->working_dir;
  if (o.seccomp && !run::root_emulation())
    throw Error("--seccomp: this rt program has no root emulation", "run it through rt, which hands it to rt-image");
  pin.root_emulation = o.seccomp;
  if (o.seccomp)
    pin.apt = image.has("/etc/apt/apt.conf.d");
  else {
    pin.passwd = run::synth_passwd(image.passwd(), id);
    pin.group = run::synth_group(image.group(), id);
  }
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
  if (id.uid == 0 || o.no_home || !o.home.empty()) ein.home = id.home;
  Prepared p;
  p.env = run::compute_env(ein, show ? &p.env_changes : nullptr);
  run::apply_injected_env(injection, p.env);
  if (injection.gpu) pin.hidden = run::select_gpus(injection, p.env);
  p.plan = run::build_plan(pin);
  p.plan.host_files_kept = run::kept_host_files_tree(p.plan.host_files, o.storage);
  run::find_overlay_programs(p.plan);

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
  // --app NAME: the SCIF app's variables, its bin/ and lib/ first, and for
  // run and test its own scripts, as Apptainer gives them.
  bool app_env = false;
  if (!o.app.empty()) {
    const std::string root = "/scif/apps/" + o.app;
    if (o.app.find('/') != std::string::npos || o.app.front() == '.' || !image.has(root))
      throw Error("image `" + image.name() + "` has no app `" + o.app + "` (" + root + ")",
                  "rt inspect --section deffile " + image.name() + " shows its %app sections");
    const std::vector<std::string> vars = {"SCIF_APPNAME=" + o.app,       "SCIF_APPROOT=" + root,
                                           "SCIF_APPDATA=/scif/data/" + o.app, "SCIF_APPBIN=" + root + "/bin",
                                           "SCIF_APPLIB=" + root + "/lib",  "SCIF_APPRUN=" + root + "/scif/runscript",
                                           "SCIF_APPENV=" + root + "/scif/env"};
    for (const auto& kv : vars) run::set_var(p.env, kv);
    run::prepend_list(p.env, "PATH", root + "/bin");
    run::prepend_list(p.env, "LD_LIBRARY_PATH", root + "/lib");
    const std::string script = o.mode == ExecMode::Run ? root + "/scif/runscript" : root + "/scif/test";
    if (o.mode == ExecMode::Run || o.mode == ExecMode::Test) {
      if (!image.has(script))
        throw Error("app `" + o.app + "` of image `" + image.name() + "` has no " +
                    (o.mode == ExecMode::Run ? "%apprun" : "%apptest") + " (" + script + ")");
      p.argv = {script};
      p.argv.insert(p.argv.end(), o.command.begin(), o.command.end());
    }
    app_env = image.has(root + "/scif/env");
  }
  // Sourced by the image's /bin/sh; an image without one (a single static
  // program) runs its program directly.
  if (apptainer.env_scripts || app_env) {
    if (image.has("/bin/sh")) {
      p.argv = run::after_apptainer_env(std::move(p.argv));
    } else {
      // No shell to source them: their plain `export NAME=value` lines,
      // in order, over everything else (as sourcing them would be).
      std::vector<std::string> scripts = image.list(run::kApptainerEnvDir);
      std::sort(scripts.begin(), scripts.end());  // glob order
      for (const auto& name : scripts) {
        if (!name.ends_with(".sh")) continue;
        const std::string path = std::string(run::kApptainerEnvDir) + "/" + name;
        int skipped = 0;
        for (const auto& kv : run::plain_exports(image.read(path, 1 << 20).value_or(""), &skipped))
          run::set_var(p.env, kv);
        if (skipped)
          util::debug("image has no /bin/sh: " + std::to_string(skipped) + " line(s) of " + path +
                      " that are not a plain export are not applied");
      }
    }
  }
  // An image's USER is not honoured: the program runs as the caller, as
  // under Apptainer. rt run says so, once per node (the first local rank).
  if (o.mode == ExecMode::Run && config && !config->user.empty() && launcher.local_rank <= 0) {
    const std::string asked = config->user.substr(0, config->user.find(':'));
    if (asked != id.user && asked != std::to_string(id.uid))
      util::warn("image `" + image.name() + "` asks to run as user `" + config->user + "`; rt runs it as " + id.user +
                 " (uid " + std::to_string(id.uid) + "), as Apptainer does");
  }
  p.join = o.join == ExecOptions::Inject::On || (o.join == ExecOptions::Inject::Auto && launcher.local_size > 1);
  p.seccomp = o.seccomp;
  p.skip_sync = o.skip_sync;
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
  std::vector<std::string> ns;
  if (o.net_none) ns.push_back("network (loopback only)");
  if (o.ipc_namespace) ns.push_back("IPC");
  if (o.pid_namespace) ns.push_back("PID (with its own /proc)");
  if (!ns.empty()) out("namespaces of its own: " + util::join(ns, ", "));
  for (const auto& line : injection.notes) out(line);
  for (const auto& line : run::describe(p.plan)) out(line);
  for (const auto& line : p.env_changes) out(line);
  if (p.seccomp) {
    const auto* emulation = run::root_emulation();
    std::string line =
        "root emulation (--seccomp): these succeed without effect: " + util::join(emulation->calls(), ", ");
    if (p.skip_sync) line += "; these return at once: " + util::join(emulation->sync_calls(), ", ");
    out(line);
  }
  std::string cmd = "command:";
  for (const auto& a : p.argv) cmd += " " + a;
  out(cmd);
}

// An instance's container, for rt exec instance://NAME (enter it) and rt
// instance start (make it).
struct InstanceEntry {
  std::string name;
  bool start = false;
};

// Namespace: enters the container, building its tree, or joins the node's
// shared one or an instance's; a SquashFS image comes from its server. All
// are found by socket names keyed with the user's secret. Returns at the
// container's working directory, with no capability left to a root inside.
void enter(const ExecOptions& o, const Prepared& p, const ImageRoot& image, const hpc::Launcher& launcher,
           const InstanceEntry* instance = nullptr, int keep_fd = -1) {
  auto secret = [&]() -> const std::string& { return store::Root::user(o.storage).secret(); };
  auto build = [&] { image.build(p.plan, secret); };
  if (instance) {
    if (!run::enter_holder(run::instance_key(instance->name, secret()),
                           run::instance_policy(instance->name, instance->start), build))
      throw Error("other users hold every socket name of instance `" + instance->name + "`",
                  "pick another name for it");
    util::timing("entered the instance");
  } else if (p.join && run::join_container(run::join_key(p.plan, launcher, secret()), launcher.local_size,
                                           p.plan.rootfs, build)) {
    util::timing("joined");
  } else {
    if (p.join) util::info("other users hold the names of this launch's shared container: running one of its own");
    build();
    util::timing("mounted");
  }
  // Root in the container keeps its capabilities across execve, in a user
  // namespace that owns the mount namespace (and, for a SquashFS image or
  // a shared container, the holder's): it could remount the image
  // read-write or reach the holder. One more user namespace below, mapping
  // the same ids, leaves it none over them: the mounts are locked
  // (mount_namespaces(7), "Restrictions on mount namespaces").
  run::enter_net_ipc_namespaces(o.net_none, o.ipc_namespace);
  if (o.pid_namespace)
    run::enter_pid_namespace("rt-init " + (instance ? instance->name : image.name()), /*own_proc=*/!instance);
  if (p.plan.inner_uid == 0) run::enter_nested_user_namespace(p.plan.inner_uid, p.plan.inner_gid);
  // None of rt's descriptors (the store, holders' sockets and namespaces,
  // images) may be open when the working directory is chosen or the
  // program starts: /proc/self/fd/N would lead out of the container.
  util::close_own_fds(o.only_stdio, {keep_fd});
  run::enter_cwd(p.plan);
}

// Container: no privilege can be gained from here on; the program replaces rt.
[[noreturn]] void launch(const Prepared& p, const std::string& image) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw SysError{errno, "prctl(PR_SET_NO_NEW_PRIVS)"};
  if (p.seccomp) run::root_emulation()->install(p.skip_sync);
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

// rt exec instance://NAME: the instance's image and ids, so that the
// environment and passwd are planned as for its own program; the mounts
// are the instance's, so options that would change them are refused.
ExecOptions for_instance(const ExecOptions& in, const run::InstanceRecord& r) {
  std::string given;
  if (!in.binds.empty()) given = "--bind";
  if (in.write || in.write_tmpfs) given = in.write ? "--write" : "--write-tmpfs";
  if (in.private_tmp) given = "--private-tmp";
  if (in.no_home) given = "--no-home";
  if (!in.home.empty() || in.contain || !in.tmpfs.empty()) given = "--home, --contain or --tmpfs";
  if (!in.mpi.empty() || in.gpu == ExecOptions::Inject::On || in.ib == ExecOptions::Inject::On || !in.devices.empty())
    given = "--mpi, --gpu, --ib or --device";
  if (in.uid || in.gid) given = "--uid/--gid";
  if (!given.empty())
    throw Error(given + " cannot change the container of running instance `" + r.info.name + "`",
                "give mount and id options to rt instance start");
  if (!r.info.running)
    throw Error(
        "instance `" + r.info.name + "` is not running (its processes have exited)",
        "rt instance logs " + r.info.name + " shows its output; rt instance stop " + r.info.name + " removes it");
  ExecOptions o = in;
  o.image = r.info.image;
  o.uid = r.uid;
  o.gid = r.gid;
  o.join = ExecOptions::Inject::Off;
  o.gpu = o.ib = ExecOptions::Inject::Off;
  return o;
}

}  // namespace

void exec(const ExecOptions& given) {
  util::log_init(given.verbosity);
  util::timing("start");
  std::optional<ExecOptions> adjusted;
  std::optional<InstanceEntry> instance;
  if (given.image.starts_with(kInstanceScheme)) {
    instance = InstanceEntry{given.image.substr(std::strlen(kInstanceScheme))};
    adjusted = for_instance(given, run::read_instance(store::Root::user(given.storage), instance->name));
  }
  const ExecOptions& o = adjusted ? *adjusted : given;
  // Host: gather and decide everything while errors are easy to explain.
  HostInfo host = run::gather_host_info();
  if (o.base_env) host.env = *o.base_env;
  const std::unique_ptr<ImageRoot> image = ImageRoot::open(o.image, host.cwd, o.storage, o.any_directory);
  if (o.mode == ExecMode::Test && o.app.empty() && !image->has(run::kApptainerTest)) {
    util::info("image `" + image->name() + "` has no test script (" + run::kApptainerTest + "): nothing to test");
    return;
  }
  check_bind_sources(o, host);
  const hpc::Launcher launcher = hpc::detect_launcher([](const char* k) { return std::getenv(k); });
  if (launcher.local_rank <= 0) run::warn_if_foreign(image->image());  // once per node: its lstats are not every rank's
  const hpc::Injection injection = run::plan_injection(o, image->config(), *image);
  util::timing("host injection planned");
  const bool shown = util::log_enabled(util::Level::Info) || o.dry_run;
  Prepared p = prepare(o, std::move(host), *image, launcher, injection, shown);
  image->close();  // no handle on the host for a holder to keep
  if (shown) show(o, p, launcher, injection);
  if (o.dry_run) return;
  // A plain container's overlay directory stays mounted for the next one;
  // an instance's or a shared container's lives as long as they do.
  p.plan.overlays_held = !instance && !p.join && run::overlay_holdable(p.plan);
  // Locked by this process, which becomes the program, or by their holder.
  run::prepare_overlays(p.plan.overlays, p.plan.overlays_held);
  util::timing("planned");
  enter(o, p, *image, launcher, instance ? &*instance : nullptr);
  launch(p, image->name());
}

namespace {

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// What the starting child says: "R MNTNS" (entered; the program is next)
// or "ECODE MESSAGE\nHINT" (failed, to exit with CODE). Read with a deadline, watching the child.
std::string await_report(int fd, pid_t child, const std::string& name) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::string text;
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, 200);
    if (r > 0) {
      char buf[4096];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) text.append(buf, static_cast<size_t>(n));
      if (n <= 0 || text.ends_with("\n\n")) return text;
    } else if (::waitpid(child, nullptr, WNOHANG) == child) {
      return text;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      throw Error("instance `" + name + "` did not start within 120 s");
    }
  }
}

}  // namespace

InstanceInfo start_instance(const ExecOptions& given, const std::string& name) {
  util::log_init(given.verbosity);
  check_instance_name(name);
  const store::Root& store = store::Root::user(given.storage);
  if (run::holder_serving(run::instance_key(name, store.secret())))
    throw Error("instance `" + name + "` is already running",
                "rt instance stop " + name + " first, or pick another name");
  run::remove_instance(store, name);  // a dead one's record and logs
  const util::UniqueFd dir = run::instance_dir(store, name, true);
  const std::string logs = run::instance_path(store, name);
  // Until the record is written, a failure leaves no trace of the instance.
  struct Discard {
    const store::Root& store;
    const std::string& name;
    bool keep = false;
    ~Discard() {
      if (keep) return;
      try {
        run::remove_instance(store, name);
      } catch (const Error&) {
      }
    }
  } discard{store, name};
  auto log = [&](const char* file) {
    int fd = ::openat(dir.get(), file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) throw SysError{errno, "open", logs + "/" + file};
    return util::UniqueFd(fd);
  };
  const util::UniqueFd out = log("out.log"), err = log("err.log");

  ExecOptions o = given;
  o.mode = ExecMode::Exec;
  o.join = ExecOptions::Inject::Off;
  o.only_stdio = true;     // no launcher stands behind an instance
  o.pid_namespace = true;  // rt instance stop reaches all it started
  HostInfo host = run::gather_host_info();
  const std::unique_ptr<ImageRoot> image = ImageRoot::open(o.image, host.cwd, o.storage, o.any_directory);
  // Entered again later (instance://NAME) from anywhere: a path is kept absolute.
  if (!image->image().path.empty()) o.image = image->image().path;
  run::warn_if_foreign(image->image());
  check_bind_sources(o, host);
  // As Apptainer does: the image's startscript with ARGS, else ARGS as the
  // command; with neither, what rt run would run (ENTRYPOINT and CMD).
  if (image->apptainer().startscript) {
    o.command.insert(o.command.begin(), run::kApptainerStartscript);
  } else if (o.command.empty()) {
    const run::ImageConfig* config = image->config();
    if (!config || (config->entrypoint.empty() && config->cmd.empty()))
      throw Error("image `" + image->name() + "` has no startscript (/.singularity.d/startscript), ENTRYPOINT or CMD",
                  "give the command: rt instance start IMAGE " + name + " PROG [ARGS...]");
    o.command = run::command_for(ExecMode::Run, {}, config, image->name(), "");
  }
  run::InstanceRecord r;
  r.info.name = name;
  r.info.image = o.image;
  r.info.command = o.command;
  (void)run::record_text(r);  // one that cannot be written is refused before anything starts
  const hpc::Launcher launcher = hpc::detect_launcher([](const char* k) { return std::getenv(k); });
  const hpc::Injection injection = run::plan_injection(o, image->config(), *image);
  const Prepared p = prepare(o, std::move(host), *image, launcher, injection, util::log_enabled(util::Level::Info));
  image->close();
  if (util::log_enabled(util::Level::Info)) show(o, p, launcher, injection);
  (void)store.secret();  // made and read here, not by the child

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw SysError{errno, "pipe"};
  util::UniqueFd report_r(report[0]), report_w(report[1]);
  const pid_t child = ::fork();
  if (child < 0) throw SysError{errno, "fork"};
  if (child == 0) {
    // Detached: a session of its own, no terminal, output to the logs.
    report_r.reset();
    ::setsid();
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(out.get(), 1) < 0 || ::dup2(err.get(), 2) < 0) ::_exit(125);
    std::string msg;
    int code = kExitRtFailed;
    try {
      const InstanceEntry entry{name, true};
      run::prepare_overlays(p.plan.overlays);  // locked by the instance's process
      enter(o, p, *image, launcher, &entry, report_w.get());
      if (!run::program_found(p.argv.front(), p.env))
        throw Error("cannot run " + util::quoted(p.argv.front()) + " in image `" + image->name() + "`: not found", "",
                    kExitNotFound);
      msg = "R " + run::mount_namespace_of("self") + " " + run::namespace_of("self", "pid") + "\n\n";
      util::write_all(report_w.get(), msg, "report");
      report_w.reset();
      launch(p, image->name());
    } catch (const Error& e) {
      code = e.exit_code();
      msg = "E" + std::to_string(code) + " " + one_line(e.what()) + "\n" + one_line(e.hint()) + "\n\n";
    } catch (const std::exception& e) {
      msg = "E" + std::to_string(code) + " " + one_line(e.what()) + "\n\n\n";
    }
    if (report_w) (void)!::write(report_w.get(), msg.data(), msg.size());
    ::_exit(code);
  }
  report_w.reset();
  const std::string text = await_report(report_r.get(), child, name);
  if (!text.starts_with("R mnt:")) {
    if (text.starts_with("E")) {  // "ECODE MESSAGE\nHINT\n\n"
      const size_t sp = text.find(' '), nl = text.find('\n');
      const std::string hint = text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1);
      throw Error("instance `" + name + "`: " + text.substr(sp + 1, nl - sp - 1), hint, std::atoi(text.c_str() + 1));
    }
    throw Error("instance `" + name + "` ended before its program started", "its log: " + logs + "/err.log");
  }
  r.info.started = util::utc_time(::time(nullptr));
  r.info.pid = child;
  r.info.running = true;
  r.info.logs = logs;
  r.uid = p.plan.inner_uid;
  r.gid = p.plan.inner_gid;
  const std::string ids = text.substr(2, text.find('\n') - 2);
  r.mntns = ids.substr(0, ids.find(' '));
  if (ids.find(' ') != std::string::npos) r.pidns = ids.substr(ids.find(' ') + 1);
  try {
    run::write_instance(store, r);
  } catch (const Error&) {
    // No record, no way to reach it: what was started stops.
    ::kill(child, SIGKILL);  // its keeper: the PID namespace's init dies with it
    for (pid_t pid : run::processes_in(r.mntns)) ::kill(pid, SIGKILL);
    throw;
  }
  discard.keep = true;
  return r.info;
}

namespace run {
namespace {
const RootEmulation* g_root_emulation = nullptr;
}
void provide_root_emulation(const RootEmulation* emulation) { g_root_emulation = emulation; }
const RootEmulation* root_emulation() { return g_root_emulation; }
}  // namespace run

}  // namespace rt
