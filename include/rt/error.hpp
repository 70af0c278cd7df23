// rt's error family: every failure names the call, the paths and the reason.
#pragma once
#include <stdexcept>
#include <string>

namespace rt {

// Exit codes are interface (documented in rt-exec(1)).
inline constexpr int kExitRtFailed = 125;  // rt failed before exec
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitNotFound = 127;

class Error : public std::runtime_error {
public:
  explicit Error(std::string message, std::string hint = {}, int exit_code = kExitRtFailed);
  const std::string& hint() const noexcept { return hint_; }
  int exit_code() const noexcept { return exit_code_; }

private:
  std::string hint_;
  int exit_code_;
};

// A failed system call: "CALL `PATH`[ on `PATH2`]: strerror", plus a hint
// for errnos whose usual cause is known. It takes the errno saved right
// after the call; with braces, `throw SysError{errno, "mkdir", dir + "/x"}`
// reads errno before the paths are built (list-initialisation evaluates
// left to right), so no allocation on the way can change it.
class SysError : public Error {
public:
  SysError(int errnum, std::string call, std::string path = {}, std::string path2 = {});
  int errnum() const noexcept { return errnum_; }

private:
  int errnum_;
};

// Prints "rt: error: WHAT" and "rt: hint: HINT" to stderr, with the rank
// ("rt[17]: ") under a launcher.
void print_error(const Error& e);

// Thrown by exec when IMAGE is neither a path nor in the store: the
// program may pull it and try again.
struct ImageNotFound : Error {
  ImageNotFound(std::string ref_, bool tagged_, const std::string& message, const std::string& hint)
      : Error(message, hint), ref(std::move(ref_)), tagged(tagged_) {}
  std::string ref;
  bool tagged;  // the store has REF with a tag: the user meant that, not a pull
};

}  // namespace rt
