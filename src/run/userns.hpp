// Entering the user + mount namespace (host -> namespace).
#pragma once
#include <sys/types.h>

#include <string>

namespace rt::run {

// unshare(CLONE_NEWUSER | CLONE_NEWNS) in the calling process, then map
// exactly one id each way: outer -> inner. No helper, no setuid: an
// unprivileged process may write a one-line map of its own ids after
// denying setgroups (user_namespaces(7), "Defining user and group ID mappings").
void enter_user_namespace(uid_t outer_uid, uid_t inner_uid, gid_t outer_gid, gid_t inner_gid);

// unshare(CLONE_NEWUSER) below the current user namespace, mapping the
// caller's ids (uid, gid there) to themselves: the caller keeps its ids
// and loses every capability over the namespaces it is in.
void enter_nested_user_namespace(uid_t uid, gid_t gid);

// A PID namespace for what follows (rt build's RUN, instances), so that
// nothing started in the container outlives it: unshare(CLONE_NEWPID) and
// fork twice. The calling process waits, forwarding signals, and exits as
// its child did; the child is the namespace's init, which forwards signals
// to the program's process, reaps orphans and exits as the program did
// (the kernel then kills whatever is left: pid_namespaces(7)); the
// program's process returns. The two keepers close every descriptor above
// 2, are titled `title`, are not dumpable (the container cannot trace
// them or open their /proc/PID/fd) and die with their parent. With
// `own_proc`, the program's process has a mount namespace of its own with
// the PID namespace's /proc (a warning, and the host's, where the kernel
// refuses); without, it stays in the container's, whose /proc is the host's
// (an instance's: rt exec instance://NAME joins that mount namespace).
void enter_pid_namespace(const std::string& title, bool own_proc);

// --net none, --ipc: a network namespace whose loopback is up and nothing
// else, a System V IPC namespace; needs the capabilities of the user
// namespace the caller has just made or joined.
void enter_net_ipc_namespaces(bool net, bool ipc);

}  // namespace rt::run
