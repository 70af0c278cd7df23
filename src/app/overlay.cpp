// rt overlay create: ext3 overlay images (host).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "image/child.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "run/overlay_image.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt {

void overlay_create(const std::string& file, const OverlayCreateOptions& o) {
  util::log_init(o.verbosity);
  if (o.size_mib < 1) throw Error("rt overlay create: --size must be at least 1 (MiB)");
  const std::string mkfs = run::find_system_program("mkfs.ext3");
  if (mkfs.empty())
    throw Error("rt overlay create needs mkfs.ext3, which is not installed", "install Debian's e2fsprogs package");
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

  // Made here, never through a link (O_EXCL, O_NOFOLLOW): a name another
  // user placed first is refused.
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
  util::info("created overlay image `" + file + "` (" + std::to_string(o.size_mib) + " MiB, ext3)");
}

}  // namespace rt
