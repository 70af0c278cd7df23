// Path resolution confined to a root (host, before the container root is entered).
#include "util/inroot.hpp"
#include "util/fs.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <string>
#include <vector>

namespace rt::util {
namespace {

constexpr int kMaxSymlinks = 40;  // as the kernel's MAXSYMLINKS

std::atomic_int_fast8_t g_have_openat2 = 1;

std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) out.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// A link in /proc below its top (fd/N, cwd, root, exe, ns/...): a magic
// link, which the kernel follows to its object, not to its text; refused,
// as RESOLVE_NO_MAGICLINKS refuses it. /proc/self and /proc/thread-self,
// in /proc itself (inode 1), are plain links.
bool magic_link(int dir, int link) {
  struct statfs sf;
  if (::fstatfs(link, &sf) != 0 || sf.f_type != PROC_SUPER_MAGIC) return false;
  struct stat st;
  return ::fstatat(dir, "", &st, AT_EMPTY_PATH) != 0 || st.st_ino != 1;
}

}  // namespace

InRootResult open_in_root_walk(int rootfd, std::string_view path, int flags, bool follow_final) {
  // Directories from the root down; ".." pops, never past the root.
  std::vector<UniqueFd> stack;
  auto current = [&]() { return stack.empty() ? rootfd : stack.back().get(); };
  std::vector<std::string> todo = components(path);
  std::reverse(todo.begin(), todo.end());  // next component at the back
  UniqueFd final_fd;
  int links = 0;
  while (!todo.empty()) {
    std::string name = std::move(todo.back());
    todo.pop_back();
    bool last = todo.empty();
    if (name == ".") continue;
    if (name == "..") {
      if (!stack.empty()) stack.pop_back();
      continue;
    }
    int fd = ::openat(current(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return {UniqueFd(), errno};
    UniqueFd child(fd);
    struct stat st;
    if (::fstatat(fd, "", &st, AT_EMPTY_PATH) < 0) return {UniqueFd(), errno};
    if (S_ISLNK(st.st_mode) && (!last || follow_final)) {
      if (++links > kMaxSymlinks || magic_link(current(), fd)) return {UniqueFd(), ELOOP};
      // Not st_size long: /proc's links say 0.
      std::string target(std::max<size_t>(static_cast<size_t>(st.st_size) + 1, PATH_MAX), '\0');
      ssize_t n = ::readlinkat(fd, "", target.data(), target.size());
      if (n < 0) return {UniqueFd(), errno};
      if (static_cast<size_t>(n) == target.size()) return {UniqueFd(), ENAMETOOLONG};
      target.resize(static_cast<size_t>(n));
      if (!target.empty() && target.front() == '/') stack.clear();
      auto more = components(target);
      for (auto it = more.rbegin(); it != more.rend(); ++it) todo.push_back(std::move(*it));
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      stack.push_back(std::move(child));
    } else if (last) {
      final_fd = std::move(child);
    } else {
      return {UniqueFd(), ENOTDIR};
    }
  }
  if (!final_fd) {
    int fd = current() == AT_FDCWD ? ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)
                                   : ::fcntl(current(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return {UniqueFd(), errno};
    final_fd.reset(fd);
  } else if (flags & O_DIRECTORY) {
    return {UniqueFd(), ENOTDIR};
  }
  if (flags & O_PATH) return {std::move(final_fd), 0};
  // Reopen the object itself (not a path to it) with the wanted flags.
  int fd = ::open(fd_path(final_fd.get()).c_str(), flags | O_CLOEXEC);
  if (fd < 0) return {UniqueFd(), errno};
  return {UniqueFd(fd), 0};
}

InRootResult open_in_root(int rootfd, std::string_view path, int flags, bool follow_final) {
  if (g_have_openat2) {
    open_how how{};
    how.flags = static_cast<__u64>(flags | O_CLOEXEC | (follow_final ? 0 : O_NOFOLLOW));
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    std::string p(path.empty() ? "." : path);
    long fd = ::syscall(SYS_openat2, rootfd, p.c_str(), &how, sizeof how);
    if (fd >= 0) return {UniqueFd(static_cast<int>(fd)), 0};
    if (errno != ENOSYS) return {UniqueFd(), errno};
    g_have_openat2 = 0;
  }
  return open_in_root_walk(rootfd, path, flags, follow_final);
}

}  // namespace rt::util
