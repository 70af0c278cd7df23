// Overlays through FUSE (namespace); see overlay_image.hpp.
#include "run/overlay_image.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "rt/error.hpp"
#include "run/overlay_dir.hpp"
#include "squash/sif.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::run {
namespace {

constexpr long kFuseMagic = 0x65735546;
constexpr auto kMountTimeout = std::chrono::seconds(30);

}  // namespace

std::string find_system_program(const std::string& name) {
  std::string dirs = "/usr/bin:/bin:/usr/sbin:/sbin";
  if (const char* path = std::getenv("PATH"); path && *path) dirs += std::string(":") + path;
  for (const auto& d : util::split(dirs, ':')) {
    if (d.empty() || d.front() != '/') continue;
    const std::string p = d + "/" + name;
    struct stat st;
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(p.c_str(), X_OK) != 0) continue;
    if ((st.st_uid != 0 && st.st_uid != ::getuid()) || (st.st_mode & 022)) continue;
    return p;
  }
  return "";
}

namespace {

std::string need_program(const std::string& path, const std::string& name, const std::string& what) {
  if (path.empty())
    throw Error(what + " needs `" + name + "`, which is not installed",
                "install Debian's fuse2fs and fuse-overlayfs packages (apt install fuse2fs fuse-overlayfs)");
  return path;
}

// One FUSE program: its pid, what it serves, and its stderr (a memfd: it
// never blocks the program, and is read only when it fails).
struct Daemon {
  pid_t pid = -1;
  std::string name;
  util::UniqueFd err;
};

// Starts argv with CAP_SYS_ADMIN of this user namespace kept across
// execve (ambient): fuse2fs and fuse-overlayfs mount with mount(2), as
// they do as root, instead of through the setuid fusermount, which a user
// namespace cannot use. The capability is the namespace's: it gives
// nothing on the host.
Daemon spawn(const std::vector<std::string>& argv, int pass_fd = -1) {
  Daemon d;
  d.name = util::base_name(argv.front());
  d.err = util::memory_file(d.name);
  const int err = d.err.get();
  std::vector<char*> a;
  for (const auto& x : argv) a.push_back(const_cast<char*>(x.c_str()));
  a.push_back(nullptr);
  d.pid = ::fork();
  if (d.pid < 0) throw SysError{errno, "fork", d.name};
  if (d.pid == 0) {
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(127);
    if (pass_fd >= 0 && ::fcntl(pass_fd, F_SETFD, 0) != 0) ::_exit(127);  // the one descriptor it inherits
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct c[2]{};
    if (::syscall(SYS_capget, &h, c) == 0) {
      c[0].inheritable |= 1u << CAP_SYS_ADMIN;
      if (::syscall(SYS_capset, &h, c) == 0) ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0);
    }
    ::execv(a[0], a.data());
    const std::string msg = "cannot run " + argv.front() + ": " + std::strerror(errno) + "\n";
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(127);
  }
  return d;
}

// Waits until `point` is a FUSE mount (the daemon serves it), or the
// daemon ends (an error with what it said).
void await_mount(Daemon& d, const std::string& point, const std::string& what) {
  const auto until = std::chrono::steady_clock::now() + kMountTimeout;
  for (;;) {
    struct statfs sf;
    if (::statfs(point.c_str(), &sf) == 0 && static_cast<long>(sf.f_type) == kFuseMagic) return;
    int st = 0;
    if (::waitpid(d.pid, &st, WNOHANG) == d.pid) {
      d.pid = -1;
      const std::string text = util::memory_file_text(d.err.get());
      throw Error(d.name + " could not mount " + what + (text.empty() ? "" : ": " + text));
    }
    if (std::chrono::steady_clock::now() > until) throw Error(d.name + " did not mount " + what + " in 30 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void send_fd(int sock, int fd, const std::string& text) {
  struct iovec iov {
    const_cast<char*>(text.data()), text.size()
  };
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  (void)::sendmsg(sock, &msg, MSG_NOSIGNAL);
}

// The keeper (see the header). Never returns.
[[noreturn]] void keep(const FuseRootRequest& r, const std::string& staging, int sock) {
  std::vector<Daemon> daemons;
  bool handed = false;
  try {
    for (const auto& l : r.layers)
      if (l.writable) take_over_overlay_lock(l);
    // The image, taken along into the namespace of our own (a bind from
    // the container's would be one across namespaces, which the kernel
    // refuses); not recursively: the staging tmpfs is mounted on a
    // directory image's own root. Before Linux 5.2 (no open_tree) nothing
    // can be handed across: what the container needs is mounted in its
    // namespace before this process leaves it, the image on f/l (bound)
    // and the merged tree's FUSE mount on f/m, which fuse-overlayfs, run in
    // this process's namespace, serves through its /dev/fuse descriptor.
    const int image = ::open_tree(r.image, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    const bool in_place = image < 0 && errno == ENOSYS;
    if (image < 0 && !in_place) throw SysError{errno, "open_tree", r.shown};
    util::UniqueFd image_tree(image);
    const std::string image_lower = "f/l";
    util::UniqueFd merged;  // in place: /dev/fuse of the mount on f/m
    if (in_place) {
      const std::string at = staging + "/";
      if (::mount(util::fd_path(r.image).c_str(), (at + image_lower).c_str(), nullptr, MS_BIND, nullptr) != 0)
        throw SysError{errno, "mount(MS_BIND)", r.shown, "staging " + image_lower};
      merged = util::UniqueFd(::open("/dev/fuse", O_RDWR | O_CLOEXEC));
      if (!merged) throw SysError{errno, "open", "/dev/fuse"};
      const std::string opts = "fd=" + std::to_string(merged.get()) +
                               ",rootmode=40000,user_id=" + std::to_string(::getuid()) +
                               ",group_id=" + std::to_string(::getgid()) + ",default_permissions";
      const std::string point = at + "f/m";
      if (::mount("fuse-overlayfs", point.c_str(), "fuse.fuse-overlayfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
        throw SysError{errno, "mount(fuse)", "the overlay on `" + r.shown + "`"};
    }
    if (::unshare(CLONE_NEWNS) != 0) throw SysError{errno, "unshare(CLONE_NEWNS)"};
    if (::chdir(staging.c_str()) != 0) throw SysError{errno, "chdir", "staging"};
    if (!in_place && ::move_mount(image, "", AT_FDCWD, image_lower.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
      throw SysError{errno, "move_mount", r.shown};
    image_tree.reset();
    // Nothing of the container's stays open here for its lifetime (a
    // holder's socket, the store): only the socket to it.
    util::close_own_fds(/*only_stdio=*/true, {sock, merged.get()});
    // The layers, top first, as overlayfs takes them.
    std::string lower = image_lower, upper = "upper", work = "work";
    for (size_t i = 0; i < r.layers.size(); ++i) {
      const OverlayLayer& l = r.layers[i];
      std::string top = l.path;
      if (l.fuse()) {
        const std::string point = "f/i" + std::to_string(i);
        const std::string what = (l.embedded ? "the overlay partition of `"
                                  : l.image  ? "overlay image `"
                                             : "SquashFS overlay `") +
                                 l.path + "`";
        if (l.image)
          daemons.push_back(spawn({need_program(r.fuse2fs, "fuse2fs", what), l.path, point, "-f", "-o",
                                   std::string(l.writable ? "rw" : "ro") +
                                       (l.ext_offset ? ",offset=" + std::to_string(l.ext_offset) : "")}));
        else
          daemons.push_back(spawn({need_program(r.squashfuse, "squashfuse", what), "-f", "-o",
                                   "offset=" + std::to_string(l.squash_offset), l.path, point}));
        await_mount(daemons.back(), point, what);
        top = point;
      }
      if (l.writable) {
        upper = top + "/upper";
        work = top + "/work";
      } else {
        lower = (l.image ? top + "/upper" : overlay_read_dir(top)) + ":" + lower;
      }
    }
    // Every file the user's, as the user's images are: a file of an id
    // this namespace does not map (written by root into an image, say)
    // could not be opened through fuse-overlayfs at all.
    const std::string squash =
        "squash_to_uid=" + std::to_string(::getuid()) + ",squash_to_gid=" + std::to_string(::getgid());
    daemons.push_back(spawn({need_program(r.fuse_overlayfs, "fuse-overlayfs", "this overlay"), "-f", "-o",
                             squash + ",lowerdir=" + lower +
                                 (r.read_only ? "" : ",upperdir=" + upper + ",workdir=" + work),
                             in_place ? "/dev/fd/" + std::to_string(merged.get()) : "f/m"},
                            merged.get()));
    merged.reset();  // fuse-overlayfs's alone: the mount fails if it does
    await_mount(daemons.back(), "f/m", "the overlay on `" + r.shown + "`");
    if (in_place) {
      send_fd(sock, -1, "A");  // attached: on f/m in the container's namespace
    } else {
      const int tree = ::open_tree(AT_FDCWD, "f/m", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
      if (tree < 0) throw SysError{errno, "open_tree", "fuse-overlayfs"};
      send_fd(sock, tree, "ok");
      ::close(tree);
    }
    handed = true;
    // None of theirs stays here: the container's copy is the last.
    ::umount2("f/m", MNT_DETACH);
    for (size_t i = 0; i < r.layers.size(); ++i)
      if (r.layers[i].fuse()) ::umount2(("f/i" + std::to_string(i)).c_str(), MNT_DETACH);
    ::umount2(image_lower.c_str(), MNT_DETACH);
  } catch (const std::exception& e) {
    if (!handed) send_fd(sock, -1, std::string("E") + e.what());
    for (auto it = daemons.rbegin(); it != daemons.rend(); ++it)
      if (it->pid > 0) ::kill(it->pid, SIGTERM);
  }
  ::close(sock);
  (void)!::chdir("/");
  // fuse-overlayfs ends with the container's mount namespace, then each
  // fuse2fs, its image released, writes it out and ends.
  const pid_t merged = daemons.empty() ? -1 : daemons.back().pid;
  for (;;) {
    int st = 0;
    const pid_t got = ::wait(&st);
    if (got < 0 && errno == ECHILD) break;
    if (got == merged)
      for (const auto& l : r.layers)
        if (l.writable) closing_overlay_lock(l);
  }
  for (const auto& l : r.layers)
    if (l.writable) release_overlay_lock(l);
  ::_exit(0);
}

}  // namespace

void find_overlay_programs(MountPlan& plan) {
  if (plan.overlays.empty()) return;
  bool images = false, squash = false;
  for (auto& l : plan.overlays) {
    if (!l.embedded) l.image = is_ext_image(l.path);
    if (!l.image) l.squash_offset = squash_offset(l.path);
    if (l.fuse() && plan.inner_uid != plan.outer_uid)
      throw Error("--overlay " + l.path + ": an overlay image with --fakeroot, --root or --uid is not supported",
                  "use a directory overlay (mkdir -m 0755 DIR; --overlay DIR)");
    if (l.squash_offset >= 0 && l.writable)
      throw Error("--overlay " + l.path + ": a SquashFS or SIF file is read-only",
                  "give it as " + l.path + ":ro, with a directory or an overlay image after it for the writes");
    images |= l.image;
    squash |= l.squash_offset >= 0;
  }
  plan.fuse_overlayfs = find_system_program("fuse-overlayfs");
  if (images) plan.fuse2fs = find_system_program("fuse2fs");
  if (squash) plan.squashfuse = find_system_program("squashfuse");
}

int64_t squash_offset(const std::string& path) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  char magic[4];
  if (::pread(fd.get(), magic, 4, 0) == 4 && std::memcmp(magic, "hsqs", 4) == 0) return 0;
  if (!squash::is_sif(fd.get())) return -1;
  const squash::SifFile sif = squash::read_sif(fd.get(), path);
  return squash::sif_root_partition(sif, path).offset;  // throws: no SquashFS partition
}

bool is_ext_image(const std::string& path) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a link: refused by its check
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  unsigned char magic[2];
  return ::pread(fd.get(), magic, 2, 1024 + 56) == 2 && magic[0] == 0x53 && magic[1] == 0xEF;
}

HeldTree fuse_root(const FuseRootRequest& r) {
  const std::string staging = util::real_path(util::open_fd(r.staging, O_PATH | O_DIRECTORY).get(), "staging");
  for (const char* d : {"f", "f/l", "f/m"})
    if (::mkdirat(AT_FDCWD, (r.staging + "/" + d).c_str(), 0700) != 0 && errno != EEXIST)
      throw SysError{errno, "mkdir", std::string("staging ") + d};
  for (size_t i = 0; i < r.layers.size(); ++i)
    if (r.layers[i].fuse() && ::mkdir((r.staging + "/f/i" + std::to_string(i)).c_str(), 0700) != 0)
      throw SysError{errno, "mkdir", "staging f/i" + std::to_string(i)};
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) throw SysError{errno, "socketpair"};
  util::UniqueFd mine(sv[0]), theirs(sv[1]);
  std::fflush(nullptr);
  const pid_t first = ::fork();
  if (first < 0) throw SysError{errno, "fork"};
  if (first == 0) {
    // A session of its own (a ^C at the terminal is the program's, not
    // the file systems'), then a grandchild: no child of the program.
    mine.reset();
    ::setsid();
    const pid_t keeper = ::fork();
    if (keeper == 0) {
      const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      if (null >= 0) ::dup2(null, 0), ::dup2(null, 1), ::dup2(null, 2);
      std::string title = "rt-overlay";
      for (const auto& l : r.layers) title += " " + l.path;
      util::set_process_title(title);
      keep(r, staging, theirs.get());
    }
    ::_exit(keeper < 0 ? 1 : 0);
  }
  theirs.reset();
  int st = 0;
  while (::waitpid(first, &st, 0) < 0 && errno == EINTR) {
  }
  char text[8192];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct iovec iov {
    text, sizeof text - 1
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(mine.get(), &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n <= 0) throw Error("the overlay's keeper ended before it mounted `" + r.shown + "`");
  text[n] = '\0';
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      util::debug(std::string("root: fuse-overlayfs on `") + r.shown + "`");
      return {util::UniqueFd(fd), false};
    }
  if (n == 1 && text[0] == 'A') {
    util::debug(std::string("root: fuse-overlayfs on `") + r.shown + "`, mounted in place");
    return {util::open_fd(r.staging + "/f/m", O_PATH | O_DIRECTORY), true};
  }
  throw Error(text[0] == 'E' ? std::string(text + 1) : "the overlay's keeper sent no mount");
}

}  // namespace rt::run
