// Applying a mount plan (namespace, before the root is entered -> container root).
//
// Layout while building, all private to this mount namespace:
//   ROOTFS             <- a small "staging" tmpfs mounted over the image path
//   ROOTFS/root        <- the image (bind, or overlay with --write-tmpfs): the new root
//   ROOTFS/passwd ...  <- synthesized files, bound into the new root
//   ROOTFS/o0 ...      <- overlay layers: the mount points a read-only image
//                         directory lacks, laid over it (overlayfs, one mount)
//   ROOTFS/u0 ...      <- underlays: bound over image directories that lack a
//                         mount point, holding the original entries re-bound
//   ROOTFS/h           <- the injected host files' tree, bound at /run/rt-host:
//                         lib/NAME -> ../.d/N/FILE links, .d/N the mount
//                         points of the host directories (one bind each)
// ROOTFS/root is then moved over "/" and made the process's root (chroot);
// the old root and the staging tmpfs stay beneath it, out of reach.
// Targets inside the image are always opened relative to the new root with
// in-root resolution, so image symlinks cannot redirect a mount to the host.
#include "run/mount_apply.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "rt/error.hpp"
#include "run/overlay_dir.hpp"
#include "run/overlay_image.hpp"
#include "util/fs.hpp"
#include "util/inroot.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::run {
namespace {

using util::fd_path;
using util::UniqueFd;

// Mount flags of the mount holding `fd` that an unprivileged remount must
// keep: the kernel locks them (mount_namespaces(7), "restrictions on mount
// namespaces"). statvfs reports them as ST_* values, which differ from MS_*
// for the atime flags.
unsigned long locked_flags(int fd, const std::string& name) {
  struct statvfs sv;
  if (::fstatvfs(fd, &sv) != 0) throw SysError{errno, "statvfs", name};
  unsigned long f = 0;
  if (sv.f_flag & ST_RDONLY) f |= MS_RDONLY;
  if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
  return f;
}

void do_mount(const std::string& src, const std::string& dst, const char* type, unsigned long flags,
              const std::string& data, const char* what, const std::string& shown_src, const std::string& shown_dst) {
  if (::mount(src.empty() ? nullptr : src.c_str(), dst.c_str(), type, flags, data.empty() ? nullptr : data.c_str()) !=
      0)
    throw SysError{errno, std::string("mount(") + what + ")", shown_src, shown_dst};
}

// The mount points of the mount `fd` names and of every mount below it, as
// /proc/self/mountinfo lists them (its own first): paths from this
// process's root.
std::vector<std::string> mount_tree_points(int fd) {
  const std::string fdinfo = util::read_fd(util::open_fd("/proc/self/fdinfo/" + std::to_string(fd), O_RDONLY).get(),
                                           "/proc/self/fdinfo", 1 << 16);
  const size_t at = fdinfo.find("\nmnt_id:");
  if (at == std::string::npos) throw Error("/proc/self/fdinfo: no mnt_id");
  std::set<long> tree{std::strtol(fdinfo.c_str() + at + 9, nullptr, 10)};
  // ID PARENT MAJ:MIN ROOT POINT ..., POINT with octal escapes (\040: a space).
  struct Entry {
    long id, parent;
    std::string point;
  };
  std::vector<Entry> entries;
  const std::string info =
      util::read_fd(util::open_fd("/proc/self/mountinfo", O_RDONLY).get(), "/proc/self/mountinfo", 1 << 24);
  for (const auto& line : util::split(info, '\n')) {
    const auto f = util::split(line, ' ');
    if (f.size() < 5) continue;
    std::string point;
    for (size_t i = 0; i < f[4].size(); ++i) {
      const std::string& e = f[4];
      if (e[i] == '\\' && i + 3 < e.size() && std::isdigit(static_cast<unsigned char>(e[i + 1]))) {
        point += static_cast<char>(std::strtol(e.substr(i + 1, 3).c_str(), nullptr, 8));
        i += 3;
      } else {
        point += e[i];
      }
    }
    entries.push_back({std::strtol(f[0].c_str(), nullptr, 10), std::strtol(f[1].c_str(), nullptr, 10), point});
  }
  std::vector<std::string> points;
  for (const auto& e : entries)
    if (tree.count(e.id)) points.push_back(e.point);
  for (bool grew = true; grew;) {  // children are listed after their parents, usually: until nothing is added
    grew = false;
    for (const auto& e : entries)
      if (tree.count(e.parent) && tree.insert(e.id).second) {
        points.push_back(e.point);
        grew = true;
      }
  }
  return points;
}

// Makes the mount `fd` names, and every mount below it, read-only, nosuid
// and nodev; flags the kernel locked stay as they are. One mount_setattr
// (Linux 5.12); before it, a remount of each mount of the tree, its locked
// flags kept. Throws SysError naming `shown` (and `shown2`).
void make_read_only(int fd, const std::string& shown, const std::string& shown2 = {}) {
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (::mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) == 0) return;
  if (errno != ENOSYS) throw SysError{errno, "mount_setattr", shown, shown2};
  for (const auto& point : mount_tree_points(fd)) {
    UniqueFd f = util::open_fd(point, O_PATH);
    do_mount("", point, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(f.get(), point),
             "", "MS_REMOUNT", shown, shown2);
  }
}

// A tree handed over (run/holder.hpp) put on `at`: moved there, or bound
// from where it is mounted (before Linux 5.2), its flags as they come;
// not recursively: the staging tmpfs itself may be mounted on it.
void attach_tree(const HeldTree& tree, const std::string& at, const std::string& shown_src,
                 const std::string& shown_at) {
  if (tree.attached)
    do_mount(fd_path(tree.fd.get()), at, nullptr, MS_BIND, "", "MS_BIND", shown_src, shown_at);
  else if (::move_mount(tree.fd.get(), "", AT_FDCWD, at.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    throw SysError{errno, "move_mount", shown_src, shown_at};
}

void stage(const char* what) {
  if (util::log_enabled(util::Level::Trace)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.3f ms: %s", util::log_elapsed_ms(), what);
    util::log(util::Level::Trace, buf);
  }
}

// Makes an empty mount point `name` in directory `dir`: a directory or a
// file. Throws SysError naming `shown`.
void make_mount_point(int dir, const std::string& name, bool is_dir, const std::string& shown) {
  if (is_dir) {
    if (::mkdirat(dir, name.c_str(), 0755) != 0) throw SysError{errno, "mkdir", shown};
    return;
  }
  int f = ::openat(dir, name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (f < 0) throw SysError{errno, "create", shown};
  ::close(f);
}

// "`a`, `b`" for logs, from names or a map's keys.
std::string name_of(const std::string& n) { return n; }
template <class V>
std::string name_of(const std::pair<const std::string, V>& kv) {
  return kv.first;
}
template <class Names>
std::string listed(const Names& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "`" : ", `") + name_of(n) + "`";
  return out;
}

class Builder {
public:
  Builder(const MountPlan& plan, const HeldTree* image_tree, bool overlays_in_tree)
      : plan_(plan), held_(image_tree), overlays_in_tree_(overlays_in_tree) {}

  void run() {
    clone_sources_above_staging();
    setup_staging_and_root();
    stage("staging and root");
    overlay_missing_entries();
    stage("overlays");
    for (size_t i = 0; i < plan_.mounts.size(); ++i) {
      apply(plan_.mounts[i], i);
      stage(plan_.mounts[i].dst.c_str());
    }
    freeze_staging();
    stage("staging frozen");
    pivot();
    stage("pivot");
  }

private:
  const MountPlan& plan_;
  const HeldTree* const held_;  // the image from its holder, or none
  const bool overlays_in_tree_;
  UniqueFd image_;                     // the image directory itself (under the staging tmpfs)
  UniqueFd staging_;                   // root of the staging tmpfs
  UniqueFd root_;                      // root of the new root mount
  std::set<dev_t> writable_devs_;      // filesystems of ours where mount points may be made
  int underlays_ = 0;                  // directories of the staging tmpfs used as underlays
  int layers_ = 0;                     // directories of the staging tmpfs used as overlay layers
  std::map<size_t, UniqueFd> clones_;  // mount index -> detached copy of its source
  bool host_files_made_ = false;
  std::map<size_t, UniqueFd> host_dir_clones_;  // plan_.host_files.dirs index -> detached copy

  // A bind source that contains the staging directory (say $HOME, with the
  // image in ~/images) would show the staging tmpfs and the container's own
  // mounts inside the container. Copy such sources before the staging
  // exists (open_tree, Linux 5.2); where that is unavailable, bind as usual.
  void clone_sources_above_staging() {
    for (size_t i = 0; i < plan_.mounts.size(); ++i) {
      const Mount& m = plan_.mounts[i];
      if (m.kind != Mount::Kind::Bind || !util::path_within(plan_.staging, m.src)) continue;
      int fd = ::open_tree(AT_FDCWD, m.src.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
      if (fd >= 0)
        clones_[i] = UniqueFd(fd);
      else if (errno != ENOSYS && errno != ENOENT && errno != EACCES)
        throw SysError{errno, "open_tree", m.src};
    }
    for (size_t i = 0; i < plan_.host_files.dirs.size(); ++i) {
      const std::string& d = plan_.host_files.dirs[i];
      if (!util::path_within(plan_.staging, d)) continue;
      int fd = ::open_tree(AT_FDCWD, d.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
      if (fd >= 0)
        host_dir_clones_[i] = UniqueFd(fd);
      else if (errno != ENOSYS && errno != ENOENT && errno != EACCES)
        throw SysError{errno, "open_tree", d};
    }
  }

  // A path inside the image as the user knows it: the image, then the path.
  std::string shown(const std::string& dst) const { return plan_.rootfs + (dst == "/" ? "" : dst); }
  static std::string child(const std::string& dir, const std::string& name) {
    return dir == "/" ? "/" + name : dir + "/" + name;
  }
  std::string stage_path(const std::string& name) const { return fd_path(staging_.get()) + "/" + name; }

  void setup_staging_and_root() {
    const std::string& rootfs = plan_.rootfs;
    const std::string& staging = plan_.staging;
    if (!held_) image_ = util::open_fd(rootfs, O_PATH | O_DIRECTORY);

    // Small, unless it holds --write-tmpfs's changes: then as a tmpfs is by
    // default (half the memory, used only as written), room for a package
    // manager's work.
    const char* size = plan_.root_mode == RootMode::Overlay ? "mode=0700" : "mode=0700,size=16m";
    do_mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV, size, "tmpfs", "tmpfs", staging);
    staging_ = util::open_fd(staging, O_PATH | O_DIRECTORY);
    if (::mkdirat(staging_.get(), "root", 0755) != 0) throw SysError{errno, "mkdir", staging + "/root"};
    for (const auto& f : plan_.staged) {
      UniqueFd fd = util::open_fd_at(staging_.get(), f.name, O_WRONLY | O_CREAT | O_EXCL, 0644);
      util::write_all(fd.get(), f.content, "synthesized " + f.name);
    }
    const std::string root_path = stage_path("root");
    // The image under its overlays, mounted nosuid,nodev by their holder
    // (run/overlay_server), or a SquashFS image read-only, mounted ro,nosuid,
    // nodev by its server (squash::Image): the root as it comes.
    const bool tree_is_root = held_ && (overlays_in_tree_ || plan_.root_mode == RootMode::ReadOnly);
    if (tree_is_root) {
      attach_tree(*held_, stage_path("root"), rootfs, staging + "/root");
    } else if (held_) {
      if (::mkdirat(staging_.get(), "image", 0755) != 0) throw SysError{errno, "mkdir", staging + "/image"};
      attach_tree(*held_, stage_path("image"), rootfs, staging + "/image");
      image_ = util::open_fd(stage_path("image"), O_PATH | O_DIRECTORY);
    }
    if (plan_.root_mode == RootMode::Overlay && !tree_is_root) {
      mount_overlay_root(root_path);
    } else if (!tree_is_root) {
      // A tree from the image's server was mounted and copied in the user
      // namespace that owns this mount namespace, so none of its flags is
      // locked (locks come with a copy from a more privileged namespace), and
      // statfs would be a round trip to the server.
      const unsigned long image_locked = held_ ? 0 : locked_flags(image_.get(), rootfs);
      do_mount(fd_path(image_.get()), root_path, nullptr, MS_BIND, "", "MS_BIND", rootfs, rootfs);
      unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | image_locked;
      if (plan_.root_mode == RootMode::ReadOnly) flags |= MS_RDONLY;
      do_mount("", root_path, nullptr, flags, "", "MS_REMOUNT", rootfs, rootfs);
    }
    root_ = util::open_fd(root_path, O_PATH | O_DIRECTORY);
    writable_devs_.insert(dev_of(staging_.get(), rootfs));
    if (plan_.root_mode == RootMode::Overlay) writable_devs_.insert(dev_of(root_.get(), rootfs));
  }

  // The root under --write-tmpfs or --overlay. Writes go to the writable
  // overlay's upper/ (kept), else to the staging tmpfs (discarded);
  // read-only overlays stack on the image, the last given on top. The
  // kernel's overlayfs, unless a layer is an image or the kernel refuses
  // the layers (an older kernel, an upper layer on NFS): then
  // fuse-overlayfs's tree (run/overlay_image), where it is installed.
  void mount_overlay_root(const std::string& root_path) {
    const std::string& rootfs = plan_.rootfs;
    const OverlayLayer* kept = nullptr;
    bool images = false;
    for (const auto& l : plan_.overlays) {
      if (l.writable) kept = &l;
      images |= l.fuse();
    }
    if (!kept)
      for (const char* d : {"upper", "work"})
        if (::mkdirat(staging_.get(), d, 0755) != 0) throw SysError{errno, "mkdir", rootfs + "/" + d};
    if (!images) {
      std::string upper = stage_path("upper"), work = stage_path("work"), lower = fd_path(image_.get());
      for (const auto& l : plan_.overlays)
        if (&l == kept) {
          upper = l.path + "/upper";
          work = l.path + "/work";
        } else {
          lower = overlay_read_dir(l.path) + ":" + lower;
        }
      // userxattr (Linux 5.11) is what makes an unprivileged overlay mount possible.
      const std::string opts = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",userxattr";
      if (::mount("overlay", root_path.c_str(), "overlay", MS_NOSUID | MS_NODEV, opts.c_str()) == 0) return;
      const int e = errno;
      if (plan_.fuse_overlayfs.empty() && kept)
        throw Error(SysError(e, "mount(overlay)", kept->path).what(),
                    "a writable overlay needs unprivileged overlayfs (Linux 5.11 or later) and a directory on a "
                    "local file system (NFS, Lustre and GPFS cannot hold an overlay's upper layer)");
      if (plan_.fuse_overlayfs.empty())
        throw Error(SysError(e, "mount(overlay)", rootfs).what(),
                    "--write-tmpfs and --overlay need unprivileged overlayfs (Linux 5.11 or later)");
      util::debug(std::string("overlayfs refused (") + std::strerror(e) + "): fuse-overlayfs instead");
    }
    const HeldTree tree = fuse_root({image_.get(), fd_path(staging_.get()), plan_.overlays, rootfs, plan_.fuse2fs,
                                     plan_.fuse_overlayfs, plan_.squashfuse, plan_.overlays_read_only});
    attach_tree(tree, root_path, "fuse-overlayfs", rootfs);
  }

  static bool same_file(int a, int b) {
    struct stat sa, sb;
    return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }

  static dev_t dev_of(int fd, const std::string& name) {
    struct stat st;
    if (::fstat(fd, &st) != 0) throw SysError{errno, "stat", name};
    return st.st_dev;
  }

  UniqueFd resolve(const std::string& dst, int* err) {
    auto r = util::open_in_root(root_.get(), dst, O_PATH);
    *err = r.err;
    return std::move(r.fd);
  }

  // Makes dst, which does not exist inside the new root, without touching
  // the image, and returns an O_PATH fd of it: a directory, an empty file,
  // or a symbolic link to `*link`.
  UniqueFd make_target(const std::string& dst, bool want_dir, const std::string* link = nullptr) {
    // Find the deepest existing directory above dst.
    auto comps = util::split(dst.substr(1), '/');
    size_t keep = comps.size() - 1;
    UniqueFd anc;
    std::string anc_path;
    for (;; --keep) {
      anc_path.clear();
      for (size_t i = 0; i < keep; ++i) anc_path += "/" + comps[i];
      if (anc_path.empty()) anc_path = "/";
      auto r = util::open_in_root(root_.get(), anc_path, O_PATH | O_DIRECTORY);
      if (r.fd) {
        anc = std::move(r.fd);
        break;
      }
      if (r.err != ENOENT)
        throw SysError(r.err, "open", shown(anc_path),
                       "");  // e.g. ENOTDIR: a file where the path needs a directory
      if (keep == 0) throw SysError(ENOENT, "open", shown("/"));
    }
    if (same_file(anc.get(), root_.get())) anc_path = "/";  // reached through a link like `up -> ..`

    // On our own tmpfs (or the --write-tmpfs overlay) the missing part can be
    // made in place, unless the directory is not ours to write (an image
    // directory owned by root in an overlay): then underlay it too.
    bool in_place = writable_devs_.count(dev_of(anc.get(), shown(anc_path))) != 0;
    if (in_place) {
      ::unlinkat(anc.get(), comps[keep].c_str(), 0);  // a dangling symlink in the way, say
      if (::mkdirat(anc.get(), comps[keep].c_str(), 0755) == 0)
        ::unlinkat(anc.get(), comps[keep].c_str(), AT_REMOVEDIR);
      else if (errno != EEXIST)
        in_place = false;
    }
    if (!in_place) anc = underlay(anc, anc_path, {comps[keep]});

    // Make the missing components on our own tmpfs.
    UniqueFd dir = std::move(anc);
    for (size_t i = keep; i < comps.size(); ++i) {
      const std::string& name = comps[i];
      bool last = i + 1 == comps.size();
      if (!last || want_dir) {
        if (::mkdirat(dir.get(), name.c_str(), 0755) != 0 && errno != EEXIST)
          throw SysError{errno, "mkdir", shown(dst)};
        dir = util::open_fd_at(dir.get(), name, O_PATH | O_DIRECTORY | O_NOFOLLOW);
      } else if (link) {
        if (::symlinkat(link->c_str(), dir.get(), name.c_str()) != 0) throw SysError{errno, "symlink", shown(dst)};
        dir = util::open_fd_at(dir.get(), name, O_PATH | O_NOFOLLOW);
      } else {
        make_mount_point(dir.get(), name, false, shown(dst));
        dir = util::open_fd_at(dir.get(), name, O_PATH | O_NOFOLLOW);
      }
    }
    return dir;
  }

  // An image directory that lacks mount points of the plan would get an
  // underlay, one bind per entry (/etc of an image without /etc/hosts:
  // some 70 mounts to make, and to take down at exit). Where the kernel
  // allows unprivileged overlayfs (Linux 5.11), a read-only directory is
  // instead given its missing entries at once, before any mount: an
  // overlay of a layer holding them on the image's directory, one mount.
  // Where the overlay cannot be mounted (an older kernel, a filesystem
  // that cannot be a lower layer), the underlay is made as before.
  void overlay_missing_entries() {
    if (plan_.root_mode != RootMode::ReadOnly) return;
    std::map<std::string, std::map<std::string, bool>> missing;  // directory -> name -> is a directory
    bool host_files_seen = false;
    for (const auto& m : plan_.mounts) {
      if (m.kind != Mount::Kind::Bind && m.kind != Mount::Kind::Staged && m.kind != Mount::Kind::Tmpfs &&
          m.kind != Mount::Kind::HostFile)
        continue;
      if (m.kind == Mount::Kind::HostFile && std::exchange(host_files_seen, true)) continue;  // one tree for all
      const std::string& dst = target_of(m);
      size_t slash = dst.rfind('/');
      if (m.if_target || slash == 0 || slash == std::string::npos) continue;  // "/": its underlay as before
      std::string dir = dst.substr(0, slash), name = dst.substr(slash + 1);
      if (name.empty() || name == "." || name == "..") continue;
      // A directory that another mount of the plan covers is not the image's.
      bool covered = false;
      for (const auto& o : plan_.mounts)
        covered |= &o != &m && o.kind != Mount::Kind::Hide && util::path_within(dir, target_of(o));
      int err = 0;
      if (covered || resolve(dst, &err) || err != ENOENT) continue;
      bool is_dir = m.kind == Mount::Kind::Tmpfs || m.kind == Mount::Kind::HostFile;
      if (m.kind == Mount::Kind::Bind) {
        struct stat st;
        if (::stat(m.src.c_str(), &st) != 0) continue;  // apply() decides
        is_dir = S_ISDIR(st.st_mode);
      }
      missing[dir][name] = is_dir;
    }
    for (const auto& [dir, names] : missing) overlay_dir(dir, names);
  }

  void overlay_dir(const std::string& dir, const std::map<std::string, bool>& names) {
    auto r = util::open_in_root(root_.get(), dir, O_PATH | O_DIRECTORY);
    if (!r.fd || same_file(r.fd.get(), root_.get())) return;  // apply() explains; the root: its underlay
    struct stat st;
    if (::fstat(r.fd.get(), &st) != 0) return;
    if (copy_hollow_dir(r.fd, dir, st, names)) return;
    const std::string layer = "o" + std::to_string(layers_++);
    if (::mkdirat(staging_.get(), layer.c_str(), 0700) != 0) throw SysError{errno, "mkdir", "staging " + layer};
    UniqueFd l = util::open_fd_at(staging_.get(), layer, O_PATH | O_DIRECTORY);
    for (const auto& [name, is_dir] : names) make_mount_point(l.get(), name, is_dir, "staging " + layer + "/" + name);
    if (::fchmodat(staging_.get(), layer.c_str(), st.st_mode & 07777, 0) != 0)
      throw SysError{errno, "chmod", "staging " + layer};
    const std::string target = fd_path(r.fd.get());
    const std::string opts = "lowerdir=" + stage_path(layer) + ":" + target + ",userxattr";
    const unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(r.fd.get(), shown(dir));
    if (::mount("overlay", target.c_str(), "overlay", flags, opts.c_str()) != 0) {
      util::debug("no overlay on `" + dir + "` (" + std::strerror(errno) + "): an underlay instead");
      return;
    }
    util::debug("overlay `" + dir + "` with " + listed(names));
  }

  // An image directory that holds nothing but empty directories and links
  // (/home, /run with Debian's /run/lock, /mnt) is copied instead: its
  // entries and the missing ones made on the staging tmpfs, bound over it,
  // one bind (cheaper than an overlay to mount and to take down). The
  // copies are the user's, with the original's modes. False where the
  // directory holds anything else (or is unreadable): an overlay then.
  bool copy_hollow_dir(const UniqueFd& old, const std::string& path, const struct stat& st,
                       const std::map<std::string, bool>& names) {
    struct Entry {
      std::string name;
      mode_t mode = 0;  // of a directory
      std::string link;
    };
    std::vector<Entry> entries;
    if (!list_hollow(old.get(), entries, [&](int dir, const std::string& name, Entry& e) {
          struct stat est;
          if (::fstatat(dir, name.c_str(), &est, AT_SYMLINK_NOFOLLOW) != 0) return false;
          if (S_ISLNK(est.st_mode)) {
            std::string target(4096, '\0');
            const ssize_t len = ::readlinkat(dir, name.c_str(), target.data(), target.size());
            if (len <= 0 || static_cast<size_t>(len) == target.size()) return false;
            target.resize(static_cast<size_t>(len));
            e.link = std::move(target);
            return true;
          }
          if (!S_ISDIR(est.st_mode)) return false;
          e.mode = est.st_mode & 07777;
          UniqueFd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          std::vector<Entry> none;
          return sub && list_hollow(sub.get(), none, [](int, const std::string&, Entry&) { return false; });
        }))
      return false;
    const std::string under = "u" + std::to_string(underlays_++);
    if (::mkdirat(staging_.get(), under.c_str(), 0700) != 0) throw SysError{errno, "mkdir", "staging " + under};
    UniqueFd u = util::open_fd_at(staging_.get(), under, O_PATH | O_DIRECTORY);
    for (const auto& e : entries) {
      const std::string what = "staging " + under + "/" + e.name;
      if (!e.link.empty()) {
        if (::symlinkat(e.link.c_str(), u.get(), e.name.c_str()) != 0) throw SysError{errno, "symlink", what};
      } else if (::mkdirat(u.get(), e.name.c_str(), 0700) != 0 || ::fchmodat(u.get(), e.name.c_str(), e.mode, 0) != 0) {
        throw SysError{errno, "mkdir", what};
      }
    }
    for (const auto& [name, is_dir] : names) make_mount_point(u.get(), name, is_dir, "staging " + under + "/" + name);
    if (::fchmodat(staging_.get(), under.c_str(), st.st_mode & 07777, 0) != 0)
      throw SysError{errno, "chmod", "staging " + under};
    do_mount(stage_path(under), fd_path(old.get()), nullptr, MS_BIND, "", "MS_BIND", "copy", shown(path));
    util::debug("`" + path + "` (empty directories and links only) copied with " + listed(names));
    return true;
  }

  // Reads directory `dir` into `out`, each entry given to `take` (which
  // fills it in and returns false to give up); false when it does.
  template <class Entry, class Take>
  static bool list_hollow(int dir, std::vector<Entry>& out, Take take) {
    UniqueFd list(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!list) return false;
    DIR* d = ::fdopendir(list.get());
    if (!d) return false;
    list.release();
    bool ok = true;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      Entry entry;
      entry.name = name;
      if (!(ok = take(::dirfd(d), name, entry))) break;
      out.push_back(std::move(entry));
    }
    ::closedir(d);
    return ok;
  }

  // Replaces directory `old` (at in-root path `path`) by a tmpfs holding the
  // same entries, each bound from the original, except those in `skip`
  // (which the caller is about to create, or hides). The image is not
  // modified.
  UniqueFd underlay(const UniqueFd& old, const std::string& path, const std::set<std::string>& skip) {
    util::debug("underlay `" + path + "` without " + listed(skip));
    struct stat st;
    if (::fstat(old.get(), &st) != 0) throw SysError{errno, "stat", shown(path)};
    int list_fd = ::open(fd_path(old.get()).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (list_fd < 0) throw SysError{errno, "open", shown(path)};
    DIR* dir = ::fdopendir(list_fd);
    if (!dir) {
      ::close(list_fd);
      throw SysError{errno, "fdopendir", shown(path)};
    }
    struct Entry {
      std::string name;
      unsigned char type;
    };
    std::vector<Entry> entries;
    while (dirent* d = ::readdir(dir)) {
      std::string name = d->d_name;
      if (name == "." || name == ".." || skip.count(name)) continue;
      unsigned char type = d->d_type;
      if (type == DT_UNKNOWN) {
        struct stat est;
        if (::fstatat(dirfd(dir), d->d_name, &est, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(est.st_mode) ? DT_DIR : S_ISLNK(est.st_mode) ? DT_LNK : DT_REG;
      }
      entries.push_back({std::move(name), type});
    }
    ::closedir(dir);

    // The underlay is a directory of the staging tmpfs, bound over the
    // original: a bind is cheaper than a new tmpfs, and freezing the staging
    // tmpfs at the end makes every underlay read-only at once.
    const std::string under = "u" + std::to_string(underlays_++);
    if (::mkdirat(staging_.get(), under.c_str(), 0700) != 0) throw SysError{errno, "mkdir", "staging " + under};
    if (::fchmodat(staging_.get(), under.c_str(), st.st_mode & 07777, 0) != 0)
      throw SysError{errno, "chmod", "staging " + under};
    do_mount(stage_path(under), fd_path(old.get()), nullptr, MS_BIND, "", "MS_BIND", "underlay", shown(path));
    if (path == "/") {
      // Resolution starts at root_ and never climbs onto a mount stacked on
      // the starting point itself: the new root is now the tmpfs.
      root_ = util::open_fd(stage_path("root"), O_PATH | O_DIRECTORY);
    }
    auto fresh = util::open_in_root(root_.get(), path, O_PATH | O_DIRECTORY);
    if (!fresh.fd) throw SysError(fresh.err, "open", shown(path));
    const int nd = fresh.fd.get();
    const std::string old_base = fd_path(old.get()) + "/";
    const std::string new_base = fd_path(nd) + "/";
    for (const auto& e : entries) {
      const char* n = e.name.c_str();
      if (e.type == DT_LNK) {
        std::string target(4096, '\0');
        ssize_t len = ::readlinkat(old.get(), n, target.data(), target.size());
        if (len < 0) throw SysError{errno, "readlink", shown(child(path, e.name))};
        target.resize(static_cast<size_t>(len));
        if (::symlinkat(target.c_str(), nd, n) != 0) throw SysError{errno, "symlink", shown(child(path, e.name))};
        continue;
      }
      make_mount_point(nd, e.name, e.type == DT_DIR, shown(child(path, e.name)));
      do_mount(old_base + e.name, new_base + e.name, nullptr, MS_BIND | MS_REC, "", "MS_BIND",
               shown(child(path, e.name)), shown(child(path, e.name)));
    }
    return std::move(fresh.fd);
  }

  // Where a mount of the plan lands: HostFile mounts all on their tree's root.
  static const std::string& target_of(const Mount& m) {
    static const std::string host_files_root = kHostFilesRoot;
    return m.kind == Mount::Kind::HostFile ? host_files_root : m.dst;
  }

  void apply(const Mount& m, size_t index) {
    if (m.kind == Mount::Kind::HostFile) return host_files();
    if (m.kind == Mount::Kind::Hide) return hide(m);
    if (m.kind == Mount::Kind::Symlink) return symlink(m);
    const std::string src = m.kind == Mount::Kind::Staged ? stage_path(m.src) : m.src;
    const std::string shown_src = m.kind == Mount::Kind::Staged ? "synthesized " + m.src : m.src;
    int err = 0;
    UniqueFd t = resolve(m.dst, &err);
    if (!t) {
      if (err != ENOENT) throw SysError(err, "open", shown(m.dst));
      if (m.if_target) {
        util::debug("skip `" + m.dst + "`: not in the image");
        return;
      }
      bool want_dir = m.kind == Mount::Kind::Tmpfs;
      if (m.kind == Mount::Kind::Bind) {
        struct stat st;
        if (::stat(src.c_str(), &st) != 0) {
          if (m.optional && source_missing(errno)) return skip_missing(m);
          throw SysError{errno, "stat", src};
        }
        want_dir = S_ISDIR(st.st_mode);
      }
      t = make_target(m.dst, want_dir);
    }
    const std::string tp = fd_path(t.get());
    if (m.kind == Mount::Kind::Tmpfs) {
      do_mount("tmpfs", tp, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", "tmpfs", "tmpfs", shown(m.dst));
      return;
    }
    if (auto c = clones_.find(index); c != clones_.end()) {
      if (::move_mount(c->second.get(), "", t.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
        throw SysError{errno, "move_mount", shown_src, shown(m.dst)};
    } else if (::mount(src.c_str(), tp.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      // Sources are not stat'ed beforehand: one syscall fewer per mount on
      // the per-rank path; a missing optional source shows up as ENOENT here.
      int e = errno;
      if (m.optional && source_missing(e)) return skip_missing(m);
      throw SysError(e, "mount(MS_BIND)", shown_src, shown(m.dst));
    } else if (m.kind == Mount::Kind::Bind && util::path_within(plan_.staging, m.src)) {
      uncover_staging(m.dst, m.src);
    }
    if (m.readonly && m.kind == Mount::Kind::Bind) {
      // The new mount's root, resolved again from the top; read-only with
      // what the recursive bind brought along (a mount below the source
      // stays no more writable than the rest).
      UniqueFd top = resolve(m.dst, &err);
      if (!top) throw SysError(err, "open", shown(m.dst));
      make_read_only(top.get(), shown_src, shown(m.dst));
    }
  }

  // A bind of a source that holds the staging directory, where it could
  // not be copied beforehand (open_tree, Linux 5.2), brought along the
  // staging tmpfs (and a holder's tree under it, before 5.2): detached from
  // the copy, so that it shows the directory as the host has it. Each
  // detach waits for an RCU grace period; only older kernels pay them.
  void uncover_staging(const std::string& dst, const std::string& src) {
    int err = 0;
    UniqueFd top = resolve(dst, &err);  // the new mount's root, not what it covers
    if (!top) throw SysError(err, "open", shown(dst));
    const std::string inside = fd_path(top.get()) + (src == "/" ? plan_.staging : plan_.staging.substr(src.size()));
    if (::umount2(inside.c_str(), MNT_DETACH) != 0) throw SysError{errno, "umount2", "staging copy", inside};
    struct stat tree, there;
    if (held_ && held_->attached && ::fstat(held_->fd.get(), &tree) == 0 && ::stat(inside.c_str(), &there) == 0 &&
        there.st_dev == tree.st_dev && ::umount2(inside.c_str(), MNT_DETACH) != 0)
      throw SysError{errno, "umount2", "image copy", inside};
  }

  // Hide: the directory's copy without the named entries. Optional ones
  // (a /proc directory, where the kernel may refuse mounts) only warn.
  void hide(const Mount& m) {
    int err = 0;
    UniqueFd dir = resolve(m.dst, &err);
    if (!dir) {
      if (m.if_target && err == ENOENT) return util::debug("skip hiding in `" + m.dst + "`: not in the container");
      throw SysError(err, "open", shown(m.dst));
    }
    auto names = util::split(m.src, '/');
    try {
      underlay(dir, m.dst, std::set<std::string>(names.begin(), names.end()));
    } catch (const SysError& e) {
      if (!m.optional) throw;
      util::warn(std::string("could not hide `") + m.src + "` in `" + m.dst + "`: " + e.what());
    }
  }

  // A link the image lacks (an image's own file or link wins).
  void symlink(const Mount& m) {
    auto r = util::open_in_root(root_.get(), m.dst, O_PATH, /*follow_final=*/false);
    if (r.fd) return util::debug("skip link `" + m.dst + "`: in the image");
    if (r.err != ENOENT) throw SysError(r.err, "open", shown(m.dst));
    make_target(m.dst, false, &m.src);
  }

  // The injected host files, where the first of them stands in the plan:
  // the tree (links and mount points) made on the staging tmpfs, bound at
  // kHostFilesRoot, each host directory bound once on its mount point
  // there, then all of it made read-only, nosuid, nodev at once. A start
  // pays 1 + (directories) mounts and one mount_setattr, whatever the
  // number of files (the per-file bind and remount were two mounts and
  // some six lookups each); the rest are calls on our own tmpfs.
  void host_files() {
    if (std::exchange(host_files_made_, true)) return;
    const HostFilesTree& t = plan_.host_files;
    const std::string root = kHostFilesRoot;
    const std::string tree = "h";
    // Kept made in the store (kept_host_files_tree), else made here.
    std::string source = plan_.host_files_kept;
    if (source.empty()) {
      auto mkdir = [&](int dir, const std::string& name, const std::string& rel) {
        if (::mkdirat(dir, name.c_str(), 0755) != 0) throw SysError{errno, "mkdir", "staging " + tree + "/" + rel};
      };
      mkdir(staging_.get(), tree, "");
      UniqueFd h = util::open_fd_at(staging_.get(), tree, O_PATH | O_DIRECTORY | O_NOFOLLOW);
      mkdir(h.get(), ".d", ".d");
      for (size_t i = 0; i < t.dirs.size(); ++i) mkdir(h.get(), ".d/" + std::to_string(i), ".d/" + std::to_string(i));
      for (const auto& sub : t.subdirs) mkdir(h.get(), sub, sub);
      for (const auto& l : t.links)
        if (::symlinkat(l.target.c_str(), h.get(), l.path.c_str()) != 0)
          throw SysError{errno, "symlink", shown(root + "/" + l.path)};
      source = stage_path(tree);
    } else {
      util::debug("host files: the tree kept in `" + source + "`");
    }

    int err = 0;
    UniqueFd at = resolve(root, &err);
    if (!at) {
      if (err != ENOENT) throw SysError(err, "open", shown(root));
      at = make_target(root, true);
    }
    do_mount(source, fd_path(at.get()), nullptr, MS_BIND, "", "MS_BIND", "host files", shown(root));
    // The mount points are named through the new mount's root: resolve
    // again from the top (our own tmpfs below it: no link to follow).
    UniqueFd top = resolve(root, &err);
    if (!top) throw SysError(err, "open", shown(root));
    const std::string top_path = fd_path(top.get());
    for (size_t i = 0; i < t.dirs.size(); ++i) {
      const std::string point = ".d/" + std::to_string(i);
      if (auto c = host_dir_clones_.find(i); c != host_dir_clones_.end()) {
        if (::move_mount(c->second.get(), "", top.get(), point.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
          throw SysError{errno, "move_mount", t.dirs[i], shown(root + "/" + point)};
      } else if (::mount(t.dirs[i].c_str(), (top_path + "/" + point).c_str(), nullptr, MS_BIND | MS_REC, nullptr) !=
                 0) {
        int e = errno;
        host_dir_failed(e, i);
      }
    }
    // Flags the kernel locked (nosuid of the host's /usr, say) stay.
    make_read_only(top.get(), shown(root));
  }

  // A host directory that cannot be bound: the error names it, and the
  // injected files it holds.
  [[noreturn]] void host_dir_failed(int e, size_t dir) const {
    std::vector<std::string> files;
    for (const auto& l : plan_.host_files.links)
      if (l.dir == dir) files.push_back(l.host);
    const Error err = SysError(e, "mount(MS_BIND)", plan_.host_files.dirs[dir],
                               shown(std::string(kHostFilesRoot) + "/.d/" + std::to_string(dir)));
    std::string hint = "the host directory of the injected " + listed(files);
    if (!err.hint().empty()) hint += "; " + err.hint();
    throw Error(err.what(), hint);
  }

  static bool source_missing(int e) { return e == ENOENT || e == ENOTDIR || e == EACCES; }
  static void skip_missing(const Mount& m) { util::debug("skip `" + m.src + "`: not on this host"); }

  // Synthesized files and underlays are read-only inside: freeze the
  // staging tmpfs (with --write-tmpfs it holds the overlay's upper layer).
  void freeze_staging() {
    if (plan_.root_mode == RootMode::Overlay) return;
    do_mount("", fd_path(staging_.get()), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "",
             "MS_REMOUNT", "tmpfs", plan_.staging);
  }

  void pivot() {
    if (::fchdir(root_.get()) != 0) throw SysError{errno, "chdir", shown("/")};
    // The new root is moved over the old one and entered with chroot. The
    // old root stays in this namespace beneath it, out of reach: every path
    // into it passes its root, which the new root covers (".." from the new
    // root stays there, a process joining the namespace lands on the
    // topmost mount of its root), and it is out of /proc/self/mountinfo.
    // pivot_root(".", ".") and detaching the old root, where the move is
    // refused, costs a grace period of the kernel's RCU at every start
    // (namespace_unlock): 0.1-0.3 ms here.
    if (::mount(".", "/", nullptr, MS_MOVE, nullptr) == 0) {
      if (::chroot(".") != 0) throw SysError{errno, "chroot", shown("/")};
    } else {
      // pivot_root(".", ".") stacks the old root on the new one; detaching
      // it leaves the new root alone (pivot_root(2), NOTES).
      if (::syscall(SYS_pivot_root, ".", ".") != 0) throw SysError{errno, "pivot_root", shown("/")};
      if (::umount2(".", MNT_DETACH) != 0) throw SysError{errno, "umount2", "old root"};
    }
    if (::chdir("/") != 0) throw SysError{errno, "chdir", "/"};
    image_.reset();
    staging_.reset();
    root_.reset();
  }
};

}  // namespace

void build_tree(const MountPlan& plan, const HeldTree* image_tree, bool overlays_in_tree) {
  Builder(plan, image_tree, overlays_in_tree).run();
}

void enter_cwd(const MountPlan& plan) {
  // Resolved inside the container's root, never through a magic link
  // (/proc/self/fd/N, /proc/PID/cwd: the runc CVE-2024-21626 pattern), so
  // neither an image's WorkingDir nor --cd can start the program on the host.
  // From "/" as the working directory: no descriptor of rt's is open
  // while the path is resolved (a root descriptor would be one).
  if (::chdir("/") != 0) throw SysError{errno, "chdir", "/"};
  auto dir = util::open_in_root(AT_FDCWD, plan.cwd, O_PATH | O_DIRECTORY);
  int err = dir.err;
  if (!err && ::fchdir(dir.fd.get()) != 0) err = errno;
  if (!err) {
    // The kernel reports a directory the root cannot reach as unreachable
    // (getcwd(3): ENOENT); never start there.
    char buf[PATH_MAX];
    if (::getcwd(buf, sizeof buf) || errno != ENOENT) return;
    err = EXDEV;
  }
  if (::chdir("/") != 0) throw SysError{errno, "chdir", "/"};
  if (err == EXDEV) throw Error("working directory `" + plan.cwd + "` lies outside the container; refused");
  if (plan.cwd_explicit) {
    if (err == ELOOP) throw Error("working directory `" + plan.cwd + "` goes through a /proc magic link; refused");
    throw SysError{err, "chdir", plan.cwd};
  }
  util::warn("cannot enter `" + plan.cwd + "` in the container; starting in `/`");
}

}  // namespace rt::run
