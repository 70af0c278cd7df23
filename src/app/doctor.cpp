// rt doctor: can rt run containers here, and what will it find (host).
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/seccomp.hpp"
#include "hpc/inject.hpp"
#include "hpc/ldcache.hpp"
#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "run/holder.hpp"
#include "run/overlay_image.hpp"
#include "store/layout.hpp"
#include "store/root.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

using Status = DoctorCheck::Status;

std::string trimmed(const std::string& path) {
  auto t = util::read_file_if_exists(path, 1 << 16);
  return t ? util::trim(*t) : std::string();
}

// Runs `fn` in a child process in a new user and mount namespace (the
// caller's ids mapped to themselves, as rt maps them); "" when it and the
// namespaces worked, else why not.
std::string in_namespace(const std::function<std::string()>& fn) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return std::strerror(errno);
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  pid_t pid = ::fork();
  if (pid < 0) return std::strerror(errno);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    std::string why;
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      why = std::string("unshare(CLONE_NEWUSER): ") + std::strerror(errno);
    } else {
      auto put = [](const char* file, const std::string& text) {
        int fd = ::open(file, O_WRONLY | O_CLOEXEC);
        bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        if (fd >= 0) ::close(fd);
        return ok;
      };
      auto map = [](unsigned id) { return std::to_string(id) + " " + std::to_string(id) + " 1\n"; };
      if (!put("/proc/self/setgroups", "deny") || !put("/proc/self/uid_map", map(uid)) ||
          !put("/proc/self/gid_map", map(gid)))
        why = std::string("writing the id maps: ") + std::strerror(errno);
      else
        why = fn();
    }
    (void)!::write(pipe_fds[1], why.data(), why.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string why;
  char buf[512];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) why.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st)) return "the test process died";
  return why;
}

// Where AppArmor restricts unprivileged user namespaces: whether rt's
// profile is installed and loaded, and what the administrator does.
struct AppArmorState {
  std::string detail;  // "AppArmor restricts ...; rt's profile ..."
  std::string fix;
};
AppArmorState apparmor_state() {
  const std::string file = util::kAppArmorProfileFile;
  const std::string load = std::string("apparmor_parser -r ") + file;
  const std::string lift = "sysctl kernel.apparmor_restrict_unprivileged_userns=0";
  AppArmorState a;
  a.detail = "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)";
  if (util::under_rt_apparmor_profile()) {
    a.detail += "; rt runs under its profile";
    return a;
  }
  struct stat st;
  const bool installed = ::stat(file.c_str(), &st) == 0;
  // The loaded profiles, one "NAME (MODE)" a line; root's to read on most hosts.
  const char* const profiles = "/sys/kernel/security/apparmor/profiles";
  std::optional<bool> loaded;
  try {
    if (auto text = util::read_file_if_exists(profiles, 1 << 22)) {
      loaded = false;
      util::for_each_line(*text, [&](std::string_view line) {
        if (line.starts_with(std::string(util::kAppArmorProfileRt) + " (") ||
            line.starts_with(std::string(util::kAppArmorProfileRtImage) + " ("))
          loaded = true;
        return true;
      });
    }
  } catch (const Error&) {
  }
  a.detail += "; rt's profile " + file + (installed ? " is installed" : " is not installed");
  if (loaded && *loaded) {
    a.detail += " and loaded, but does not cover this program (it names the installed rt and rt-image)";
    a.fix = "run the installed rt, which the profile covers; or ask the administrator to lift the restriction: " + lift;
    return a;
  }
  if (loaded)
    a.detail += ", not loaded";
  else if (installed)
    a.detail += std::string(", loaded or not (") + profiles + " is not readable here)";
  a.fix =
      "ask the administrator to " +
      (installed ? "load rt's AppArmor profile: " + load
                 : "install rt's AppArmor profile (cmake --install puts it in /etc/apparmor.d) and load it: " + load) +
      "; or to lift the restriction: " + lift;
  return a;
}

DoctorCheck check_userns() {
  DoctorCheck c{"user namespaces", Status::Ok, "", ""};
  utsname u{};
  ::uname(&u);
  const std::string max = trimmed("/proc/sys/user/max_user_namespaces");
  c.detail = std::string("kernel ") + u.release + (max.empty() ? "" : ", max_user_namespaces " + max);
  if (max == "0") {
    c.status = Status::Fail;
    c.fix = "ask the administrator: sysctl -w user.max_user_namespaces=15000";
    return c;
  }
  const std::string why = in_namespace([] { return std::string(); });
  if (!why.empty()) {
    c.status = Status::Fail;
    c.detail += ": " + why;
    c.fix = "ask the administrator to allow unprivileged user namespaces";
  }
  if (util::apparmor_userns_sysctl() == "1") {
    AppArmorState a = apparmor_state();
    c.detail += "; " + a.detail;
    if (!why.empty() && !a.fix.empty()) c.fix = a.fix;
  }
  return c;
}

DoctorCheck check_fuse() {
  DoctorCheck c{"/dev/fuse", Status::Ok, "", ""};
  struct stat st;
  if (::stat("/dev/fuse", &st) != 0 || !S_ISCHR(st.st_mode)) {
    c.status = Status::Fail;
    c.detail = "missing, or not a device: SquashFS images cannot be served";
    c.fix = "ask the administrator: modprobe fuse";
    return c;
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
  c.detail = std::string("mode ") + mode;
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    c.status = Status::Fail;
    c.detail += std::string(": ") + std::strerror(errno) + "; SquashFS images cannot be served";
    c.fix = "ask the administrator: chmod 0666 /dev/fuse (udev's default)";
    return c;
  }
  ::close(fd);
  return c;
}

// The check `name` of a feature probed in a child's namespace by `probe`
// ("" when it works): a warning saying `then` and `fix` when it does not.
DoctorCheck probed(const char* name, const char* works, const std::function<std::string()>& probe, const char* then,
                   const char* fix) {
  DoctorCheck c{name, Status::Ok, works, ""};
  if (std::string why = in_namespace(probe); !why.empty()) {
    c.status = Status::Warn;
    c.detail = why + "; " + then;
    c.fix = fix;
  }
  return c;
}

DoctorCheck check_overlay() {
  return probed(
      "overlayfs in a user namespace", "bind mounts into read-only images use it",
      [] {
        if (::mount("none", "/tmp", "tmpfs", 0, nullptr) != 0) return std::string("tmpfs: ") + std::strerror(errno);
        for (const char* d : {"/tmp/l", "/tmp/u", "/tmp/w", "/tmp/m"}) ::mkdir(d, 0700);
        if (::mount("overlay", "/tmp/m", "overlay", 0, "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr") != 0)
          return std::string("overlay: ") + std::strerror(errno);
        return std::string();
      },
      "rt falls back to copying directory entries (slower --bind into images)", "a kernel of 5.11 or later");
}

// Overlay images (rt overlay create, --overlay FILE) run through two FUSE
// programs; without them only directory overlays work.
DoctorCheck check_overlay_images() {
  DoctorCheck c{"overlay images", Status::Ok, "", ""};
  std::vector<std::string> missing, found;
  for (const char* p : {"fuse2fs", "fuse-overlayfs", "mkfs.ext3"}) {
    const std::string at = run::find_system_program(p);
    (at.empty() ? missing : found).push_back(at.empty() ? p : at);
  }
  if (missing.empty()) {
    c.detail = util::join(found, ", ") + ": --overlay FILE.img works";
    return c;
  }
  c.status = Status::Warn;
  c.detail = "no " + util::join(missing, ", ") + ": --overlay takes directories only";
  c.fix = "ask the administrator: apt install fuse2fs fuse-overlayfs e2fsprogs";
  return c;
}

DoctorCheck check_seccomp() {
  return probed(
      "root emulation (--seccomp)", "seccomp filters, for package managers under --root",
      [] {
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
          return std::string("prctl(PR_SET_NO_NEW_PRIVS): ") + std::strerror(errno);
        try {
          app::install_root_emulation(false);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        // The root of the host is not the caller's: only the filter makes this succeed.
        if (::chown("/", 12345, 12345) != 0)
          return std::string("the filter loaded but chown still fails: ") + std::strerror(errno);
        return std::string();
      },
      "rt exec --seccomp cannot run here", "a kernel with seccomp filters (CONFIG_SECCOMP_FILTER)");
}

// The calls that copy, attach and make read-only whole mount trees;
// without them rt takes slower ways, or refuses (doc/ARCHITECTURE.md,
// Kernels).
DoctorCheck check_mount_api() {
  DoctorCheck c{"mount API", Status::Ok, "open_tree and move_mount (Linux 5.2), mount_setattr (Linux 5.12)", ""};
  std::vector<std::string> missing;
  if (!run::kernel_copies_mounts())
    missing.push_back("no open_tree: SquashFS starts bind the image from its server's namespace");
  struct mount_attr attr {};
  if (::mount_setattr(-1, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0 && errno == ENOSYS)
    missing.push_back("no mount_setattr: read-only trees are remounted mount by mount");
  if (!missing.empty()) {
    c.status = Status::Warn;
    c.detail = util::join(missing, "; ");
    c.fix = "a kernel of 5.12 or later";
  }
  return c;
}

DoctorCheck check_openat2() {
  DoctorCheck c{"openat2", Status::Ok, "in-root path resolution in one call", ""};
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
  if (fd < 0) {
    // util/inroot: the walk one component at a time, as safe, slower.
    c.status = Status::Warn;
    c.detail = std::string(std::strerror(errno)) +
               ": paths in images are resolved one component at a time (slower unpacking and starts)";
    c.fix = "a kernel of 5.6 or later";
  } else {
    ::close(static_cast<int>(fd));
  }
  return c;
}

DoctorCheck check_store(const StoreOptions& o) {
  DoctorCheck c{"store", Status::Ok, "", ""};
  const std::string path = store::store_path(o.storage);
  try {
    auto root = store::Root::open(path, false);
    if (!root) {
      c.detail = "`" + path + "` does not exist yet; the first pull or import makes it (mode 0700)";
      return c;
    }
    struct statvfs vfs;
    struct statfs fs;
    c.detail = "`" + root->path() + "`, yours, mode 0700";
    if (::fstatvfs(root->fd(), &vfs) == 0)
      c.detail += ", " + util::human_bytes(static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize) + " free";
    if (::fstatfs(root->fd(), &fs) == 0) {
      const auto type = static_cast<unsigned long>(fs.f_type);
      const char* shared = type == NFS_SUPER_MAGIC ? "NFS"
                           : type == 0x0BD00BD0UL  ? "Lustre"
                           : type == 0x47504653UL  ? "GPFS"
                                                   : nullptr;
      if (shared) {
        c.status = Status::Warn;
        c.detail += std::string(", on ") + shared;
        c.fix =
            "keep the store on node-local disk (--storage or RT_STORAGE, e.g. /var/tmp or $TMPDIR); "
            "put SquashFS files on the shared filesystem instead";
      }
    }
  } catch (const Error& e) {
    c.status = Status::Fail;
    c.detail = e.what();
    c.fix = e.hint().empty() ? "use another store with --storage or RT_STORAGE" : e.hint();
  }
  return c;
}

// The first of `names` on PATH, or "".
std::string on_path(std::initializer_list<const char*> names) {
  const char* path = std::getenv("PATH");
  for (const char* n : names)
    for (const auto& dir : util::split(path ? path : "/usr/bin:/bin", ':'))
      if (!dir.empty() && ::access((dir + "/" + n).c_str(), X_OK) == 0) return dir + "/" + n;
  return {};
}

DoctorCheck check_launchers(const std::map<std::string, std::string>& cache) {
  DoctorCheck c{"launchers and MPI", Status::Ok, "", ""};
  std::vector<std::string> found;
  if (auto s = on_path({"srun"}); !s.empty()) found.push_back("Slurm (" + s + ")");
  if (cache.count("libpmix.so.2")) found.push_back("PMIx (" + cache.at("libpmix.so.2") + ")");
  if (auto m = on_path({"mpirun.openmpi", "mpirun"}); !m.empty()) found.push_back("mpirun (" + m + ")");
  if (auto m = on_path({"mpiexec.hydra", "mpiexec.mpich"}); !m.empty()) found.push_back("Hydra (" + m + ")");
  if (cache.count("libmpi.so.40")) found.push_back("Open MPI library " + cache.at("libmpi.so.40") + " (--mpi=openmpi)");
  for (const char* abi : {"libmpi.so.12", "libmpich.so.12"})
    if (cache.count(abi)) {
      found.push_back("MPICH-ABI library " + cache.at(abi) + " (--mpi=mpich)");
      break;
    }
  c.detail = found.empty() ? "none found: images run, --mpi has nothing to inject" : util::join(found, "; ");
  if (found.empty()) c.status = Status::Warn;
  return c;
}

DoctorCheck check_gpu(const std::map<std::string, std::string>& cache, const hpc::SiteConfig& conf) {
  DoctorCheck c{"NVIDIA GPUs", Status::Ok, "", ""};
  const std::string version = trimmed("/proc/driver/nvidia/version");
  std::vector<std::string> specs;
  for (const auto& dir : conf.get("cdi.dirs", {"/etc/cdi", "/var/run/cdi"}))
    if (util::is_directory(dir))
      for (const auto& n : util::list_names(util::open_fd(dir, O_PATH | O_DIRECTORY).get(), dir))
        if (n.ends_with(".json") || n.ends_with(".yaml") || n.ends_with(".yml")) specs.push_back(dir + "/" + n);
  const std::string ctl = hpc::nvidia_control_device(conf);
  if (version.empty()) {
    c.detail = "no NVIDIA driver on this node; --gpu is refused";
  } else {
    c.detail = version.substr(0, version.find('\n'));
    c.detail += util::path_exists(ctl) ? "; images that ask for a GPU get the driver (`" + ctl + "`)"
                                       : "; but no `" + ctl + "`: images that ask for a GPU get no driver";
    if (!cache.count("libcuda.so.1")) {
      c.status = Status::Warn;
      c.detail += "; but libcuda.so.1 is not in the linker cache";
      c.fix = "ask the administrator to run ldconfig after installing the driver";
    }
  }
  c.detail += specs.empty() ? "; no CDI specs" : "; CDI specs: " + util::join(specs, ", ");
  return c;
}

// What `rt exec` injects by itself here, and why: the verbs stack only
// with a verbs device (a /dev/infiniband holding only rdma_cm has none).
DoctorCheck check_ib(const std::map<std::string, std::string>& cache, const hpc::SiteConfig& conf) {
  DoctorCheck c{"InfiniBand", Status::Ok, "", ""};
  const auto devices = hpc::verbs_devices(conf);
  const auto libs = conf.get("ib.libraries", {"libibverbs.so.1"});
  const bool verbs = !libs.empty() && (libs.front().front() == '/' ? util::path_exists(libs.front())
                                                                   : cache.count(libs.front()) != 0);
  if (devices.empty()) {
    std::string dev = util::is_directory("/dev/infiniband")
                          ? "/dev/infiniband holds no verbs device (" +
                                util::join(util::list_names(util::open_fd("/dev/infiniband", O_PATH | O_DIRECTORY).get(),
                                                            "/dev/infiniband"),
                                           ", ") +
                                ")"
                          : "no verbs device";
    c.detail = dev + ": rt exec injects no InfiniBand stack (--ib forces it)";
  } else {
    c.detail = "verbs devices " + util::join(devices, ", ") + ": rt exec injects the host's verbs stack" +
               (verbs ? "" : ", but `" + (libs.empty() ? std::string("libibverbs.so.1") : libs.front()) +
                                 "` is not in the linker cache");
    if (!verbs) {
      c.status = Status::Warn;
      c.fix = "ask the administrator to install rdma-core (libibverbs) and run ldconfig";
    }
  }
  return c;
}

}  // namespace

std::vector<DoctorCheck> doctor(const StoreOptions& o) {
  std::vector<DoctorCheck> out{check_userns(),  check_fuse(),      check_overlay(), check_overlay_images(),
                               check_openat2(), check_mount_api(), check_seccomp(), check_store(o)};
  DoctorCheck site{"site configuration", Status::Ok, "", ""};
  hpc::SiteConfig conf;
  try {
    conf = hpc::load_site_config();
    site.detail = conf.file.empty() ? "none (" + std::string(std::getenv("RT_CONF") ? "$RT_CONF" : "/etc/rt/rt.conf") +
                                          "): built-in defaults"
                                    : "`" + conf.file + "`";
  } catch (const Error& e) {
    site.status = Status::Fail;
    site.detail = e.what();
    site.fix = "correct the file (rt-exec(1), SITE CONFIGURATION)";
  }
  std::map<std::string, std::string> cache;
  const std::string ld = conf.get("ld_cache", {"/etc/ld.so.cache"}).front();
  try {
    cache = hpc::read_ld_cache(ld);
  } catch (const Error&) {  // then nothing is found through it
  }
  out.push_back(check_launchers(cache));
  out.push_back(check_gpu(cache, conf));
  out.push_back(check_ib(cache, conf));
  out.push_back(site);
  return out;
}

}  // namespace rt
