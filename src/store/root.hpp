// The user's store directory, opened once and checked (host).
//
// Every other user of a shared node can write /var/tmp and /tmp, so the
// store (default /var/tmp/$USER.rt) may have been made by somebody else
// before its owner's first run: a world-writable directory, a symlink to
// one of theirs, a plain file. rt trusts the store only when
//   - the path itself is a directory, not a symlink, owned by the caller
//     and writable by nobody else (it is made 0700 when missing), and
//   - nobody but root and the caller can change any directory on its real
//     path (owned by one of them; writable by others only with the sticky
//     bit, and then the entry below is root's or the caller's),
// so the path names the checked directory for as long as rt runs, and
// nobody else can place anything below it. The store's own subdirectories
// are opened without following a symlink and must be the caller's too.
//
// The store also holds the user's secret (ROOT/secret, 0600): the names of
// holder sockets are keyed with it, so other users cannot compute them.
#pragma once
#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "store/layout.hpp"
#include "util/fd.hpp"

namespace rt::store {

class Root {
public:
  // Opens and checks the store at `path` (made 0700 when missing and
  // `create`); throws rt::Error naming the path, its owner and mode, and
  // what to do. nullopt when it is missing and not to be made.
  static std::optional<Root> open(const std::string& path, bool create);

  // The store of this process: --storage/RT_STORAGE (`storage`, when not
  // empty), else the default; opened once per process.
  static const Root& user(const std::string& storage);
  static const Root* user_if_exists(const std::string& storage);

  // The real path of the checked directory (symlinks above it resolved).
  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }
  std::string sub(std::string_view rel) const { return path_ + "/" + std::string(rel); }

  // The subdirectory `rel` ("a" or "a/b"), made 0700 where missing when
  // `create`; opened without following a symlink at any step and checked
  // to be the caller's. An empty fd when missing and not to be made.
  util::UniqueFd dir(std::string_view rel, bool create) const;

  // The user's secret, 64 hex digits, made on first use.
  const std::string& secret() const;

private:
  Root(std::string path, util::UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  util::UniqueFd fd_;
  mutable std::string secret_;
};

// A file's permission bits as chmod takes them ("0755"), for messages.
std::string mode_of(mode_t m);

// Why a directory may not be trusted as a user's store, or "" when it may:
// `st` is the directory's lstat. Pure, for the checks and their tests.
std::string distrust(const struct stat& st, uid_t me);
// Why the directory `parent` (lstat `pst`) lets somebody else replace its
// entry `child` (lstat `cst`), or "".
std::string distrust_parent(const struct stat& pst, const struct stat& cst, uid_t me);

}  // namespace rt::store
