// Advisory file locks (flock(2)) held for the lifetime of the object (host).
#pragma once
#include <string>

#include "util/fd.hpp"

namespace rt::app {

using util::UniqueFd;

class FileLock {
public:
  enum class Mode { Shared, Exclusive };
  // Creates the lock file if needed and waits for the lock.
  FileLock(const std::string& path, Mode mode);
  // Tries once; check locked().
  static FileLock try_lock(const std::string& path, Mode mode);
  bool locked() const { return static_cast<bool>(fd_); }

private:
  FileLock() = default;
  UniqueFd fd_;
};

}  // namespace rt::app
