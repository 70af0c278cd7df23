// Holders (host -> namespace): a detached process that keeps a user + mount
// namespace alive, with whatever serves it (a SquashFS image's FUSE server),
// and hands the namespaces to the processes that ask for them.
//
// A holder listens on an abstract unix socket named after a key (no file:
// it is gone with the holder). The name is a keyed hash of what the holder
// is for, keyed with the user's secret (store::Root::secret), so other
// users cannot compute it; they can still read names in use from
// /proc/net/unix and bind one once its holder is gone, so a name held by
// another uid (or bound without listening) is passed over for the next of
// a sequence all clients follow alike. The first process that finds nobody
// serving a name binds it, listens, and forks the holder (fork, setsid,
// fork: it is never a child of the caller's program); the holder runs
// `build`, which enters the namespaces and prepares them, then serves.
// Clients that come meanwhile wait in the listen queue. A client checks
// the holder's uid (SO_PEERCRED, read on the host) and proves it knows
// the secret; the holder checks both (inside its user namespace any other
// uid reads as the overflow uid, which may be the container's own), then
// sends the namespaces' fds (SCM_RIGHTS), which the client enters with
// setns(2). A holder cannot be traced or looked into through /proc
// (PR_SET_DUMPABLE 0), and its command line shows only `title`.
//
// A Tree holder (a SquashFS image's server) sends the user namespace and,
// in place of its mount namespace, a detached copy of one mount of it made
// for that client alone (open_tree(2), OPEN_TREE_CLONE); the client makes a
// mount namespace of its own, owned by that user namespace, to attach it in.
// Where the kernel makes no such copy (before Linux 5.2), it sends its
// mount namespace as a Share holder does; the client enters it, makes a
// copy of it for itself and binds the mount from there.
//
// An exclusive holder (an overlay's, run/overlay_server.hpp) serves one
// client at a time and answers any other "busy" with the living one's pid.
//
// The holder watches each client through a pidfd and knows every mount
// namespace its clients live in (its own, and those Tree clients make).
// Once no client is left and no process is in any of those namespaces
// (daemons the programs started), it waits `linger` for a new client, then
// exits. A client that connects while the holder exits sees
// the connection closed and starts over.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "util/fd.hpp"

namespace rt::run {

struct HolderPolicy {
  enum class Entry {
    Share,  // clients enter the holder's mount namespace: one tree for all
    Tree,   // clients get a detached copy of the mount at `tree`, make a mount
            // namespace of their own and report its identity
  };
  Entry entry = Entry::Share;
  std::string what;                // for messages: "the node's shared container `KEY`"
  std::string hint;                // for errors a client can avoid: "run with --no-join"
  const char* comm = "rt-holder";  // the holder's process name
  std::string title;               // its command line: "rt-sqfs IMAGE", none of the rank's
  // How long to wait for another client once nothing is left, given how
  // many clients have come so far.
  std::function<std::chrono::milliseconds(int joined)> linger;
  // How often to look for daemons once every client has exited.
  std::chrono::milliseconds daemon_poll{200};
  // False: a client only enters a holder that serves; when none does,
  // enter_holder throws "WHAT is not running" (an instance).
  bool may_start = true;
  // Tree: the mount point, in the holder's mount namespace, of the mount
  // each client gets a copy of.
  std::string tree{};
  // One client at a time: one that comes while another lives is refused,
  // and enter_holder throws "BUSY PID on this host" (PID: the living one).
  bool exclusive = false;
  std::string busy{};
  // SIGUSR1 asks the holder to leave now rather than linger, which it does
  // when no client and no process of theirs is left (another holder waits
  // for what this one holds).
  bool leave_when_asked = false;
  // Run by the holder as it exits, nothing left to serve.
  std::function<void()> at_exit{};
};

// A linger time in seconds: the environment variable `env`, else the site
// configuration's `key`, else `fallback`; an rt::Error names a bad value.
std::chrono::milliseconds configured_linger(const char* env, const char* key, double fallback);

struct HolderKey {
  std::string prefix;  // "rt-join", "rt-sqfs"
  std::string secret;  // the user's (store::Root::secret)
  std::string text;    // what the holder serves
  // The socket name of try `i`: PREFIX-HASH, keyed with the secret (a name
  // says nothing of the next one).
  std::string name(int i) const;
  // What a client sends to prove it knows the secret.
  std::string proof(const std::string& name) const;
};

// Enters the namespaces of the holder for `key`, starting one that runs
// `build` when none is serving. An rt::Error thrown by `build` is thrown
// here by the client that started the holder. Returns true with the caller
// in the holder's user namespace and in its mount namespace (Share), or in
// a new copy of the caller's own mount namespace with the holder's detached
// tree in `*tree` (Tree; before Linux 5.2, a copy of the holder's mount
// namespace with the tree's root); false, having entered nothing, when
// every name of the key is held by somebody else. The caller must be single-threaded.
// What a Tree holder hands a client: a detached copy of its mount or,
// where the kernel cannot copy a mount (open_tree(2), Linux 5.2), that
// mount's root directory, as the client's own copy of the holder's mount
// namespace holds it (`attached`).
struct HeldTree {
  util::UniqueFd fd;
  bool attached = false;
  explicit operator bool() const { return static_cast<bool>(fd); }
};

// Whether the kernel copies a mount for another namespace (open_tree,
// Linux 5.2): one call, without a copy.
bool kernel_copies_mounts();

bool enter_holder(const HolderKey& key, const HolderPolicy& policy, const std::function<void()>& build,
                  HeldTree* tree = nullptr);

// The identity of a process's namespace of `kind` ("mnt", "pid": as
// "mnt:[4026532...]"; `pid` may be "self"), "" when it cannot be read.
std::string namespace_of(const std::string& pid, const char* kind);
std::string mount_namespace_of(const std::string& pid);
// The processes (other than this one) in namespace `ns` ("mnt:[N]" or
// "pid:[N]"), as far as they can be seen.
std::vector<pid_t> processes_in(const std::string& ns);

// True when a holder of this user serves `key` (it is asked nothing: the
// holder turns the connection away).
bool holder_serving(const HolderKey& key);

}  // namespace rt::run
