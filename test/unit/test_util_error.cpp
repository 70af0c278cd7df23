// rt::Error and rt::SysError: messages name the call and the paths, known
// errnos carry a hint.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "rt/error.hpp"
#include "temp_dir.hpp"
#include "util/error.hpp"

namespace {
// kernel.apparmor_restrict_unprivileged_userns reading `value`, through the
// tests' override, for the life of the object.
struct AppArmorSysctl {
  TempDir dir;
  explicit AppArmorSysctl(const std::string& value) {
    std::ofstream(dir.path + "/sysctl") << value;
    ::setenv("RT_TEST_APPARMOR_SYSCTL", (dir.path + "/sysctl").c_str(), 1);
  }
  ~AppArmorSysctl() { ::unsetenv("RT_TEST_APPARMOR_SYSCTL"); }
};
bool names_apparmor(const std::string& hint) {
  return hint.find("AppArmor restricts unprivileged user namespaces") != std::string::npos &&
         hint.find("apparmor_parser -r /etc/apparmor.d/rt") != std::string::npos &&
         hint.find("sysctl kernel.apparmor_restrict_unprivileged_userns=0") != std::string::npos;
}
}  // namespace

TEST_CASE("SysError names the call, the paths and the reason") {
  rt::SysError e(ENOENT, "mount(MS_BIND)", "/opt/x", "/var/tmp/u.rt/mnt/opt/x");
  CHECK(std::string(e.what()) == "mount(MS_BIND) `/opt/x` on `/var/tmp/u.rt/mnt/opt/x`: No such file or directory");
  CHECK(e.errnum() == ENOENT);
  CHECK(e.exit_code() == rt::kExitRtFailed);
  CHECK(std::string(rt::SysError(EACCES, "open").what()) == "open: Permission denied");
}

TEST_CASE("SysError hints at the usual cause of known errnos") {
  AppArmorSysctl unrestricted("0\n");  // as on a host without AppArmor's restriction
  CHECK(rt::SysError(EPERM, "unshare(CLONE_NEWUSER|CLONE_NEWNS)").hint().find("user.max_user_namespaces") !=
        std::string::npos);
  CHECK(rt::SysError(ENOSPC, "unshare(CLONE_NEWUSER)").hint().find("user.max_user_namespaces") != std::string::npos);
  CHECK(rt::SysError(EPERM, "mount(MS_REMOUNT)", "/").hint().find("locked mount flag") != std::string::npos);
  CHECK(rt::SysError(ENODEV, "open", "/dev/fuse").hint() == "FUSE is not available on this node");
  CHECK(rt::SysError(ENOENT, "open", "/x").hint().empty());
}

TEST_CASE("SysError in braces takes errno before its paths are built") {
  errno = ENOTDIR;
  rt::SysError e{errno, "stat", [] {
                   errno = 0;  // as an allocation building the path could
                   return std::string("/a/b");
                 }()};
  CHECK(e.errnum() == ENOTDIR);
}

TEST_CASE("Where AppArmor restricts user namespaces, their EPERM names it and both fixes") {
  AppArmorSysctl restricted("1\n");
  REQUIRE(rt::util::apparmor_userns_sysctl() == "1");
  REQUIRE_FALSE(rt::util::under_rt_apparmor_profile());  // the tests run under no profile of rt's
  CHECK(rt::util::apparmor_restricts_userns());
  // unshare may succeed; the namespace then has no capabilities.
  CHECK(names_apparmor(rt::SysError(EPERM, "unshare(CLONE_NEWUSER|CLONE_NEWNS)").hint()));
  CHECK(names_apparmor(rt::SysError(EACCES, "unshare(CLONE_NEWUSER)").hint()));
  CHECK(names_apparmor(rt::SysError(EPERM, "write", "/proc/self/setgroups").hint()));
  CHECK(names_apparmor(rt::SysError(EPERM, "write", "/proc/self/uid_map").hint()));
  CHECK(names_apparmor(rt::SysError(EPERM, "write", "/proc/self/gid_map").hint()));
  CHECK(names_apparmor(rt::SysError(EPERM, "mount(MS_REC|MS_PRIVATE)", "/").hint()));
  // Other errors keep their own hints, or none.
  CHECK(rt::SysError(ENOSPC, "unshare(CLONE_NEWUSER)").hint().find("user.max_user_namespaces") != std::string::npos);
  CHECK(rt::SysError(EPERM, "write", "/x/uid_map").hint().empty());
  CHECK(rt::SysError(ENOENT, "mount(MS_BIND)", "/x").hint().empty());
  CHECK(rt::SysError(ENODEV, "open", "/dev/fuse").hint() == "FUSE is not available on this node");
}

TEST_CASE("Where AppArmor does not restrict user namespaces, the hints stay as they were") {
  for (const char* value : {"0\n", ""}) {
    AppArmorSysctl unrestricted(value);
    CHECK_FALSE(rt::util::apparmor_restricts_userns());
    const std::string unshare = rt::SysError(EPERM, "unshare(CLONE_NEWUSER|CLONE_NEWNS)").hint();
    CHECK(unshare.find("user.max_user_namespaces") != std::string::npos);
    CHECK_FALSE(names_apparmor(unshare));
    CHECK(rt::SysError(EPERM, "mount(MS_REMOUNT)", "/").hint().find("locked mount flag") != std::string::npos);
    CHECK(rt::SysError(EPERM, "write", "/proc/self/uid_map").hint().empty());
  }
  ::setenv("RT_TEST_APPARMOR_SYSCTL", "/nonexistent/rt-test", 1);  // a kernel without the setting
  CHECK(rt::util::apparmor_userns_sysctl().empty());
  CHECK_FALSE(rt::util::apparmor_restricts_userns());
  ::unsetenv("RT_TEST_APPARMOR_SYSCTL");
}
