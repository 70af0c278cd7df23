// Root emulation (--seccomp): the calls an unprivileged user namespace
// refuses to a package manager succeed without effect (container). Linked
// into rt-image only: provided to the exec path through
// run/root_emulation (rt::enable_root_emulation).
//
// In a user namespace with one id mapped, root may not chown to an unmapped
// id, switch to another user or make a device node. apt, dpkg, useradd and
// pip's builds try all three and stop at the first EPERM/EINVAL. A seccomp
// filter (libseccomp) answers those calls with success and does nothing:
// the chown family, the set*id family and setgroups, capset, and mknod /
// mknodat of character and block devices (FIFOs and sockets are still
// made). Every architecture the kernel may report for this process is
// covered: on x86-64 also the i386 (int 0x80) and x32 entry points.
#pragma once
#include <string>
#include <vector>

namespace rt::app {

// The calls emulated, by name, for -v and the manual.
const std::vector<std::string>& emulated_calls();
// What skip_sync (rt build's RUN) adds: fsync and its kin return at once.
const std::vector<std::string>& sync_calls();

// Loads the filter into this process (inherited by its children and kept
// across execve), with sync_calls() too when `skip_sync`. Needs
// PR_SET_NO_NEW_PRIVS. Throws rt::Error.
void install_root_emulation(bool skip_sync);

}  // namespace rt::app
