// Holders (host -> namespace): a detached process that keeps a user + mount
// namespace alive, with whatever serves it (a SquashFS image's FUSE server),
// and hands the namespaces to the processes that ask for them.
//
// A holder listens on an abstract unix socket named after a key (no file:
// it is gone with the holder). The first process that finds nobody serving
// the key binds the name and forks the holder (fork, setsid, fork: it is
// never a child of the caller's program); the holder runs `build`, which
// enters the namespaces and prepares them, then serves. Clients get the
// namespaces' fds (SCM_RIGHTS) after both sides check the other's uid
// (SO_PEERCRED), and enter them with setns(2).
//
// The holder watches each client through a pidfd and knows every mount
// namespace its clients live in (its own, and the private copies clients
// make). Once no client is left and no process is in any of those
// namespaces (daemons the programs started), it waits `linger` for a new
// client, then exits. A client that connects while the holder exits sees
// the connection closed and starts over.
#pragma once
#include <chrono>
#include <functional>
#include <string>

namespace rt::run {

struct HolderPolicy {
  enum class Entry {
    Share,  // clients enter the holder's mount namespace: one tree for all
    Copy,   // clients make a private copy of it and report the copy's identity
  };
  Entry entry = Entry::Share;
  std::string what;  // for messages: "the node's shared container `KEY`"
  std::string hint;  // for errors a client can avoid: "run with --no-join"
  const char* comm = "rt-holder";  // the holder's process name
  // How long to wait for another client once nothing is left, given how
  // many clients have come so far.
  std::function<std::chrono::milliseconds(int joined)> linger;
  // How often to look for daemons once every client has exited.
  std::chrono::milliseconds daemon_poll{200};
};

// Enters the namespaces of the holder for `key`, starting one that runs
// `build` when none is serving. An rt::Error thrown by `build` is thrown
// here by the client that started the holder. Returns with the caller in
// the holder's user namespace and in its mount namespace (Share) or a
// private copy of it (Copy). The caller must be single-threaded.
void enter_holder(const std::string& key, const HolderPolicy& policy, const std::function<void()>& build);

// A socket name: "PREFIX-UID-" and a 128-bit hash of `text`.
std::string holder_key(const std::string& prefix, const std::string& text);

} // namespace rt::run
