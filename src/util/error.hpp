// AppArmor's restriction of unprivileged user namespaces (Ubuntu 23.10+,
// DGX OS), which SysError's hints and rt doctor name (host side, any world).
// The rest of util/error.cpp is rt::Error and rt::SysError (rt/error.hpp).
#pragma once
#include <string>

namespace rt::util {

// Where AppArmor restricts unprivileged user namespaces, a program not
// under a profile with the `userns,` rule gets a namespace without
// capabilities: unshare(2) may succeed, and writing uid_map or mounting
// then fails with EPERM. rt ships such a profile; cmake --install puts it here.
inline constexpr const char* kAppArmorUsernsSysctl = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";
inline constexpr const char* kAppArmorProfileFile = "/etc/apparmor.d/rt";
// The names of the profiles in it (of rt and of rt-image).
inline constexpr const char* kAppArmorProfileRt = "rt";
inline constexpr const char* kAppArmorProfileRtImage = "rt-image";

// The sysctl's file: $RT_TEST_APPARMOR_SYSCTL where set (the tests give a
// file of their own; not read by a setuid or setgid rt), else the above.
std::string apparmor_userns_sysctl_path();
// The sysctl as the file reads, trimmed: "1" (restricted), "0", or "" where
// the kernel has no such setting or the file cannot be read. Never throws.
std::string apparmor_userns_sysctl();
// True when the calling process runs under rt's profile (its AppArmor
// label, /proc/self/attr/apparmor/current, names rt or rt-image), so the
// restriction does not apply to it. Never throws.
bool under_rt_apparmor_profile();
// True when the restriction explains an EPERM of a namespace operation
// here: the sysctl reads 1 and the process is not under rt's profile.
bool apparmor_restricts_userns();
// The hint for such an EPERM: the cause and the two fixes (rt's profile
// loaded by the administrator, or the sysctl set to 0).
std::string apparmor_userns_hint();

}  // namespace rt::util
