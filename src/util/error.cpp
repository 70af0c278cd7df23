// Error formatting (host side, any world).
#include "rt/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/error.hpp"
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

// The first bytes of a small file of /proc, trimmed; "" where it cannot be
// read. No exceptions, errno kept: it runs while an error is being made.
std::string read_small(const char* path) {
  const int saved_errno = errno;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errno = saved_errno;
    return {};
  }
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) < 0 && errno == EINTR) {
  }
  ::close(fd);
  errno = saved_errno;
  std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

// The kernel's steps of entering a user namespace, where AppArmor's
// restriction shows as EPERM (EACCES from unshare where Ubuntu's
// unprivileged_userns profile is absent): unshare/clone, the id maps and
// setgroups, and the first mount.
bool is_userns_step(int errnum, const std::string& call, const std::string& path) {
  if (call.starts_with("unshare") || call.starts_with("clone")) return errnum == EPERM || errnum == EACCES;
  if (errnum != EPERM) return false;
  if (call == "write" || call == "open")
    return path == "/proc/self/uid_map" || path == "/proc/self/gid_map" || path == "/proc/self/setgroups";
  return call.starts_with("mount");
}

std::string sys_hint(int errnum, const std::string& call, const std::string& path) {
  if (is_userns_step(errnum, call, path) && util::apparmor_restricts_userns()) return util::apparmor_userns_hint();
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
    : Error(sys_message(errnum, call, path, path2), sys_hint(errnum, call, path)), errnum_(errnum) {}

void print_error(const Error& e) { util::error(e.what(), e.hint()); }

namespace util {

std::string apparmor_userns_sysctl_path() {
  // secure_getenv: nothing from the environment where rt runs setuid.
  if (const char* p = ::secure_getenv("RT_TEST_APPARMOR_SYSCTL"); p && *p) return p;
  return kAppArmorUsernsSysctl;
}

std::string apparmor_userns_sysctl() { return read_small(apparmor_userns_sysctl_path().c_str()); }

bool under_rt_apparmor_profile() {
  // "rt (unconfined)"; the older file is shared with other LSMs.
  std::string label = read_small("/proc/self/attr/apparmor/current");
  if (label.empty()) label = read_small("/proc/self/attr/current");
  for (std::string name : {kAppArmorProfileRt, kAppArmorProfileRtImage})
    if (label.starts_with(name + " ") || label.starts_with(name + "//")) return true;
  return false;
}

bool apparmor_restricts_userns() { return apparmor_userns_sysctl() == "1" && !under_rt_apparmor_profile(); }

std::string apparmor_userns_hint() {
  return std::string(
             "AppArmor restricts unprivileged user namespaces on this host "
             "(kernel.apparmor_restrict_unprivileged_userns=1) and rt runs without its profile: ask the "
             "administrator to load it, `apparmor_parser -r ") +
         kAppArmorProfileFile +
         "` (cmake --install puts it there; it covers the installed rt and rt-image), or to lift the restriction: "
         "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`";
}

}  // namespace util

}  // namespace rt
