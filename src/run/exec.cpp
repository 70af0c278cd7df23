// rt::exec, the orchestrator: a list of verbs (host -> namespace -> container).
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "hpc/inject.hpp"
#include "hpc/launcher.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "run/env.hpp"
#include "run/hostinfo.hpp"
#include "run/image.hpp"
#include "run/image_server.hpp"
#include "run/join.hpp"
#include "run/launch.hpp"
#include "run/mount_apply.hpp"
#include "run/passwd.hpp"
#include "run/plan.hpp"
#include "run/sqfs_facts.hpp"
#include "run/userns.hpp"
#include "squash/sqfs.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/inroot.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

using run::HostInfo;
using run::Image;

void timing(const char* stage) {
  if (util::log_enabled(util::Level::Debug)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.3f ms: %s", util::log_elapsed_ms(), stage);
    util::debug(buf);
  }
}

bool image_has(int rootfd, const std::string& path) {
  return !path.empty() && static_cast<bool>(util::open_in_root(rootfd, path, O_PATH).fd);
}

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
    if (!util::path_exists(src))
      throw Error("bind source `" + src + "` does not exist (from --bind " + b.src + ")");
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

bool image_env_asks_gpu(const run::ImageConfig* config) {
  if (!config) return false;
  for (const auto& kv : config->env)
    if (kv.starts_with("NVIDIA_VISIBLE_DEVICES=")) {
      std::string v = kv.substr(23);
      return !v.empty() && v != "void" && v != "none";
    }
  return false;
}

// What of the host to inject (HPC); empty when nothing is asked for and
// nothing is automatic. Automatic injection that cannot work is skipped
// with a note; asked-for injection that cannot work is an error.
hpc::Injection plan_injection(const ExecOptions& o, const run::ImageConfig* config, const hpc::ImageView& view) {
  hpc::InjectRequest req;
  req.mpi = o.mpi;
  req.gpu_required = o.gpu == ExecOptions::Inject::On;
  req.gpu = req.gpu_required || (o.gpu == ExecOptions::Inject::Auto && image_env_asks_gpu(config));
  req.ib_required = o.ib == ExecOptions::Inject::On;
  req.ib = req.ib_required || (o.ib == ExecOptions::Inject::Auto && util::path_exists("/dev/infiniband"));
  req.devices = o.devices;
  if (req.mpi.empty() && !req.gpu && !req.ib && req.devices.empty()) return {};
  hpc::SiteConfig conf = hpc::load_site_config();
  // Every rank of a job reads the same host plugins: remember what they are.
  hpc::ElfCache elf(store::Root::user(o.storage).fd(), "elf-cache");
  try {
    hpc::Injection inj = hpc::plan_injection(req, conf, view, &elf);
    elf.save();
    return inj;
  } catch (const Error& e) {
    bool asked = !req.mpi.empty() || req.gpu_required || req.ib_required || !req.devices.empty();
    if (asked) throw;
    util::warn(std::string("not injecting host libraries: ") + e.what());
    return {};
  }
}

// An NVIDIA_VISIBLE_DEVICES selection, as NVIDIA's container toolkit
// applies it: the device nodes and driver directories of the GPUs it
// leaves out are hidden (returned, to end the mount plan), and CUDA sees
// what it selects, unless the launcher or the user set
// CUDA_VISIBLE_DEVICES (Slurm does for --gres=gpu).
std::vector<run::Mount> select_gpus(const hpc::Injection& inj, std::vector<std::string>& env) {
  std::string selection;
  bool cuda_set = false;
  for (const auto& kv : env) {
    if (kv.starts_with("CUDA_VISIBLE_DEVICES=")) cuda_set = true;
    if (kv.starts_with("NVIDIA_VISIBLE_DEVICES=")) selection = kv.substr(23);
  }
  if (hpc::selects_all_gpus(selection)) return {};
  auto gpus = hpc::host_gpus(inj.gpu_procfs);
  if (!cuda_set)
    if (auto cuda = hpc::cuda_visible_devices(selection, gpus)) env.push_back("CUDA_VISIBLE_DEVICES=" + *cuda);
  hpc::GpuMask mask = hpc::gpu_mask(selection, gpus, inj.gpu_dev);
  std::vector<run::Mount> hide;
  if (!mask.nodes.empty())
    hide.push_back({run::Mount::Kind::Hide, util::join(mask.nodes, '/'), "/dev", false, false, "GPUs not selected"});
  if (!mask.buses.empty()) {
    // The kernel may refuse a mount inside /proc: then only a warning.
    hide.push_back({run::Mount::Kind::Hide, util::join(mask.buses, '/'), "/proc/driver/nvidia/gpus", false, true,
                    "GPUs not selected"});
    hide.back().if_target = true;
  }
  return hide;
}

std::vector<run::Mount> injected_mounts(const hpc::Injection& inj) {
  std::vector<run::Mount> out;
  for (const auto& f : inj.files)
    out.push_back({run::Mount::Kind::Bind, f.host, f.container, true, false, "host library"});
  for (const auto& d : inj.dirs) out.push_back({run::Mount::Kind::Bind, d, d, true, true, "host MPI/fabric files"});
  for (const auto& f : inj.cdi_mounts) out.push_back({run::Mount::Kind::Bind, f.host, f.container, true, false, "CDI"});
  for (const auto& l : inj.cdi_links) out.push_back({run::Mount::Kind::Symlink, l.host, l.container, false, false, "CDI hook"});
  return out;
}

// LD_LIBRARY_PATH and PATH with the injected directories first, and the
// CDI environment.
void apply_injected_env(const hpc::Injection& inj, std::vector<std::string>& env) {
  auto prepend = [&](const char* name, const std::vector<std::string>& dirs) {
    if (dirs.empty()) return;
    std::string value = util::join(dirs, ':');
    std::string prefix = std::string(name) + "=";
    for (auto& kv : env)
      if (kv.starts_with(prefix)) {
        std::string old = kv.substr(prefix.size());
        kv = prefix + value + (old.empty() ? "" : ":" + old);
        return;
      }
    env.push_back(prefix + value);
  };
  prepend("LD_LIBRARY_PATH", inj.lib_path);
  prepend("PATH", inj.bin_path);
  for (const auto& kv : inj.env_set) {
    std::string key = kv.substr(0, kv.find('='));
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(key + "="); });
    env.push_back(kv);
  }
}

} // namespace

void exec(const ExecOptions& o) {
  util::log_init(o.verbosity);
  timing("start");
  // Host: gather and decide everything while errors are easy to explain.
  HostInfo host = run::gather_host_info();
  Image image = run::open_image(o.image, host.cwd, o.storage);
  // A SquashFS image is opened only when something must be read from it:
  // what every run needs comes from the store's copy (run/sqfs_facts).
  std::unique_ptr<squash::Image> sqfs_opened;
  auto sqfs = [&]() -> squash::Image& {
    if (!sqfs_opened) sqfs_opened = std::make_unique<squash::Image>(image.rootfs);
    return *sqfs_opened;
  };
  run::SquashFacts facts;
  util::UniqueFd rootfd;
  std::string staging;
  if (image.squashfs) {
    // The staging tmpfs needs a host directory to cover: rt's own, in the store.
    const store::Root& store = store::Root::user(o.storage);
    store.dir("mnt", true);
    staging = store.sub("mnt");
    facts = run::squash_facts(image.rootfs, store.dir("sqfs-facts", true).get(), sqfs);
    if (facts.config)
      image.config = run::parse_image_config(*facts.config, image.rootfs + ":" + squash::kConfigPath);
  } else {
    rootfd = util::open_fd(image.rootfs, O_PATH | O_DIRECTORY);
  }
  check_bind_sources(o, host);
  const run::ImageConfig* config = image.config ? &*image.config : nullptr;

  // HPC: the launcher's needs, and host libraries to inject.
  hpc::Launcher launcher = hpc::detect_launcher([](const char* k) { return std::getenv(k); });
  hpc::ImageView view;
  view.name = image.name;
  view.read = [&](const std::string& path, size_t limit) -> std::optional<std::string> {
    if (image.squashfs) return sqfs().read_file(path, limit);
    auto r = util::open_in_root(rootfd.get(), path, O_RDONLY);
    if (!r.fd) return std::nullopt;
    return util::read_fd(r.fd.get(), path, limit);
  };
  view.list = [&](const std::string& dir) -> std::vector<std::string> {
    if (image.squashfs) return sqfs().list(dir);
    auto r = util::open_in_root(rootfd.get(), dir, O_RDONLY | O_DIRECTORY);
    if (!r.fd) return {};
    return util::list_names(r.fd.get(), dir);
  };
  view.stamp = [&](const std::string& path) -> std::string {
    struct stat st;
    if (image.squashfs) {
      if (!sqfs().has(path) || ::stat(image.rootfs.c_str(), &st) != 0) return "";
      return util::file_stamp(st) + ":" + image.rootfs + ":" + path;
    }
    auto r = util::open_in_root(rootfd.get(), path, O_RDONLY);
    if (!r.fd || ::fstat(r.fd.get(), &st) != 0) return "";
    return util::file_stamp(st);
  };
  hpc::Injection injection = plan_injection(o, config, view);
  auto image_file = [&](const char* path, const std::optional<std::string>& fact) {
    return image.squashfs ? fact.value_or("") : view.read(path, 1 << 22).value_or("");
  };

  run::Identity id = identity(o, host);
  run::PlanInputs pin;
  pin.options = &o;
  pin.host = &host;
  pin.rootfs = image.rootfs;
  pin.squashfs = image.squashfs;
  pin.staging = staging;
  if (o.mode == ExecMode::Run && config) pin.image_workdir = config->working_dir;
  pin.passwd = run::synth_passwd(image_file("/etc/passwd", facts.passwd), id);
  pin.group = run::synth_group(image_file("/etc/group", facts.group), id);
  pin.launcher_paths = launcher.paths;
  pin.injected = injected_mounts(injection);

  run::EnvInputs ein;
  ein.host = std::move(host.env);
  ein.clean = o.clean_env;
  if (config) ein.image = config->env;
  ein.unset = o.env_unset;
  ein.files = env_file_entries(o);
  ein.set = o.env_set;
  ein.container = image.name;
  if (id.uid == 0 || o.no_home) ein.home = id.home;
  std::vector<std::string> changes;
  bool show = util::log_enabled(util::Level::Info) || o.dry_run;
  std::vector<std::string> env = run::compute_env(ein, show ? &changes : nullptr);
  apply_injected_env(injection, env);
  if (injection.gpu) pin.hidden = select_gpus(injection, env);
  run::MountPlan plan = run::build_plan(pin);

  std::string shell;
  if (o.mode == ExecMode::Shell) {
    for (const auto& kv : env)
      if (kv.starts_with("SHELL=")) shell = kv.substr(6);
    bool present = image.squashfs ? !shell.empty() && sqfs().has(shell) : image_has(rootfd.get(), shell);
    if (!present) shell = "/bin/sh";
  }
  std::vector<std::string> argv = run::command_for(o.mode, o.command, config, image.name, shell);
  rootfd.reset();
  const bool join = o.join == ExecOptions::Inject::On ||
                    (o.join == ExecOptions::Inject::Auto && launcher.local_size > 1);

  if (show) {
    auto out = [&](const std::string& line) {
      if (o.dry_run) std::printf("%s\n", line.c_str());
      else util::info(line);
    };
    if (launcher.kind != hpc::Launcher::Kind::None)
      out("launcher: " + launcher.name + (launcher.job.empty() ? "" : ", job " + launcher.job) +
          (launcher.local_size ? ", " + std::to_string(launcher.local_size) + " ranks on this node" : ""));
    if (join) out("one container per node: ranks of this launch share it (--no-join: one each)");
    for (const auto& line : injection.notes) out(line);
    for (const auto& line : run::describe(plan)) out(line);
    for (const auto& line : changes) out(line);
    std::string cmd = "command:";
    for (const auto& a : argv) cmd += " " + a;
    out(cmd);
  }
  if (o.dry_run) return;
  timing("planned");

  // Namespace: enter, build the tree, pivot; or join the node's container.
  // A SquashFS image comes from its server, shared by every container of it.
  // Both are found by socket names keyed with the user's secret.
  auto secret = [&]() -> const std::string& { return store::Root::user(o.storage).secret(); };
  auto build = [&] {
    if (image.squashfs) {
      util::UniqueFd tree = run::attach_squashfs(sqfs, plan, secret());
      timing("image server");
      run::build_tree(plan, tree.get());
    } else {
      run::enter_user_namespace(plan.outer_uid, plan.inner_uid, plan.outer_gid, plan.inner_gid);
      timing("user namespace");
      run::build_tree(plan);
    }
  };
  if (join && run::join_container(run::join_key(plan, launcher, secret()), launcher.local_size, plan.rootfs, build)) {
    timing("joined");
  } else {
    if (join) util::info("other users hold the names of this launch's shared container: running one of its own");
    build();
    timing("mounted");
  }
  run::enter_cwd(plan);
  // Root in the container keeps its capabilities across execve, in a user
  // namespace that owns the mount namespace (and, for a SquashFS image or
  // a shared container, the holder's): it could remount the image
  // read-write or reach the holder. One more user namespace below, mapping
  // the same ids, leaves it none over them: the mounts are locked
  // (mount_namespaces(7), "Restrictions on mount namespaces").
  if (plan.inner_uid == 0) run::enter_nested_user_namespace(plan.inner_uid, plan.inner_gid);

  // Container root: no privilege can be gained from here on.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw SysError("prctl(PR_SET_NO_NEW_PRIVS)");
  if (util::log_enabled(util::Level::Debug)) {
    // rt's own peak memory (VmHWM counts this process image only, unlike
    // getrusage, which also counts whatever exec'd into rt).
    if (auto status = util::read_file_if_exists("/proc/self/status")) {
      size_t at = status->find("VmHWM:");
      if (at != std::string::npos)
        util::debug("peak RSS" + status->substr(at + 5, status->find('\n', at) - at - 5));
    }
  }
  timing("exec");
  run::exec_program(argv, env, image.name);
}

} // namespace rt
