// The host injection of an exec (host); see injection.hpp.
#include "run/injection.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <map>
#include <optional>

#include "hpc/plan_cache.hpp"
#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "run/env.hpp"
#include "run/launch.hpp"
#include "store/layout.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::run {
namespace {

bool image_env_asks_gpu(const ImageConfig* config) {
  if (!config) return false;
  for (const auto& kv : config->env)
    if (kv.starts_with("NVIDIA_VISIBLE_DEVICES=")) {
      std::string v = kv.substr(23);
      return !v.empty() && v != "void" && v != "none";
    }
  return false;
}

// Host directories as opened once: their real path, and a descriptor to
// read links in them with one-component lookups.
struct RealDirs {
  struct Dir {
    std::string real;  // "" when it cannot be opened
    util::UniqueFd fd;
  };
  std::deque<Dir> opened;                 // references stay valid as it grows
  std::map<std::string, size_t> by_path;  // as given, and as it really is -> index in `opened`

  const Dir& operator[](const std::string& dir) {
    if (auto it = by_path.find(dir); it != by_path.end()) return opened[it->second];
    Dir d;
    int fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      d.fd = util::UniqueFd(fd);
      char buf[4096];
      const ssize_t len = ::readlink(util::fd_path(fd).c_str(), buf, sizeof buf);
      if (len > 0 && static_cast<size_t>(len) < sizeof buf && buf[0] == '/')
        d.real.assign(buf, static_cast<size_t>(len));
    }
    // A soname link's target lies in the real directory: found here again.
    auto [it, added] = by_path.emplace(d.real.empty() ? dir : d.real, opened.size());
    if (added) opened.push_back(std::move(d));
    by_path[dir] = it->second;
    return opened[it->second];
  }
};

// The real path of host file `path`, for a link into its directory: the
// links of its directory and its own followed (a soname link to a file
// beside it, or in another directory). As given where it cannot be read:
// the mount of its directory then names the reason.
std::string real_host_path(const std::string& path, RealDirs& real_dirs) {
  std::string p = path;
  for (int links = 0; links < 40; ++links) {
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) return path;
    const RealDirs::Dir& dir = real_dirs[slash == 0 ? "/" : p.substr(0, slash)];
    if (dir.real.empty()) return p;
    const std::string name = p.substr(slash + 1);
    p = dir.real == "/" ? "/" + name : dir.real + "/" + name;
    char target[4096];
    const ssize_t len = ::readlinkat(dir.fd.get(), name.c_str(), target, sizeof target);
    if (len <= 0 || static_cast<size_t>(len) == sizeof target) return p;  // not a link (EINVAL), or unreadable
    const std::string t(target, static_cast<size_t>(len));
    p = util::normalize_path(t.front() == '/' ? t : p.substr(0, p.rfind('/')) + "/" + t);
  }
  return path;  // a loop: the loader will say
}

// Each file linked into kHostFilesRoot by its real path: the link goes
// into the directory of the file's real path, as a host link to another
// directory (libfoo.so.1 -> /opt/x/libfoo.so.1.2) would not resolve inside
// the bound directory. Kept with the plan: a link that changes changes the
// identity of the file it leads to, and the plan is made again.
void resolve_host_files(hpc::Injection& inj) {
  RealDirs real_dirs;
  for (auto& f : inj.files)
    if (util::path_within(f.container, kHostFilesRoot) && f.container != kHostFilesRoot)
      f.host = real_host_path(f.host, real_dirs);
}

}  // namespace

hpc::Injection plan_injection(const ExecOptions& o, const ImageConfig* config, const hpc::ImageView& view) {
  hpc::InjectRequest req;
  req.mpi = o.mpi;
  req.gpu_required = o.gpu == ExecOptions::Inject::On;
  req.ib_required = o.ib == ExecOptions::Inject::On;
  req.fabric = o.fabric;
  req.glibc_replace = o.glibc_replace;
  req.devices = o.devices;
  // What is automatic depends on the devices this node has: the verbs
  // stack comes with a verbs device (a /dev/infiniband holding only
  // rdma_cm has none), the driver an image asks for with its control device.
  const bool auto_gpu = o.gpu == ExecOptions::Inject::Auto && image_env_asks_gpu(config);
  const bool auto_ib = o.ib == ExecOptions::Inject::Auto;
  std::vector<std::string> why;
  std::optional<hpc::SiteConfig> conf;
  req.gpu = req.gpu_required;
  req.ib = req.ib_required;
  if (auto_gpu || auto_ib || req.any()) conf = hpc::load_site_config();
  if (auto_ib) {
    auto devices = hpc::verbs_devices(*conf);
    req.ib = !devices.empty();  // auto_ib: not asked for
    why.push_back(devices.empty() ? "InfiniBand: not injected: no verbs device on this node"
                                  : "InfiniBand: injected: verbs device " + util::join(devices, ", "));
  }
  if (auto_gpu) {
    std::string ctl = hpc::nvidia_control_device(*conf);
    req.gpu = util::path_exists(ctl);  // auto_gpu: not asked for
    why.push_back(req.gpu ? "GPU: the image asks for one (NVIDIA_VISIBLE_DEVICES), and `" + ctl + "` is here"
                          : "GPU: the image asks for one (NVIDIA_VISIBLE_DEVICES), but this node has no `" + ctl +
                                "`: not injected");
  }
  if (!o.mpi.empty()) {
    try {
      auto argv = command_for(o.mode, o.command, config, "", "/bin/sh");
      req.program = argv.front();
    } catch (const Error&) {  // no program: exec says so later
    }
  }
  hpc::Injection inj;
  if (req.any()) {
    // Every rank of a job, and every later step, asks for the same plan:
    // it is kept while the files it was made from stay as they were; a
    // new plan reads the host's plugins through a cache of what they are.
    const int store = store::Root::user(o.storage).fd();
    const hpc::PlanCache plans(store, store::kPlanCacheDir);
    const std::string key = hpc::plan_key(req, *conf, view);
    if (auto kept = plans.find(key, view)) {
      inj = std::move(*kept);
      why.push_back("host injection: as planned at an earlier start (none of the files it was made from has changed)");
    } else {
      hpc::ElfCache elf(store, store::kElfCacheFile);
      hpc::PlanInputs inputs;
      inj = hpc::plan_injection(req, *conf, view, &elf, &inputs);
      elf.save();
      resolve_host_files(inj);
      plans.store(key, inputs, inj);
    }
  }
  inj.notes.insert(inj.notes.begin(), why.begin(), why.end());
  for (const auto& w : inj.warnings) util::warn(w);
  return inj;
}

// An NVIDIA_VISIBLE_DEVICES selection, as NVIDIA's container toolkit
// applies it: the device nodes and driver directories of the GPUs it
// leaves out are hidden (returned, to end the mount plan), and CUDA sees
// what it selects, unless the launcher or the user set
// CUDA_VISIBLE_DEVICES (Slurm does for --gres=gpu).
std::vector<Mount> select_gpus(const hpc::Injection& inj, std::vector<std::string>& env) {
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
  std::vector<Mount> hide;
  if (!mask.nodes.empty())
    hide.push_back(
        {.kind = Mount::Kind::Hide, .src = util::join(mask.nodes, '/'), .dst = "/dev", .why = "GPUs not selected"});
  if (!mask.buses.empty()) {
    // The kernel may refuse a mount inside /proc: then only a warning.
    hide.push_back({.kind = Mount::Kind::Hide,
                    .src = util::join(mask.buses, '/'),
                    .dst = "/proc/driver/nvidia/gpus",
                    .optional = true,
                    .why = "GPUs not selected",
                    .if_target = true});
  }
  return hide;
}

std::vector<Mount> injected_mounts(const hpc::Injection& inj) {
  std::vector<Mount> out;
  // Libraries and programs become links into their host directories (by
  // their real paths: resolve_host_files), each directory bound once
  // (Mount::Kind::HostFile): a start pays a mount per directory, not per file.
  for (const auto& f : inj.files) {
    if (!util::path_within(f.container, kHostFilesRoot) || f.container == kHostFilesRoot) {
      out.push_back(
          {.kind = Mount::Kind::Bind, .src = f.host, .dst = f.container, .readonly = true, .why = "host library"});
      continue;
    }
    out.push_back({.kind = Mount::Kind::HostFile,
                   .src = f.host,
                   .dst = f.container,
                   .readonly = true,
                   .why = "host libraries and programs"});
  }
  for (const auto& f : inj.over)
    out.push_back({.kind = Mount::Kind::Bind,
                   .src = f.host,
                   .dst = f.container,
                   .readonly = true,
                   .why = "host glibc in place of the image's"});
  for (const auto& d : inj.dirs)
    out.push_back({.kind = Mount::Kind::Bind,
                   .src = d,
                   .dst = d,
                   .readonly = true,
                   .optional = true,
                   .why = "host MPI/fabric files"});
  for (const auto& f : inj.cdi_mounts)
    out.push_back({.kind = Mount::Kind::Bind, .src = f.host, .dst = f.container, .readonly = true, .why = "CDI"});
  for (const auto& l : inj.cdi_links)
    out.push_back({.kind = Mount::Kind::Symlink, .src = l.host, .dst = l.container, .why = "CDI hook"});
  return out;
}

namespace {

// Trees are never removed by a start: a container may be reading one (its
// links are the tree's own entries). A start that uses a tree marks it
// used (its time, once a day); rt prune removes those unused for a week.
// Past kTreesMax, a start makes its links itself.
constexpr size_t kTreesMax = 256;
constexpr int64_t kDay = 86400, kTreeUnused = 7 * kDay;

// File systems whose lookups cost no network round trip.
bool local_file_system(int fd) {
  struct statfs sf;
  if (::fstatfs(fd, &sf) != 0) return false;
  const auto t = static_cast<unsigned long>(sf.f_type);
  return t == EXT4_SUPER_MAGIC || t == XFS_SUPER_MAGIC || t == BTRFS_SUPER_MAGIC || t == TMPFS_MAGIC ||
         t == 0x2FC12FC1 /* ZFS */ || t == F2FS_SUPER_MAGIC;
}

// Makes `t` as directory `name` of `dir`: lib/, bin/ (the subdirectories),
// .d/0 ... (the mount points) and the links.
void make_tree(int dir, const std::string& name, const HostFilesTree& t) {
  if (::mkdirat(dir, name.c_str(), 0755) != 0) throw SysError{errno, "mkdir", name};
  util::UniqueFd top = util::open_fd_at(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW);
  auto mkdir = [&](const std::string& sub) {
    if (::mkdirat(top.get(), sub.c_str(), 0755) != 0) throw SysError{errno, "mkdir", name + "/" + sub};
  };
  mkdir(".d");
  for (size_t i = 0; i < t.dirs.size(); ++i) mkdir(".d/" + std::to_string(i));
  for (const auto& sub : t.subdirs) mkdir(sub);
  for (const auto& l : t.links)
    if (::symlinkat(l.target.c_str(), top.get(), l.path.c_str()) != 0)
      throw SysError{errno, "symlink", name + "/" + l.path};
}

}  // namespace

std::string kept_host_files_tree(const HostFilesTree& t, const std::string& storage) {
  if (t.links.empty()) return "";
  try {
    const store::Root& root = store::Root::user(storage);
    if (!local_file_system(root.fd())) return "";
    std::string what = "rt-host-tree 1\n" + std::to_string(t.dirs.size()) + "\n";
    for (const auto& s : t.subdirs) what += "d " + s + "\n";
    for (const auto& l : t.links) what += "l " + l.path + " " + l.target + "\n";
    const std::string name = util::hash_hex(what);
    const std::string path = root.sub(std::string(store::kHostTreesDir) + "/" + name);
    util::UniqueFd dir = root.dir(store::kHostTreesDir, true);
    struct stat st;
    if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) return "";
      if (::time(nullptr) - st.st_mtim.tv_sec > kDay) (void)::utimensat(dir.get(), name.c_str(), nullptr, 0);
      return path;
    }
    const std::string shown = root.sub(store::kHostTreesDir);
    if (util::list_names(dir.get(), shown).size() >= kTreesMax) return "";
    // Made under a name of its own, then renamed: a tree is whole or absent.
    const std::string tmp = "." + name + "." + std::to_string(::getpid()) + ".tmp";
    util::remove_tree_at(dir.get(), tmp, shown + "/" + tmp);
    make_tree(dir.get(), tmp, t);
    if (::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
      const int e = errno;
      util::remove_tree_at(dir.get(), tmp, shown + "/" + tmp);
      if (e != EEXIST && e != ENOTEMPTY) return "";  // else another start made it first
    }
    return path;
  } catch (const Error& e) {
    util::debug(std::string("host files: no kept tree (") + e.what() + "): made at the start");
    return "";
  }
}

size_t prune_host_trees(int dir, const std::string& shown) {
  size_t removed = 0;
  const int64_t now = ::time(nullptr);
  for (const auto& n : util::list_names(dir, shown)) {
    struct stat st;
    const bool tree = n.size() == 32 && util::is_hex(n);
    const bool debris = n.starts_with(".") && n.ends_with(".tmp");
    if ((!tree && !debris) || ::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (now - st.st_mtim.tv_sec < (tree ? kTreeUnused : kDay)) continue;
    util::remove_tree_at(dir, n, shown + "/" + n);
    ++removed;
  }
  return removed;
}

void apply_injected_env(const hpc::Injection& inj, std::vector<std::string>& env) {
  prepend_list(env, "LD_LIBRARY_PATH", util::join(inj.lib_path, ':'));
  prepend_list(env, "PATH", util::join(inj.bin_path, ':'));
  for (const auto& kv : inj.env_set) set_var(env, kv);
  for (const auto& kv : inj.env_list)
    if (const size_t eq = kv.find('='); eq != std::string::npos) prepend_list(env, kv.substr(0, eq), kv.substr(eq + 1));
}

}  // namespace rt::run
