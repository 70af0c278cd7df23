// rt::Error and rt::SysError: messages name the call and the paths, known
// errnos carry a hint.
#include <catch2/catch.hpp>

#include <cerrno>
#include <string>

#include "rt/error.hpp"

TEST_CASE("SysError names the call, the paths and the reason") {
  rt::SysError e(ENOENT, "mount(MS_BIND)", "/opt/x", "/var/tmp/u.rt/mnt/opt/x");
  CHECK(std::string(e.what()) == "mount(MS_BIND) `/opt/x` on `/var/tmp/u.rt/mnt/opt/x`: No such file or directory");
  CHECK(e.errnum() == ENOENT);
  CHECK(e.exit_code() == rt::kExitRtFailed);
  CHECK(std::string(rt::SysError(EACCES, "open").what()) == "open: Permission denied");
}

TEST_CASE("SysError hints at the usual cause of known errnos") {
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
