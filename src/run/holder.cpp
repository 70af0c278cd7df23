// Holders of namespaces (host -> namespace); see holder.hpp.
#include "run/holder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::run {
std::string namespace_of(const std::string& pid, const char* kind) {
  char ns[64] = {};
  std::string path = "/proc/" + pid + "/ns/" + kind;
  if (::readlink(path.c_str(), ns, sizeof ns - 1) <= 0) return {};
  return ns;
}

std::string mount_namespace_of(const std::string& pid) { return namespace_of(pid, "mnt"); }

bool kernel_copies_mounts() {
  const int fd = ::open_tree(AT_FDCWD, "/", OPEN_TREE_CLOEXEC);  // an O_PATH descriptor, no copy
  if (fd >= 0) ::close(fd);
  return fd >= 0 || errno != ENOSYS;
}

namespace {

// fn(pid, its namespace of `kind`) for every other process whose namespace
// can be read.
void each_process_namespace(const char* kind, const std::function<void(pid_t, const std::string&)>& fn) {
  DIR* d = ::opendir("/proc");
  if (!d) return;
  const pid_t me = ::getpid();
  while (dirent* e = ::readdir(d)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == me) continue;
    if (std::string ns = namespace_of(e->d_name, kind); !ns.empty()) fn(pid, ns);
  }
  ::closedir(d);
}

// The parent of process `pid` (/proc/PID/stat), 0 when it cannot be read.
pid_t parent_of(pid_t pid) {
  const auto stat = util::read_file_if_exists("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!stat) return 0;
  const size_t close = stat->rfind(')');  // the command may hold anything
  if (close == std::string::npos || close + 4 >= stat->size()) return 0;
  return static_cast<pid_t>(std::atoi(stat->c_str() + close + 4));  // ") S PPID"
}

}  // namespace

std::vector<pid_t> processes_in(const std::string& ns) {
  std::vector<pid_t> out;
  const std::string kind = ns.substr(0, ns.find(':'));
  each_process_namespace(kind.c_str(), [&](pid_t pid, const std::string& its) {
    if (its == ns) out.push_back(pid);
  });
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using util::UniqueFd;

// How long a client waits for a holder that is still building.
constexpr auto kEnterTimeout = std::chrono::seconds(60);
// How long a new holder waits for its first client (the one that started
// it, unless that died meanwhile), whatever its linger time.
constexpr auto kFirstClient = milliseconds(10000);

constexpr char kOk[] = "ok";

// Names tried per key before giving up on sharing (each held by somebody
// else); how many times a name bound without a listener, or with a full
// queue, is retried (about 80 ms with the back-off) before it counts as
// somebody else's; how long a
// holder waits for a client's proof.
constexpr int kNames = 8;
constexpr int kBoundNotListening = 12;
constexpr int kProofWaitMs = 2000;
// How long a client looks for the holder's answer before it sleeps: the
// answer takes some 0.1-0.2 ms, and a process asleep on an idle processor
// is woken late (measured: ~80 us on a two-core guest, where the holder
// answers from the other processor; a core in a deep sleep state is slower
// still). Yielding as it looks, the client leaves its processor to a
// holder that runs there.
constexpr auto kAnswerSpin = std::chrono::microseconds(400);
// How long after its last client went a holder waits before it looks
// through /proc for processes left in the clients' namespaces: a start
// often follows an exit (a job's steps, a loop of runs), and the scan
// (a readlink per process) would compete with it for the processors and
// delay its answer.
constexpr auto kScanDelay = milliseconds(50);

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

UniqueFd new_socket(bool nonblock) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) throw SysError{errno, "socket(AF_UNIX)"};
  return UniqueFd(fd);
}

// This process's own holder socket and report pipe, while it is a holder:
// a holder it starts in turn (a shared container's holder starting the
// image's server) must not keep them, or the name would stay bound and the
// report unfinished after this holder is gone.
std::vector<int> g_own_fds;

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// ---- the holder -------------------------------------------------------------

// Descriptors the launcher gave the first client (PMI_FD, stdio pipes) must
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

// True when a process other than this one is in one of `spaces` (mount
// namespaces): a daemon still needs the tree (and the image server). The
// namespaces nobody is in any more are dropped from the set.
// Its own children (a lazy image's fetcher, squash/lazy.hpp) are not
// such processes: they end with the holder.
bool others_in(std::set<std::string>& spaces, const std::string& own) {
  std::set<std::string> seen{own};
  bool found = false;
  const pid_t me = ::getpid();
  each_process_namespace("mnt", [&](pid_t pid, const std::string& ns) {
    if (spaces.count(ns) && parent_of(pid) != me) {
      found = true;
      seen.insert(ns);
    }
  });
  spaces = std::move(seen);
  return found;
}

// One message carrying two fds (SCM_RIGHTS): the user namespace, then the
// mount namespace (Share) or a detached tree (Tree); a Tree client's report
// carries one (report_namespace).
// An exclusive holder's refusal is a message of its own: "B" and the pid
// of the client it serves.
struct FdMessage {
  char payload[32] = {'J'};
  iovec iov{payload, 1};
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
  void receiving() { iov.iov_len = sizeof payload; }
};

// One message: `payload` (up to 32 bytes), with `fds` (two at most) as
// SCM_RIGHTS when there are any.
void send_message(int conn, std::string_view payload, std::initializer_list<int> fds) {
  FdMessage m;
  const size_t n = std::min(payload.size(), sizeof m.payload);
  std::memcpy(m.payload, payload.data(), n);
  m.iov.iov_len = n;
  const size_t bytes = std::min<size_t>(fds.size(), 2) * sizeof(int);
  if (bytes == 0) {
    m.msg.msg_control = nullptr;
    m.msg.msg_controllen = 0;
  } else {
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(bytes);
    std::memcpy(CMSG_DATA(c), fds.begin(), bytes);
    m.msg.msg_controllen = CMSG_SPACE(bytes);
  }
  ::sendmsg(conn, &m.msg, MSG_NOSIGNAL);
}

// The fds a received message carried (closed with the vector).
std::vector<UniqueFd> received_fds(msghdr& msg) {
  std::vector<UniqueFd> out;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      out.emplace_back(fd);
    }
  }
  return out;
}

// A Tree client's report of the mount namespace it made (its id, as
// mount_namespace_of has it), sent with the namespace itself (SCM_RIGHTS).
// The holder lets go of it once the client has gone: the kernel then takes
// the namespace down in the holder, whose close waits for the RCU grace
// period that would have held up the container's last exit (and whoever
// waits for it).
void report_namespace(int conn) {
  UniqueFd ns(::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (ns && ::fstat(ns.get(), &st) == 0)
    send_message(conn, "mnt:[" + std::to_string(st.st_ino) + "]", {ns.get()});
  else
    send_message(conn, mount_namespace_of("self"), {});
}

struct Client {
  pid_t pid;
  UniqueFd pidfd;  // empty where pidfd_open is missing (Linux < 5.3): polled
  UniqueFd conn;   // Tree: open until the client's report of its namespace is read
};

class Holder {
public:
  Holder(UniqueFd sock, const HolderPolicy& policy, std::string proof, int userns, int mntns)
      : sock_(std::move(sock)),
        policy_(policy),
        proof_(std::move(proof)),
        userns_(userns),
        mntns_(mntns),
        own_(mount_namespace_of("self")),
        spaces_{own_} {}

  // Serves clients until nothing is left; never returns.
  [[noreturn]] void run() {
    UniqueFd asked;  // SIGUSR1 (blocked since the holder began), with leave_when_asked
    if (policy_.leave_when_asked) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGUSR1);
      asked.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    }
    for (;;) {
      int timeout = next_timeout();
      if (timeout == 0) break;
      // A Tree client's report of its namespace is read once it has gone
      // (it stays in the socket): one wakeup fewer per container.
      std::vector<pollfd> fds{{sock_.get(), POLLIN, 0}, {asked.get(), POLLIN, 0}};
      for (const auto& c : clients_) fds.push_back({c.pidfd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) accept_all();
      for (size_t i = 0; i < clients_.size() && 2 + i < fds.size(); ++i) {
        Client& c = clients_[i];
        bool gone =
            c.pidfd ? (fds[2 + i].revents & (POLLIN | POLLHUP)) != 0 : (::kill(c.pid, 0) != 0 && errno == ESRCH);
        if (gone) copied(c), c.pid = 0, left_at_ = Clock::now();
      }
      std::erase_if(clients_, [](const Client& c) { return c.pid == 0; });
      if (fds[1].revents & POLLIN) {
        signalfd_siginfo si;
        while (::read(asked.get(), &si, sizeof si) == sizeof si) {
        }
        if (serving_any() == 0 && !others_in(spaces_, own_)) {
          util::debug(policy_.what + ": asked to leave, nothing served");
          break;
        }
      }
    }
    util::debug(policy_.what + ": nothing left to serve; exiting");
    if (policy_.at_exit) policy_.at_exit();
    ::_exit(0);
  }

private:
  UniqueFd sock_;
  const HolderPolicy& policy_;
  const std::string proof_;
  int userns_, mntns_;
  std::string own_;
  std::set<std::string> spaces_;  // mount namespaces whose processes need us
  std::vector<Client> clients_;
  int joined_ = 0;
  bool idle_ = false;  // no client and no process in spaces_ since idle_since_
  Clock::time_point idle_since_ = Clock::now();
  Clock::time_point left_at_{};  // when a client last went

  // The poll timeout in ms (-1: none), or 0 when it is time to exit.
  int next_timeout() {
    bool polled = false;
    for (const auto& c : clients_) polled |= !c.pidfd;
    if (!clients_.empty()) return polled ? static_cast<int>(policy_.daemon_poll.count()) : -1;
    if (!idle_) {
      if (auto wait = std::chrono::duration_cast<milliseconds>(left_at_ + kScanDelay - Clock::now()).count(); wait > 0)
        return static_cast<int>(wait);
      if (others_in(spaces_, own_)) return static_cast<int>(policy_.daemon_poll.count());
      idle_ = true;
      idle_since_ = Clock::now();
    }
    auto linger = joined_ == 0 ? std::max(kFirstClient, policy_.linger(0)) : policy_.linger(joined_);
    auto left = std::chrono::duration_cast<milliseconds>(idle_since_ + linger - Clock::now());
    return left.count() <= 0 ? 0 : static_cast<int>(left.count());
  }

  void accept_all() {
    const uid_t me = ::getuid();
    for (;;) {
      int fd = ::accept4(sock_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      UniqueFd conn(fd);
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != me) continue;
      // Another uid reads as the overflow uid in here, which may be the
      // container's own (--uid 65534): the proof tells them apart. A client
      // sends it as it connects, so a short wait is plenty.
      char proof[128];
      ssize_t n = ::recv(fd, proof, sizeof proof, MSG_DONTWAIT);
      if (n < 0 && errno == EAGAIN) {
        pollfd p{fd, POLLIN, 0};
        n = ::poll(&p, 1, kProofWaitMs) == 1 ? ::recv(fd, proof, sizeof proof, 0) : -1;
      }
      if (n != static_cast<ssize_t>(proof_.size()) || std::memcmp(proof, proof_.data(), proof_.size()) != 0) {
        util::debug(policy_.what + ": process " + std::to_string(cred.pid) + " refused: no proof of the secret");
        continue;
      }
      if (const pid_t other = serving(); other > 0) {
        const std::string busy = "B" + std::to_string(other);
        ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
        util::debug(policy_.what + ": process " + std::to_string(cred.pid) + " refused: process " +
                    std::to_string(other) + " is served");
        continue;
      }
      Client c{cred.pid, UniqueFd(pidfd_open(cred.pid)), {}};
      if (policy_.entry == HolderPolicy::Entry::Tree) {
        // A copy for this client alone: attaching it consumes it. The
        // client never enters this namespace, so nothing of it needs
        // unmounting there (a lazy unmount waits for an RCU grace period).
        // Where the kernel makes no copy (open_tree, Linux 5.2), the
        // namespace itself: the client copies it and binds from there.
        UniqueFd copy(::open_tree(AT_FDCWD, policy_.tree.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
        if (copy) {
          send_message(fd, "J", {userns_, copy.get()});
        } else {
          util::debug(policy_.what + ": open_tree `" + policy_.tree + "`: " + std::strerror(errno) +
                      ": the namespace instead");
          send_message(fd, "N", {userns_, mntns_});
        }
        c.conn = std::move(conn);
      } else {
        send_message(fd, "J", {userns_, mntns_});
      }
      clients_.push_back(std::move(c));
      ++joined_;
      idle_ = false;
      util::debug(policy_.what + ": process " + std::to_string(cred.pid) + " entered (" + std::to_string(joined_) +
                  " so far)");
    }
  }

  // Exclusive: the pid of a living client, else 0. One that has just
  // exited may not have been seen yet by run()'s poll: looked at here.
  pid_t serving() const { return policy_.exclusive ? serving_any() : 0; }
  pid_t serving_any() const {
    for (const auto& c : clients_) {
      if (c.pid == 0) continue;
      pollfd p{c.pidfd.get(), POLLIN, 0};
      const bool gone = c.pidfd ? ::poll(&p, 1, 0) == 1 : (::kill(c.pid, 0) != 0 && errno == ESRCH);
      if (!gone) return c.pid;
    }
    return 0;
  }

  // A Tree client reported (or failed to report) its own mount namespace,
  // where it may have left a daemon.
  void copied(Client& c) {
    if (!c.conn) return;
    FdMessage m;
    m.receiving();
    const ssize_t n = ::recvmsg(c.conn.get(), &m.msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    // The namespace that came with it: let go of here (report_namespace).
    if (n > 0) received_fds(m.msg);
    if (n > 4 && std::memcmp(m.payload, "mnt:", 4) == 0) spaces_.insert(std::string(m.payload, static_cast<size_t>(n)));
    c.conn.reset();
  }
};

// Runs in the holder, a grandchild of the first client in a session of its
// own. Reports "ok" or the error through `report`.
[[noreturn]] void holder_main(UniqueFd sock, UniqueFd report, const HolderPolicy& policy, std::string proof,
                              const std::function<void()>& build) {
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  if (policy.leave_when_asked) {  // kept for run(): asked while it builds, it would die
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
  }
  ::prctl(PR_SET_NAME, policy.comm);
  // The first client's arguments (-e TOKEN=...) are in this copy of its
  // memory, and everybody can read /proc/PID/cmdline.
  util::set_process_title(policy.title.empty() ? policy.comm : policy.title);
  for (int fd : g_own_fds) ::close(fd);
  g_own_fds = {sock.get(), report.get()};
  drop_inherited_fds();
  UniqueFd userns, mntns;
  try {
    build();
    if (::chdir("/") != 0) throw SysError{errno, "chdir", "/"};
    userns = util::open_fd("/proc/self/ns/user", O_RDONLY);
    mntns = util::open_fd("/proc/self/ns/mnt", O_RDONLY);
    // The containers' processes share this uid (and, under Share, this
    // user namespace): none may ptrace the holder or reach its root, cwd
    // or fds through /proc (for a server: the host's /), which takes
    // CAP_SYS_PTRACE where rt was started once the holder is not dumpable
    // (ptrace(2), "Ptrace access mode checking").
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) throw SysError{errno, "prctl(PR_SET_DUMPABLE)"};
  } catch (const Error& e) {
    util::write_all(report.get(), std::string(e.what()) + '\n' + e.hint(), "holder report");
    ::_exit(kExitRtFailed);
  } catch (const std::exception& e) {
    util::write_all(report.get(), std::string(e.what()) + '\n', "holder report");
    ::_exit(kExitRtFailed);
  }
  // This thread (not the threads `build` started, a server's among them)
  // wakes for each client's connect, proof and report. SCHED_BATCH wakeups
  // do not preempt the running task (sched(7)): the client, which would
  // otherwise be switched out at each of its sends, runs on until it waits
  // for the answer. Measured on two cores: two of a SquashFS start's three
  // holder wakeups preempted it.
  sched_param batch{};
  (void)::sched_setscheduler(0, SCHED_BATCH, &batch);
  util::write_all(report.get(), kOk, "holder report");
  report.reset();
  // Whoever reads the first client's output (a launcher, a shell pipe)
  // waits for EOF: let go of stderr too.
  int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 2);
    ::close(null);
  }
  Holder(std::move(sock), policy, std::move(proof), userns.get(), mntns.get()).run();
}

// Forks the holder with `sock` (bound and listening: clients that come
// while it builds wait in the queue) and waits until it serves; throws its
// error.
void start_holder(UniqueFd sock, const HolderPolicy& policy, const std::string& proof,
                  const std::function<void()>& build) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw SysError{errno, "pipe"};
  UniqueFd rd(p[0]), wr(p[1]);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw SysError{errno, "fork"};
  if (pid == 0) {
    rd.reset();
    ::setsid();
    pid_t holder = ::fork();
    if (holder != 0) ::_exit(holder < 0 ? 1 : 0);
    holder_main(std::move(sock), std::move(wr), policy, proof, build);
  }
  wr.reset();
  sock.reset();  // the holder's copy alone keeps the name bound
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  std::string text = util::read_fd(rd.get(), "holder report", 1 << 16);
  if (text == kOk) return;
  if (text.empty()) throw Error(policy.what + " died while it was being set up");
  size_t nl = text.find('\n');
  std::string hint = nl == std::string::npos ? std::string() : text.substr(nl + 1);
  throw Error(text.substr(0, nl), hint);
}

// The two fds from a holder, or false if it went away first; `*kind` is
// the message's letter ("J", or "N": a Tree holder's namespace). Throws when
// `deadline` passes first (a holder still building).
bool receive_fds(int conn, UniqueFd& userns, UniqueFd& mnt, char* kind, Clock::time_point deadline,
                 const HolderPolicy& policy) {
  const auto spin_until = Clock::now() + kAnswerSpin;
  for (pollfd p{conn, POLLIN, 0}; ::poll(&p, 1, 0) == 0 && Clock::now() < spin_until;) ::sched_yield();
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    pollfd p{conn, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0)));
    if (r > 0) break;
    if (r == 0) throw Error("timed out waiting for " + policy.what, policy.hint);
    if (errno != EINTR) throw SysError{errno, "poll", policy.what};
  }
  FdMessage m;
  m.receiving();
  msghdr& msg = m.msg;
  ssize_t n;
  while ((n = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n <= 0) return false;
  if (m.payload[0] == 'B')
    throw Error(policy.busy + " " + std::string(m.payload + 1, static_cast<size_t>(n) - 1) + " on this host",
                policy.hint);
  std::vector<UniqueFd> fds = received_fds(msg);
  if (fds.size() != 2) return false;
  userns = std::move(fds[0]);
  mnt = std::move(fds[1]);
  *kind = m.payload[0];
  return true;
}

}  // namespace

std::chrono::milliseconds configured_linger(const char* env, const char* key, double fallback) {
  auto seconds = [](const std::string& text, const std::string& where) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !std::isfinite(v) || v < 0)
      throw Error(where + ": `" + text + "` is not a number of seconds");
    return v;
  };
  double s = fallback;
  if (const char* value = std::getenv(env); value && *value) {
    s = seconds(value, env);
  } else {
    const hpc::SiteConfig& site = hpc::load_site_config();
    const auto v = site.get(key);
    if (v.size() == 1)
      s = seconds(v[0], "site configuration `" + site.file + "`, " + key);
    else if (!v.empty())
      throw Error("site configuration `" + site.file + "`: " + key + " takes one number");
  }
  return std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

std::string HolderKey::name(int i) const {
  return prefix + "-" + util::keyed_hash_hex(secret, text + '\0' + std::to_string(i));
}

std::string HolderKey::proof(const std::string& name) const {
  return util::keyed_hash_hex(secret, std::string("proof") + '\0' + name);
}

namespace {

enum class Tried { Entered, Foreign, Absent };

// Gets into the holder serving `name`, starting one when nobody does.
// Foreign: the name is held by another uid, or bound by somebody who does
// not listen (rt's holders listen as they bind).
Tried try_name(const std::string& name, const std::string& proof, const HolderPolicy& policy,
               const std::function<void()>& build, Clock::time_point deadline, UniqueFd& conn, UniqueFd& userns,
               UniqueFd& mnt, char* kind) {
  const Address addr = address_of(name);
  auto backoff = std::chrono::microseconds(200);
  int refused = 0;
  int busy = 0;
  for (;;) {
    // Non-blocking: a listener that never accepts (another user's, on a
    // name learned from /proc/net/unix) fills its queue, and a blocking
    // connect would then sleep for good.
    conn = new_socket(true);
    if (::connect(conn.get(), reinterpret_cast<const sockaddr*>(&addr.sa), addr.len) == 0) {
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        throw SysError{errno, "getsockopt(SO_PEERCRED)"};
      if (cred.uid != ::getuid()) {
        util::info("`@" + name + "` is held by uid " + std::to_string(cred.uid) + ", not by you; trying another name");
        return Tried::Foreign;
      }
      ::send(conn.get(), proof.data(), proof.size(), MSG_NOSIGNAL);
      if (receive_fds(conn.get(), userns, mnt, kind, deadline, policy)) return Tried::Entered;
      refused = 0;  // the holder was exiting, or failed to build: start over
    } else if (errno == ECONNREFUSED) {
      if (!policy.may_start) return Tried::Absent;
      // Nobody serves the name: take it, or wait for whoever has it.
      UniqueFd mine = new_socket(true);
      if (::bind(mine.get(), reinterpret_cast<const sockaddr*>(&addr.sa), addr.len) == 0) {
        if (::listen(mine.get(), SOMAXCONN) != 0) throw SysError{errno, "listen", "@" + name};
        util::debug("starting " + policy.what);
        start_holder(std::move(mine), policy, proof, build);
        continue;
      }
      if (errno != EADDRINUSE) throw SysError{errno, "bind", "@" + name};
      if (++refused > kBoundNotListening) {
        util::info("`@" + name + "` is bound by somebody who does not serve it; trying another name");
        return Tried::Foreign;
      }
    } else if (errno == EAGAIN) {
      if (++busy > kBoundNotListening) {
        util::info("`@" + name + "` is bound by somebody whose queue stays full; trying another name");
        return Tried::Foreign;
      }
    } else if (errno != EINTR) {
      throw SysError{errno, "connect", "@" + name};
    }
    if (Clock::now() > deadline) throw Error("timed out waiting for " + policy.what, policy.hint);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(20000));
  }
}

}  // namespace

bool enter_holder(const HolderKey& key, const HolderPolicy& policy, const std::function<void()>& build,
                  HeldTree* tree) {
  const auto deadline = Clock::now() + kEnterTimeout;
  UniqueFd conn, userns, mnt;
  char kind = 0;
  bool entered = false, absent = false;
  for (int i = 0; i < kNames && !entered; ++i) {
    const std::string name = key.name(i);
    const Tried t = try_name(name, key.proof(name), policy, build, deadline, conn, userns, mnt, &kind);
    entered = t == Tried::Entered;
    absent |= t == Tried::Absent;
  }
  if (!entered && absent) throw Error(policy.what + " is not running", policy.hint);
  if (!entered) return false;
  if (::setns(userns.get(), CLONE_NEWUSER) != 0) throw SysError{errno, "setns(CLONE_NEWUSER)", policy.what};
  const bool share = policy.entry == HolderPolicy::Entry::Share || kind == 'N';
  if (share && ::setns(mnt.get(), CLONE_NEWNS) != 0) throw SysError{errno, "setns(CLONE_NEWNS)", policy.what};
  if (policy.entry == HolderPolicy::Entry::Tree) {
    // A copy of this process's own mount namespace, owned by the holder's
    // user namespace, as a directory image's start makes one: the tree is
    // attached there, and the holder's namespace is never entered. Before
    // Linux 5.2, a copy of the holder's namespace, with the tree's root.
    if (::unshare(CLONE_NEWNS) != 0) throw SysError{errno, "unshare(CLONE_NEWNS)", policy.what};
    // A copy made in the holder's own user namespace keeps shared mounts
    // shared: none of this container's mounts may reach the holder's.
    if (share && ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
      throw SysError{errno, "mount(MS_SLAVE)", policy.what};
    report_namespace(conn.get());
    if (tree) {
      tree->attached = share;
      tree->fd = share ? util::open_fd(policy.tree, O_PATH | O_DIRECTORY) : std::move(mnt);
    }
  }
  util::debug("entered " + policy.what);
  return true;
}

bool holder_serving(const HolderKey& key) {
  for (int i = 0; i < kNames; ++i) {
    const Address addr = address_of(key.name(i));
    UniqueFd conn = new_socket(true);
    if (::connect(conn.get(), reinterpret_cast<const sockaddr*>(&addr.sa), addr.len) != 0) continue;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::getuid()) continue;
    ::send(conn.get(), "?", 1, MSG_NOSIGNAL);  // no proof: turned away at once
    return true;
  }
  return false;
}

}  // namespace rt::run
