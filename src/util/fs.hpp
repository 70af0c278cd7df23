// Small file helpers that throw SysError naming the path (any world).
#pragma once
#include <sys/stat.h>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/fd.hpp"

namespace rt::util {

// Opens with O_CLOEXEC always added; throws SysError{errno, "open", path}.
UniqueFd open_fd(const std::string& path, int flags, unsigned mode = 0);
// "dev:ino:size:mtime_ns": changes when the file does (for caches).
std::string file_stamp(const struct stat& st);
UniqueFd open_fd_at(int dirfd, const std::string& path, int flags, unsigned mode = 0);

// Whole file into a string; nullopt if it does not exist (ENOENT/ENOTDIR).
std::optional<std::string> read_file_if_exists(const std::string& path, size_t limit = 1 << 24);
// `expected`: the size the file says it has, read in one go when given.
std::string read_fd(int fd, const std::string& name_for_errors, size_t limit = 1 << 24, size_t expected = 0);
// The same for files of an image or a store, which anybody who made them
// could have made a FIFO or a device: opened non-blocking, and refused
// (rt::Error naming the path) unless a regular file.
std::optional<std::string> read_regular_if_exists(const std::string& path, size_t limit = 1 << 24);
// `fd` (opened O_NONBLOCK) read whole when it is a regular file; throws
// rt::Error naming `name` otherwise.
std::string read_regular_fd(int fd, const std::string& name, size_t limit = 1 << 24);

void write_all(int fd, std::string_view data, const std::string& name_for_errors);
// The same at `offset` (pwrite), the file offset left as it is.
void pwrite_all(int fd, std::string_view data, uint64_t offset, const std::string& name_for_errors);
// Writes `name` in the directory dirfd whole or not at all: a temporary
// name made with O_EXCL|O_NOFOLLOW (nothing planted under it is followed
// or truncated), renamed over it; concurrent writers each leave a whole
// file, the last one wins. False on any error, for caches, which may fail
// silently.
bool write_file_atomic_at(int dirfd, const std::string& name, std::string_view data);
// Makes `name` in dirfd with `data` unless it exists: written whole under a
// private name, then linked into place (linkat(2) never replaces). False
// when it existed; throws SysError on other errors.
bool link_new_file_at(int dirfd, const std::string& name, std::string_view data);
// `name` in dirfd when it is a regular file of the caller's, opened without
// following a symlink; nullopt when it is missing or anything else (a file
// another user could have placed is never read). Throws on read errors.
std::optional<std::string> read_owned_at(int dirfd, const std::string& name, size_t limit = 1 << 24);

// "/proc/self/fd/N": a path naming what fd N refers to, usable as a mount
// source or target (the magic link is followed by mount(2)).
std::string fd_path(int fd);
// The real path of what the open `fd` names (its /proc/self/fd link);
// throws SysError naming `shown` when there is none.
std::string real_path(int fd, const std::string& shown);

// Lexically normalised absolute path: collapses "//", "/./" and "x/.."; no
// symlink is consulted. Relative inputs are made absolute against base.
std::string normalize_path(std::string_view path, std::string_view base = "/");
// True when normalize_path would return `path` as it is.
bool is_normal_path(std::string_view path);

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);

}  // namespace rt::util

namespace rt::util {

// Names in the directory `dirfd` (any open fd of it, O_PATH too), without
// "." and "..". Throws SysError naming `shown`.
std::vector<std::string> list_names(int dirfd, const std::string& shown);

// Removes `name` below dirfd, recursively, never following a symlink, and
// making directories writable first (an image may hold 0555 directories).
// Missing is not an error. Throws SysError naming `shown`.
void remove_tree_at(int dirfd, const std::string& name, const std::string& shown);
void remove_tree(const std::string& path);

}  // namespace rt::util

namespace rt::util {
// One read(2), retried on EINTR; throws SysError naming `name`.
size_t read_some(int fd, void* buf, size_t size, const std::string& name);
// Up to `n` bytes of `fd` from `offset`: fewer only where the file ends.
// Throws SysError naming `name`.
std::string read_at(int fd, uint64_t offset, size_t n, const std::string& name);

// A file in memory (memfd_create), for a child's stderr: the child never
// blocks on it, and it is read back once the child has failed.
UniqueFd memory_file(const std::string& name);
// The first 16 KiB such a file holds, on one line.
std::string memory_file_text(int fd);
}  // namespace rt::util

namespace rt::util {
// getcwd(3), or "/" when it cannot be determined.
std::string current_dir();
// The running program's own path (/proc/self/exe). Throws SysError.
std::string self_program();

// Closes this process's own descriptors above 2 before a container's
// program gets its working directory: every one with FD_CLOEXEC set (a
// descriptor inherited through execve(2) never has it, so those are the
// caller's and pass through: PMI_FD, pipes), or, with `only_stdio`, every
// one. Those in `keep` stay open. Found through /proc/self/fd, else by
// trying each number below the descriptor limit.
void close_own_fds(bool only_stdio, std::initializer_list<int> keep = {});
}  // namespace rt::util

namespace rt::util {
// Replaces this process's command line, as /proc/PID/cmdline and ps(1)
// show it, with `title` (cut to the space the original took): the area
// the kernel shows (/proc/self/stat, arg_start..arg_end) is overwritten.
void set_process_title(const std::string& title);
}  // namespace rt::util

namespace rt::util {
// A private directory beside `dst` (mkdtemp(3), mode 0700), removed with
// what it holds: work there cannot be swapped or read by other users who
// can write DST's directory, and a finished piece is renamed into place.
// A missing directory for DST is refused with a clear message. Those left
// by a killed rt (their `.owner` lock free) are removed by the next one
// made beside them.
class TempDirBeside {
public:
  explicit TempDirBeside(const std::string& dst);
  ~TempDirBeside();
  TempDirBeside(const TempDirBeside&) = delete;
  TempDirBeside& operator=(const TempDirBeside&) = delete;
  std::string path(const char* name) const { return dir_ + "/" + name; }

private:
  std::string dir_;
  UniqueFd owner_;  // `.owner`, locked: a later rt clears the directory once this lock is free
};

// "; no space left on the filesystem of `DIR` (N bytes free)" when the
// filesystem holding `path` is (nearly) full, else "": for the message of a
// helper that failed writing there.
std::string full_disk_note(const std::string& path);

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (call it first in
// main, before other threads start) and has a thread wait for them: on one,
// every TempDirBeside of the process is removed, then the process ends as
// the signal would have ended it.
void clean_up_on_signals();
}  // namespace rt::util
