// Entering the user + mount namespace (host -> namespace).
#include "run/userns.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace rt::run {
namespace {

void write_proc(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw SysError{errno, "open", path};
  ssize_t n = ::write(fd, text.data(), text.size());
  int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) throw SysError(e, "write", path);
}

}  // namespace

void enter_user_namespace(uid_t outer_uid, uid_t inner_uid, gid_t outer_gid, gid_t inner_gid) {
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) throw SysError{errno, "unshare(CLONE_NEWUSER|CLONE_NEWNS)"};
  write_proc("/proc/self/setgroups", "deny");
  write_proc("/proc/self/uid_map", std::to_string(inner_uid) + " " + std::to_string(outer_uid) + " 1");
  write_proc("/proc/self/gid_map", std::to_string(inner_gid) + " " + std::to_string(outer_gid) + " 1");
}

void enter_nested_user_namespace(uid_t uid, gid_t gid) {
  if (::unshare(CLONE_NEWUSER) != 0) throw SysError{errno, "unshare(CLONE_NEWUSER)"};
  write_proc("/proc/self/setgroups", "deny");
  write_proc("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1");
  write_proc("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
}

namespace {

volatile sig_atomic_t g_forward_to = 0;

void forward(int sig) {
  if (g_forward_to > 0) ::kill(g_forward_to, sig);
}

// Forks; the parent forwards the usual signals to the child, waits for it
// and exits as it did. Returns in the child (with `pdeathsig` when set).
void fork_and_wait(bool pdeathsig, const std::string& title) {
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw SysError{errno, "fork"};
  if (pid == 0) {
    if (pdeathsig) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      // (A namespace's init sees no parent: getppid() is 0.)
      if (::getpid() != 1 && ::getppid() != parent) ::_exit(kExitRtFailed);
    }
    return;
  }
  util::close_own_fds(true);
  util::set_process_title(title);  // not the command line that started rt
  ::prctl(PR_SET_DUMPABLE, 0);
  g_forward_to = pid;
  struct sigaction sa {};
  sa.sa_handler = forward;
  ::sigemptyset(&sa.sa_mask);
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGCONT, SIGWINCH})
    ::sigaction(sig, &sa, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (;;) {
    int status = 0;
    const pid_t got = ::wait(&status);  // the init reaps orphans too
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) ::_exit(kExitRtFailed);
    if (got != pid) continue;
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
}

}  // namespace

void enter_net_ipc_namespaces(bool net, bool ipc) {
  if (!net && !ipc) return;
  if (::unshare((net ? CLONE_NEWNET : 0) | (ipc ? CLONE_NEWIPC : 0)) != 0)
    throw SysError{errno, net ? "unshare(CLONE_NEWNET)" : "unshare(CLONE_NEWIPC)"};
  if (!net) return;
  // A new network namespace's loopback is down: bring it up, as a host's is.
  util::UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) throw SysError{errno, "socket", "--net none"};
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) throw SysError{errno, "ioctl(SIOCGIFFLAGS)", "lo"};
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (::ioctl(s.get(), SIOCSIFFLAGS, &ifr) != 0) throw SysError{errno, "ioctl(SIOCSIFFLAGS)", "lo"};
}

void enter_pid_namespace(const std::string& title, bool own_proc) {
  if (::unshare(CLONE_NEWPID) != 0) throw SysError{errno, "unshare(CLONE_NEWPID)"};
  fork_and_wait(true, title);  // the caller keeps the namespace's init, which dies with it
  // The namespace's own /proc, in a mount namespace of its own (a shared
  // container's stays as it is): with the host's, /proc/PID of a pid the
  // program gets from getpid(2) is another process (CUDA fails so).
  if (own_proc &&
      (::unshare(CLONE_NEWNS) != 0 || ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0))
    util::warn(std::string("the PID namespace keeps the host's /proc (") + std::strerror(errno) +
               "): a program reading /proc/PID for its own pid reads another process");
  fork_and_wait(false, title);  // the init keeps the program's process
}

}  // namespace rt::run
