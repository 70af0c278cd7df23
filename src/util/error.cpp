// Error formatting (host side, any world).
#include "rt/error.hpp"

#include <cerrno>
#include <cstring>

#include "util/log.hpp"

namespace rt {

Error::Error(std::string message, std::string hint, int exit_code)
    : std::runtime_error(std::move(message)), hint_(std::move(hint)), exit_code_(exit_code) {}

namespace {

std::string sys_message(int errnum, const std::string& call, const std::string& path, const std::string& path2) {
  std::string m = call;
  if (!path.empty()) m += " `" + path + "`";
  if (!path2.empty()) m += " on `" + path2 + "`";
  m += ": ";
  m += std::strerror(errnum);
  return m;
}

std::string sys_hint(int errnum, const std::string& call) {
  if (call.starts_with("unshare") || call.starts_with("clone")) {
    if (errnum == EPERM || errnum == ENOSPC || errnum == EINVAL || errnum == EUSERS)
      return "unprivileged user namespaces are disabled or exhausted here: check sysctl "
             "user.max_user_namespaces (must be > 0), kernel.unprivileged_userns_clone (Debian) "
             "and kernel.apparmor_restrict_unprivileged_userns (Ubuntu), and that no seccomp "
             "filter of an outer container forbids them";
  }
  if (call.starts_with("mount") && errnum == EPERM)
    return "the kernel refused this mount inside the user namespace (a locked mount flag, or a "
           "filesystem type that cannot be mounted unprivileged)";
  if (call.starts_with("open") && errnum == ENODEV) return "FUSE is not available on this node";
  return {};
}

}  // namespace

SysError::SysError(int errnum, std::string call, std::string path, std::string path2)
    : Error(sys_message(errnum, call, path, path2), sys_hint(errnum, call)), errnum_(errnum) {}

void print_error(const Error& e) { util::error(e.what(), e.hint()); }

}  // namespace rt
