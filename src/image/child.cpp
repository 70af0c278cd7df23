// Child processes (host); see child.hpp.
#include "image/child.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <utility>

#include "rt/error.hpp"

extern char** environ;

namespace rt::image {

Child::Child(const std::vector<std::string>& argv, Fds fds) : name_(argv.at(0)) {
  std::vector<char*> a;
  for (const auto& x : argv) a.push_back(const_cast<char*>(x.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (fds.in >= 0) posix_spawn_file_actions_adddup2(&fa, fds.in, 0);
  if (fds.out >= 0) posix_spawn_file_actions_adddup2(&fa, fds.out, 1);
  int r = ::posix_spawnp(&pid_, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (r != 0) {
    pid_ = -1;
    throw SysError(r, "spawn", name_);
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
