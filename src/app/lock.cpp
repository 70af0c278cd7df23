// Advisory file locks (host).
#include "app/lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>

#include "rt/error.hpp"

namespace rt::app {

FileLock::FileLock(const std::string& path, Mode mode) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw SysError{errno, "open", path};
  fd_.reset(fd);
  while (::flock(fd, mode == Mode::Exclusive ? LOCK_EX : LOCK_SH) != 0)
    if (errno != EINTR) throw SysError{errno, "flock", path};
}

FileLock FileLock::try_lock(const std::string& path, Mode mode) {
  FileLock l;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return l;
  UniqueFd owner(fd);
  if (::flock(fd, (mode == Mode::Exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) l.fd_ = std::move(owner);
  return l;
}

}  // namespace rt::app
