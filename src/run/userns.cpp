// Entering the user + mount namespace (host -> namespace).
#include "run/userns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "rt/error.hpp"

namespace rt::run {
namespace {

void write_proc(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw SysError{errno, "open", path};
  ssize_t n = ::write(fd, text.data(), text.size());
  int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) throw SysError(e, "write", path);
}

}  // namespace

void enter_user_namespace(uid_t outer_uid, uid_t inner_uid, gid_t outer_gid, gid_t inner_gid) {
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) throw SysError{errno, "unshare(CLONE_NEWUSER|CLONE_NEWNS)"};
  write_proc("/proc/self/setgroups", "deny");
  write_proc("/proc/self/uid_map", std::to_string(inner_uid) + " " + std::to_string(outer_uid) + " 1");
  write_proc("/proc/self/gid_map", std::to_string(inner_gid) + " " + std::to_string(outer_gid) + " 1");
}

void enter_nested_user_namespace(uid_t uid, gid_t gid) {
  if (::unshare(CLONE_NEWUSER) != 0) throw SysError{errno, "unshare(CLONE_NEWUSER)"};
  write_proc("/proc/self/setgroups", "deny");
  write_proc("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1");
  write_proc("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
}

}  // namespace rt::run
