// Small file helpers (any world).
#include "util/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "rt/error.hpp"

namespace rt::util {

UniqueFd open_fd(const std::string& path, int flags, unsigned mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) throw SysError("open", path);
  return UniqueFd(fd);
}

UniqueFd open_fd_at(int dirfd, const std::string& path, int flags, unsigned mode) {
  int fd = ::openat(dirfd, path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) throw SysError("openat", path);
  return UniqueFd(fd);
}

std::string read_fd(int fd, const std::string& name, size_t limit) {
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SysError("read", name);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit) throw Error("`" + name + "` is larger than " + std::to_string(limit) + " bytes");
  }
  return out;
}

std::optional<std::string> read_file_if_exists(const std::string& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw SysError("open", path);
  }
  UniqueFd owner(fd);
  return read_fd(fd, path, limit);
}

void write_all(int fd, std::string_view data, const std::string& name) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SysError("write", name);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

std::string normalize_path(std::string_view path, std::string_view base) {
  std::string joined;
  if (path.empty() || path.front() != '/') {
    joined.assign(base);
    joined += '/';
  }
  joined += path;
  std::vector<std::string_view> parts;
  std::string_view rest = joined;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (auto p : parts) {
    out += '/';
    out += p;
  }
  return out.empty() ? "/" : out;
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace rt::util
