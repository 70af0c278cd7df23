// rt overlay create: ext3 overlay images, and overlay partitions of SIF
// files (host).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "image/child.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "run/overlay_image.hpp"
#include "squash/sif.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt {

namespace {

// A new ext3 file system at `file`, filled from `seed` (upper/, work/ and
// the directories asked for), as Apptainer makes an overlay image. Made
// here, never through a link (O_EXCL, O_NOFOLLOW): a name another user
// placed first is refused; nothing is left of a failed one.
void make_ext3(const std::string& file, const OverlayCreateOptions& o, const std::string& seed) {
  const std::string mkfs = run::find_system_program("mkfs.ext3");
  if (mkfs.empty())
    throw Error("rt overlay create needs mkfs.ext3, which is not installed", "install Debian's e2fsprogs package");
  util::UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) {
    if (errno == EEXIST) throw Error("rt overlay create: `" + file + "` exists", "choose another name, or remove it");
    throw SysError{errno, "create", file};
  }
  bool done = false;
  struct Cleanup {
    const std::string& file;
    bool& done;
    ~Cleanup() {
      if (!done) ::unlink(file.c_str());
    }
  } cleanup{file, done};
  const off_t bytes = static_cast<off_t>(o.size_mib) << 20;
  if (o.sparse) {
    if (::ftruncate(fd.get(), bytes) != 0) throw SysError{errno, "truncate", file};
  } else if (int e = ::posix_fallocate(fd.get(), 0, bytes); e != 0) {
    throw SysError{e, "allocate " + std::to_string(o.size_mib) + " MiB", file};
  }
  fd.reset();
  // Apptainer's layout: upper/ and work/ at the root, owned by the user,
  // who alone writes the file system (fuse2fs serves it as theirs).
  const std::string owner = std::to_string(::getuid()) + ":" + std::to_string(::getgid());
  util::UniqueFd err = util::memory_file("mkfs.ext3");
  const int status = image::run_program({mkfs, "-q", "-F", "-E", "root_owner=" + owner, "-d", seed, file},
                                        {.in = -1, .out = err.get(), .err = err.get()});
  if (status != 0)
    throw Error("rt overlay create: mkfs.ext3 failed on `" + file + "` (exit status " + std::to_string(status) +
                "): " + util::memory_file_text(err.get()));
  done = true;
}

// Adds the file system `img` to the SIF file `path` (open at `fd`) as its
// ext3 overlay partition, where Apptainer puts one (apptainer overlay
// create FILE.sif): in no object group (it changes, so no signature can
// cover it), aligned as partitions are. The file must be the user's and
// hold no overlay yet.
void add_to_sif(int fd, const std::string& path, const std::string& img) {
  struct stat st;
  if (::fstat(fd, &st) != 0) throw SysError{errno, "stat", path};
  if (!S_ISREG(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 022))
    throw Error("rt overlay create: `" + path + "` is not a SIF file of yours that only you can write");
  squash::SifFile sif = squash::read_sif(fd, path);
  const squash::SifObject root = squash::sif_root_partition(sif, path);
  if (const auto* ov = squash::sif_overlay_partition(sif))
    throw Error("rt overlay create: `" + path + "` has an overlay partition already (object " + std::to_string(ov->id) +
                ")");
  util::UniqueFd in = util::open_fd(img, O_RDONLY | O_CLOEXEC);
  struct stat ist;
  if (::fstat(in.get(), &ist) != 0) throw SysError{errno, "stat", img};
  const auto size = static_cast<uint64_t>(ist.st_size);
  std::string extra(11, '\0');  // file system, partition type, architecture
  for (int i = 0; i < 4; ++i) {
    extra[i] = static_cast<char>((static_cast<uint32_t>(squash::SifFs::Ext3) >> (8 * i)) & 0xff);
    extra[4 + i] = static_cast<char>((static_cast<uint32_t>(squash::SifPart::Overlay) >> (8 * i)) & 0xff);
  }
  extra.replace(8, 3, root.descriptor.substr(squash::kSifExtraAt + 8, 3));
  squash::sif_append(fd, sif, path, squash::SifData::Partition, 0xf0000000u, 0, size, 4096, ::time(nullptr), extra,
                     [&](uint64_t at) {
                       loff_t from = 0, to = static_cast<loff_t>(at);
                       for (uint64_t left = size; left > 0;) {
                         const ssize_t n = ::copy_file_range(in.get(), &from, fd, &to, left, 0);
                         if (n < 0 && errno == EINTR) continue;
                         if (n <= 0) throw SysError{n < 0 ? errno : EIO, "copy", img, path};
                         left -= static_cast<uint64_t>(n);
                       }
                     });
}

}  // namespace

void overlay_create(const std::string& file, const OverlayCreateOptions& o) {
  util::log_init(o.verbosity);
  if (o.size_mib < 1) throw Error("rt overlay create: --size must be at least 1 (MiB)");
  // Every DIR below upper/, as the container will see it.
  std::vector<std::string> dirs;
  for (const auto& d : o.dirs) {
    const std::string n = util::normalize_path(d, "/");
    if (n == "/" || d.find("..") != std::string::npos)
      throw Error("rt overlay create: --create-dir `" + d + "` is not a directory below /");
    dirs.push_back(n);
  }
  // The tree to fill it from, beside it (ours alone; removed at the end).
  util::TempDirBeside tmp(file);
  const std::string seed = tmp.path("seed");
  for (const char* d : {"", "/upper", "/work"})
    if (::mkdir((seed + d).c_str(), 0755) != 0) throw SysError{errno, "mkdir", seed + d};
  for (const auto& d : dirs) {
    std::string at = seed + "/upper";
    for (const auto& part : util::split(d.substr(1), '/'))
      if (::mkdir((at += "/" + part).c_str(), 0755) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", at};
  }

  // Into an existing SIF file: made beside it, then added as its overlay
  // partition.
  util::UniqueFd sif_fd(::open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (sif_fd && squash::is_sif(sif_fd.get())) {
    const std::string img = tmp.path("overlay.img");
    make_ext3(img, o, seed);
    add_to_sif(sif_fd.get(), file, img);
    util::info("added an overlay partition to `" + file + "` (" + std::to_string(o.size_mib) + " MiB, ext3)");
    return;
  }
  sif_fd.reset();
  make_ext3(file, o, seed);
  util::info("created overlay image `" + file + "` (" + std::to_string(o.size_mib) + " MiB, ext3)");
}

}  // namespace rt
