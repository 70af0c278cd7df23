// Child processes (host); see child.hpp.
#include "image/child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "rt/error.hpp"

namespace rt::image {

Child::Child(const std::vector<std::string>& argv, Fds fds) : name_(argv.at(0)) {
  std::vector<char*> a;
  for (const auto& x : argv) a.push_back(const_cast<char*>(x.c_str()));
  a.push_back(nullptr);
  // The child reports a failed exec through this pipe (closed on success).
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw SysError{errno, "pipe", name_};
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    int e = errno;
    ::close(report[0]);
    ::close(report[1]);
    throw SysError(e, "fork", name_);
  }
  if (pid_ == 0) {
    // Dies with rt, even by SIGKILL: no orphaned mksquashfs writing on.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // rt-image blocks some for its signal thread
    ::signal(SIGPIPE, SIG_DFL);
    if ((fds.in >= 0 && ::dup2(fds.in, 0) < 0) || (fds.out >= 0 && ::dup2(fds.out, 1) < 0) ||
        (fds.err >= 0 && ::dup2(fds.err, 2) < 0)) {
      int e = errno;
      (void)!::write(report[1], &e, sizeof e);
      ::_exit(127);
    }
    ::execvp(a[0], a.data());
    int e = errno;
    (void)!::write(report[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(report[1]);
  int e = 0;
  ssize_t n;
  while ((n = ::read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    throw SysError(e, "spawn", name_);
  }
}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

int Child::wait() {
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0)
    if (errno != EINTR) throw SysError{errno, "waitpid", name_};
  pid_ = -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int run_program(const std::vector<std::string>& argv, ChildFds fds) { return Child(argv, fds).wait(); }

}  // namespace rt::image
