// One container per node (host -> namespace); see join.hpp.
#include "run/join.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "rt/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace rt::run {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using util::UniqueFd;

// How long a rank waits for a holder that is still building.
constexpr auto kJoinTimeout = std::chrono::seconds(60);
// With no rank left: how long the holder waits for ranks still expected
// (they may be slow to start), and, when the count is unknown, for more.
constexpr auto kWaitForExpected = milliseconds(10000);
constexpr auto kWaitUnknown = milliseconds(1000);
// Polling interval while daemons of the container outlive the ranks.
constexpr int kDaemonPollMs = 200;

constexpr char kOk[] = "ok";

struct Address {
  sockaddr_un sa{};
  socklen_t len = 0;
};

// An abstract socket (unix(7)): no file, gone with its last descriptor.
Address address_of(const std::string& key) {
  Address a;
  a.sa.sun_family = AF_UNIX;
  size_t n = std::min(key.size(), sizeof a.sa.sun_path - 1);
  std::memcpy(a.sa.sun_path + 1, key.data(), n);
  a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

UniqueFd new_socket(bool nonblock) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) throw SysError("socket(AF_UNIX)");
  return UniqueFd(fd);
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// ---- the holder -------------------------------------------------------------

// Descriptors the launcher gave the first rank (PMI_FD, stdio pipes) must
// not be kept open by the holder, which outlives it: close every one that
// would survive exec, and point stdin and stdout at /dev/null.
void drop_inherited_fds() {
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::close(null);
  }
  std::vector<int> close_these;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) {
      int fd = std::atoi(e->d_name);
      if (fd <= 2 || fd == ::dirfd(d)) continue;
      int flags = ::fcntl(fd, F_GETFD);
      if (flags >= 0 && !(flags & FD_CLOEXEC)) close_these.push_back(fd);
    }
    ::closedir(d);
  }
  for (int fd : close_these) ::close(fd);
}

// True when a process other than this one is in this mount namespace: a
// daemon the ranks started still needs the tree (and the SquashFS server).
bool others_in_namespace() {
  char self[64] = {};
  if (::readlink("/proc/self/ns/mnt", self, sizeof self - 1) <= 0) return false;
  const pid_t me = ::getpid();
  DIR* d = ::opendir("/proc");
  if (!d) return false;
  bool found = false;
  while (dirent* e = ::readdir(d)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == me) continue;
    char path[64], ns[64] = {};
    std::snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
    if (::readlink(path, ns, sizeof ns - 1) > 0 && std::strcmp(ns, self) == 0) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

// One message carrying the two namespace fds (SCM_RIGHTS).
struct FdMessage {
  char payload[1] = {'J'};
  iovec iov{payload, sizeof payload};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

void send_namespaces(int conn, int userns, int mntns) {
  FdMessage m;
  msghdr& msg = m.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  int fds[2] = {userns, mntns};
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ::sendmsg(conn, &msg, MSG_NOSIGNAL);
}

struct Rank {
  pid_t pid;
  UniqueFd pidfd;  // empty where pidfd_open is missing (Linux < 5.3): polled
};

// Serves the namespaces to ranks until the last one is gone; never returns.
[[noreturn]] void hold(UniqueFd sock, int expected, int userns, int mntns) {
  const uid_t me = ::getuid();
  std::vector<Rank> ranks;
  int joined = 0;
  Clock::time_point idle_since = Clock::now();
  for (;;) {
    std::vector<pollfd> fds{{sock.get(), POLLIN, 0}};
    bool polled = false;
    for (const auto& r : ranks) {
      fds.push_back({r.pidfd.get(), POLLIN, 0});
      polled |= !r.pidfd;
    }
    int timeout = -1;
    if (ranks.empty()) {
      bool all_came = expected > 0 && joined >= expected;
      auto wait = expected > joined ? kWaitForExpected : kWaitUnknown;
      auto left = std::chrono::duration_cast<milliseconds>(idle_since + wait - Clock::now()).count();
      if (all_came || left <= 0) {
        if (!others_in_namespace()) break;
        timeout = kDaemonPollMs;
      } else {
        timeout = static_cast<int>(left);
      }
    } else if (polled) {
      timeout = kDaemonPollMs;
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;

    if (fds[0].revents & POLLIN) {
      for (;;) {
        int conn = ::accept4(sock.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0) break;
        UniqueFd c(conn);
        ucred cred{};
        socklen_t len = sizeof cred;
        if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != me) continue;
        int pfd = pidfd_open(cred.pid);
        ranks.push_back({cred.pid, UniqueFd(pfd)});
        ++joined;
        send_namespaces(conn, userns, mntns);
        util::debug("holder: rank " + std::to_string(cred.pid) + " joined (" + std::to_string(joined) +
                    (expected > 0 ? " of " + std::to_string(expected) : std::string()) + ")");
      }
    }
    // Ranks that have exited.
    size_t before = ranks.size();
    for (size_t i = 1; i < fds.size(); ++i) {
      Rank& r = ranks[i - 1];
      bool gone = r.pidfd ? (fds[i].revents & (POLLIN | POLLHUP)) != 0 : (::kill(r.pid, 0) != 0 && errno == ESRCH);
      if (gone) r.pid = 0;
    }
    std::erase_if(ranks, [](const Rank& r) { return r.pid == 0; });
    if (ranks.empty() && before != 0) idle_since = Clock::now();
  }
  util::debug("holder: no process left in the container; exiting");
  ::_exit(0);
}

// Runs in the holder, a grandchild of the first rank in a session of its
// own (reparented away from the rank, so it never shows up as a child of
// the rank's program). Reports "ok" or the error through `report`.
[[noreturn]] void holder_main(UniqueFd sock, UniqueFd report, int expected, const std::function<void()>& build) {
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  drop_inherited_fds();
  UniqueFd userns, mntns;
  try {
    build();
    userns = util::open_fd("/proc/self/ns/user", O_RDONLY);
    mntns = util::open_fd("/proc/self/ns/mnt", O_RDONLY);
    if (::listen(sock.get(), SOMAXCONN) != 0) throw SysError("listen", "the join socket");
  } catch (const Error& e) {
    std::string text = std::string(e.what()) + '\n' + e.hint();
    util::write_all(report.get(), text, "join report");
    ::_exit(kExitRtFailed);
  } catch (const std::exception& e) {
    util::write_all(report.get(), std::string(e.what()) + '\n', "join report");
    ::_exit(kExitRtFailed);
  }
  util::write_all(report.get(), kOk, "join report");
  report.reset();
  // The launcher waits for EOF on the ranks' output: let go of stderr too,
  // unless it carries the holder's debug log.
  if (!util::log_enabled(util::Level::Debug)) {
    int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, 2);
      ::close(null);
    }
  }
  hold(std::move(sock), expected, userns.get(), mntns.get());
}

// Forks the holder with `sock` (bound, not yet listening) and waits until
// it serves; throws its error.
void start_holder(UniqueFd sock, int expected, const std::function<void()>& build) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw SysError("pipe");
  UniqueFd rd(p[0]), wr(p[1]);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw SysError("fork");
  if (pid == 0) {
    rd.reset();
    ::setsid();
    pid_t holder = ::fork();
    if (holder != 0) ::_exit(holder < 0 ? 1 : 0);
    holder_main(std::move(sock), std::move(wr), expected, build);
  }
  wr.reset();
  sock.reset();  // the holder's copy alone keeps the name bound
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  std::string text = util::read_fd(rd.get(), "join report", 1 << 16);
  if (text == kOk) return;
  if (text.empty()) throw Error("the holder of the node's shared container died while building it");
  size_t nl = text.find('\n');
  std::string hint = nl == std::string::npos ? std::string() : text.substr(nl + 1);
  throw Error(text.substr(0, nl), hint);
}

// The namespaces' fds from a holder, or false if it went away first.
bool receive_namespaces(int conn, UniqueFd& userns, UniqueFd& mntns) {
  FdMessage m;
  msghdr& msg = m.msg;
  ssize_t n;
  while ((n = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n <= 0) return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
      continue;
    int fds[2];
    std::memcpy(fds, CMSG_DATA(c), sizeof fds);
    userns.reset(fds[0]);
    mntns.reset(fds[1]);
  }
  return userns && mntns;
}

} // namespace

std::string join_key(const MountPlan& plan, const hpc::Launcher& launcher) {
  std::string s = launcher.job;
  s += '\0' + std::to_string(::getppid());
  s += '\0' + plan.rootfs + '\0' + plan.staging;
  s += '\0' + std::to_string(static_cast<int>(plan.root_mode)) + (plan.squashfs ? "s" : "d");
  s += '\0' + std::to_string(plan.outer_uid) + ':' + std::to_string(plan.inner_uid) + ':' +
       std::to_string(plan.outer_gid) + ':' + std::to_string(plan.inner_gid);
  for (const auto& m : plan.mounts) {
    s += '\0' + std::to_string(static_cast<int>(m.kind)) + (m.readonly ? "r" : "w") + (m.optional ? "o" : "-") +
         (m.if_target ? "t" : "-");
    s += '\0' + m.src + '\0' + m.dst;
  }
  for (const auto& f : plan.staged) s += '\0' + f.name + '\0' + f.content;
  char key[80];
  std::snprintf(key, sizeof key, "rt-join-%u-%016llx%016llx", static_cast<unsigned>(::getuid()),
                static_cast<unsigned long long>(fnv1a(s, 14695981039346656037ULL)),
                static_cast<unsigned long long>(fnv1a(s, 0x9e3779b97f4a7c15ULL)));
  return key;
}

void join_container(const std::string& key, int expected, const std::function<void()>& build) {
  const Address addr = address_of(key);
  const auto deadline = Clock::now() + kJoinTimeout;
  auto backoff = std::chrono::microseconds(200);
  UniqueFd userns, mntns;
  for (;;) {
    UniqueFd conn = new_socket(false);
    if (::connect(conn.get(), reinterpret_cast<const sockaddr*>(&addr.sa), addr.len) == 0) {
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) throw SysError("getsockopt(SO_PEERCRED)");
      if (cred.uid != ::getuid())
        throw Error("the node's shared container `" + key + "` is held by uid " + std::to_string(cred.uid) +
                        ", not by you",
                    "run with --no-join");
      if (receive_namespaces(conn.get(), userns, mntns)) break;
      // The holder was exiting: start over.
    } else if (errno == ECONNREFUSED) {
      // Nobody serves the name: take it, or wait for whoever has it.
      UniqueFd mine = new_socket(true);
      if (::bind(mine.get(), reinterpret_cast<const sockaddr*>(&addr.sa), addr.len) == 0) {
        util::debug("starting the node's shared container " + key);
        start_holder(std::move(mine), expected, build);
        continue;
      }
      if (errno != EADDRINUSE) throw SysError("bind", "@" + key);
    } else if (errno != EAGAIN && errno != EINTR) {
      throw SysError("connect", "@" + key);
    }
    if (Clock::now() > deadline)
      throw Error("timed out waiting for the node's shared container `" + key + "`", "run with --no-join");
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(20000));
  }
  if (::setns(userns.get(), CLONE_NEWUSER) != 0) throw SysError("setns(CLONE_NEWUSER)", key);
  if (::setns(mntns.get(), CLONE_NEWNS) != 0) throw SysError("setns(CLONE_NEWNS)", key);
  util::debug("joined the node's shared container " + key);
}

} // namespace rt::run
