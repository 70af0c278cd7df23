// Child processes (host): started from argv (PATH search, no shell: every
// argument is a word), with stdin/stdout redirected where asked, killed and
// reaped when their owner goes out of scope without waiting for them, and
// killed by the kernel when rt dies (PR_SET_PDEATHSIG), even by SIGKILL.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace rt::image {

struct ChildFds {
  int in = -1;   // the child's stdin (-1: ours)
  int out = -1;  // the child's stdout (-1: ours)
  int err = -1;  // the child's stderr (-1: ours)
};

class Child {
public:
  using Fds = ChildFds;
  // Throws SysError{errno, "spawn", argv[0]}.
  explicit Child(const std::vector<std::string>& argv, Fds fds = {});
  ~Child();  // SIGKILL and reap, unless waited for
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Waits for it; its exit status as the shell reports it (128+N for
  // signal N). Throws SysError{errno, "waitpid"}.
  int wait();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

private:
  pid_t pid_ = -1;
  std::string name_;
};

// Runs argv to its end; its exit status as Child::wait gives it.
int run_program(const std::vector<std::string>& argv, ChildFds fds = {});

}  // namespace rt::image
