// Small file helpers (any world).
#include "util/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::util {

std::string file_stamp(const struct stat& st) {
  // On every start, for each file a cached plan was made from: no streams,
  // no temporaries.
  std::string out;
  out.reserve(64);
  char num[24];
  auto put = [&](auto v, bool colon) {
    out.append(num, std::to_chars(num, num + sizeof num, v).ptr);
    if (colon) out += ':';
  };
  put(static_cast<unsigned long long>(st.st_dev), true);
  put(static_cast<unsigned long long>(st.st_ino), true);
  put(static_cast<long long>(st.st_size), true);
  put(static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec, false);
  return out;
}

UniqueFd open_fd(const std::string& path, int flags, unsigned mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) throw SysError{errno, "open", path};
  return UniqueFd(fd);
}

UniqueFd open_fd_at(int dirfd, const std::string& path, int flags, unsigned mode) {
  int fd = ::openat(dirfd, path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) throw SysError{errno, "openat", path};
  return UniqueFd(fd);
}

std::string read_fd(int fd, const std::string& name, size_t limit, size_t expected) {
  std::string out;
  // Pieces as large as the file says it is: one read, and one that ends it.
  const size_t piece = std::max<size_t>(8192, std::min(expected, limit) + 1);
  for (;;) {
    const size_t at = out.size();
    out.resize(at + piece);
    const ssize_t n = ::read(fd, out.data() + at, piece);
    out.resize(at + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SysError{errno, "read", name};
    }
    if (n == 0) break;
    if (out.size() > limit) throw Error("`" + name + "` is larger than " + std::to_string(limit) + " bytes");
  }
  return out;
}

std::optional<std::string> read_file_if_exists(const std::string& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw SysError{errno, "open", path};
  }
  UniqueFd owner(fd);
  return read_fd(fd, path, limit);
}

std::optional<std::string> read_regular_if_exists(const std::string& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw SysError{errno, "open", path};
  }
  UniqueFd owner(fd);
  return read_regular_fd(fd, path, limit);
}

std::string read_regular_fd(int fd, const std::string& name, size_t limit) {
  struct stat st;
  if (::fstat(fd, &st) != 0) throw SysError{errno, "stat", name};
  if (!S_ISREG(st.st_mode))
    throw Error("`" + name + "` is not a regular file (" +
                (S_ISFIFO(st.st_mode)   ? "a FIFO"
                 : S_ISDIR(st.st_mode)  ? "a directory"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "a device") +
                "): not read");
  return read_fd(fd, name, limit, static_cast<size_t>(st.st_size));
}

void write_all(int fd, std::string_view data, const std::string& name) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SysError{errno, "write", name};
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void pwrite_all(int fd, std::string_view data, uint64_t offset, const std::string& name) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SysError{n < 0 ? errno : EIO, "write", name};
    done += static_cast<size_t>(n);
  }
}

namespace {

// A new file `name` in dirfd holding `data`, under a temporary name that
// nobody else can have planted (O_EXCL|O_NOFOLLOW), then `publish`ed
// (returns its errno, 0 on success); the temporary name is always removed.
int with_temporary_at(int dirfd, const std::string& name, std::string_view data,
                      int (*publish)(int dirfd, const char* tmp, const char* name)) {
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
    tmp = "." + name + "." + std::to_string(::getpid()) + "." + std::to_string(attempt) + ".tmp";
    fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return errno;
  }
  if (fd < 0) return EEXIST;
  int err = 0;
  try {
    write_all(fd, data, tmp);
  } catch (const SysError& e) {
    err = e.errnum();
  }
  if (::close(fd) != 0 && !err) err = errno;
  if (!err) err = publish(dirfd, tmp.c_str(), name.c_str());
  ::unlinkat(dirfd, tmp.c_str(), 0);
  return err;
}

}  // namespace

bool write_file_atomic_at(int dirfd, const std::string& name, std::string_view data) {
  return with_temporary_at(dirfd, name, data, [](int d, const char* tmp, const char* n) {
           return ::renameat(d, tmp, d, n) == 0 ? 0 : errno;
         }) == 0;
}

bool link_new_file_at(int dirfd, const std::string& name, std::string_view data) {
  int err = with_temporary_at(dirfd, name, data, [](int d, const char* tmp, const char* n) {
    return ::linkat(d, tmp, d, n, 0) == 0 ? 0 : errno;
  });
  if (err == EEXIST) return false;
  if (err) throw SysError(err, "link", name);
  return true;
}

std::optional<std::string> read_owned_at(int dirfd, const std::string& name, size_t limit) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  UniqueFd owner(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::getuid()) return std::nullopt;
  return read_fd(fd, name, limit, static_cast<size_t>(st.st_size));
}

std::string fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

std::string real_path(int fd, const std::string& shown) {
  char buf[4096];
  ssize_t n = ::readlink(fd_path(fd).c_str(), buf, sizeof buf - 1);
  if (n <= 0 || buf[0] != '/') throw SysError{errno, "readlink", fd_path(fd) + " (" + shown + ")"};
  return std::string(buf, static_cast<size_t>(n));
}

bool is_normal_path(std::string_view path) {
  if (path == "/") return true;
  if (path.empty() || path.front() != '/' || path.back() == '/') return false;
  for (size_t at = path.find('/'); at != std::string_view::npos; at = path.find('/', at + 1)) {
    const std::string_view part = path.substr(at + 1, path.find('/', at + 1) - at - 1);
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

std::string normalize_path(std::string_view path, std::string_view base) {
  if (is_normal_path(path)) return std::string(path);
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

}  // namespace rt::util

#include <dirent.h>

namespace rt::util {

std::vector<std::string> list_names(int dirfd, const std::string& shown) {
  // A fresh fd: readdir needs one opened for reading, and closedir closes it.
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw SysError{errno, "open", shown};
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    throw SysError{errno, "fdopendir", shown};
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

namespace {

// Opens the directory `name` below `dirfd` for removing what it holds,
// never through a symlink, giving it the owner bits it lacks (an image may
// hold 0555 or 0000 directories).
UniqueFd open_for_removal(int dirfd, const std::string& name, const std::string& shown, struct stat& st) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == EACCES && ::fchmodat(dirfd, name.c_str(), 0700, 0) == 0)
    fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw SysError{errno, "open", shown};
  UniqueFd dir(fd);
  if (::fstat(fd, &st) != 0) throw SysError{errno, "stat", shown};
  if ((st.st_mode & 0700) != 0700) ::fchmod(fd, 0700);
  return dir;
}

}  // namespace

void remove_tree_at(int dirfd, const std::string& name, const std::string& shown) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return;
    throw SysError{errno, "stat", shown};
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) throw SysError{errno, "unlink", shown};
    return;
  }
  // Depth first with one directory open at a time, so that no depth runs
  // out of descriptors: down into a subdirectory, back up through ".."
  // once a directory is empty. Each level's identity is kept and ".." must
  // match it: a directory moved meanwhile (one inside an image may be
  // world-writable) stops the removal rather than lead it elsewhere.
  struct DirLevel {
    std::string name;
    dev_t dev;
    ino_t ino;
  };
  std::vector<DirLevel> path;
  UniqueFd cur = open_for_removal(dirfd, name, shown, st);
  path.push_back({name, st.st_dev, st.st_ino});
  std::string where = shown;
  for (;;) {
    std::string sub;
    for (const auto& n : list_names(cur.get(), where)) {
      struct stat est;
      if (::fstatat(cur.get(), n.c_str(), &est, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        throw SysError{errno, "stat", where + "/" + n};
      }
      if (S_ISDIR(est.st_mode)) {
        if (sub.empty()) sub = n;
      } else if (::unlinkat(cur.get(), n.c_str(), 0) != 0 && errno != ENOENT) {
        throw SysError{errno, "unlink", where + "/" + n};
      }
    }
    if (!sub.empty()) {
      where += "/" + sub;
      cur = open_for_removal(cur.get(), sub, where, st);
      path.push_back({sub, st.st_dev, st.st_ino});
      continue;
    }
    // `cur` is empty: remove it from its parent.
    const std::string leaf = path.back().name;
    path.pop_back();
    if (path.empty()) {
      if (::unlinkat(dirfd, leaf.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) throw SysError{errno, "rmdir", where};
      return;
    }
    const std::string parent_shown = where.substr(0, where.size() - leaf.size() - 1);
    UniqueFd up(::openat(cur.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!up) throw SysError{errno, "open", parent_shown};
    if (::fstat(up.get(), &st) != 0) throw SysError{errno, "stat", parent_shown};
    if (st.st_dev != path.back().dev || st.st_ino != path.back().ino)
      throw Error("`" + where + "` was moved while it was being removed; stopped");
    cur = std::move(up);
    if (::unlinkat(cur.get(), leaf.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      throw SysError{errno, "rmdir", where};
    where = parent_shown;
  }
}

void remove_tree(const std::string& path) {
  std::string norm = normalize_path(path);
  size_t slash = norm.rfind('/');
  std::string parent = slash == 0 ? "/" : norm.substr(0, slash);
  UniqueFd dir(::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) return;
    throw SysError{errno, "open", parent};
  }
  remove_tree_at(dir.get(), norm.substr(slash + 1), norm);
}

}  // namespace rt::util

namespace rt::util {
size_t read_some(int fd, void* buf, size_t size, const std::string& name) {
  for (;;) {
    ssize_t n = ::read(fd, buf, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) throw SysError{errno, "read", name};
  }
}

UniqueFd memory_file(const std::string& name) {
  const int fd = static_cast<int>(::syscall(SYS_memfd_create, name.c_str(), 1U /* MFD_CLOEXEC */));
  if (fd < 0) throw SysError{errno, "memfd_create", name};
  return UniqueFd(fd);
}

std::string memory_file_text(int fd) {
  std::string text;
  try {
    text = read_at(fd, 0, 16384, "stderr");
  } catch (const Error&) {
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  return trim(text);
}

std::string read_at(int fd, uint64_t offset, size_t n, const std::string& name) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw SysError{errno, "read", name};
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}
}  // namespace rt::util

namespace rt::util {
std::string self_program() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw SysError{errno, "readlink", "/proc/self/exe"};
  return std::string(buf, static_cast<size_t>(n));
}

std::string current_dir() {
  char buf[4096];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string("/");
}

void close_own_fds(bool only_stdio, std::initializer_list<int> keep) {
  auto own = [&](int fd) {
    if (fd <= 2 || std::find(keep.begin(), keep.end(), fd) != keep.end()) return false;
    if (only_stdio) return true;
    int flags = ::fcntl(fd, F_GETFD);
    return flags >= 0 && (flags & FD_CLOEXEC);
  };
  std::vector<int> found;
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    alignas(8) char buf[4096];
    long n;
    while ((n = ::syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
      for (long at = 0; at < n;) {
        const auto* d = reinterpret_cast<const dirent64*>(buf + at);
        at += d->d_reclen;
        char* end = nullptr;
        const long fd = std::strtol(d->d_name, &end, 10);
        if (end != d->d_name && *end == '\0' && fd != dir && own(static_cast<int>(fd)))
          found.push_back(static_cast<int>(fd));
      }
    }
    ::close(dir);
    if (n == 0) {
      for (int fd : found) ::close(fd);
      return;
    }
  }
  // No /proc: every number below the limit.
  rlimit lim{};
  const rlim_t top = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 ? std::min<rlim_t>(lim.rlim_cur, 1 << 20) : 1024;
  for (int fd = 3; fd < static_cast<int>(top); ++fd)
    if (own(fd)) ::close(fd);
}
}  // namespace rt::util

#include <cstring>

namespace rt::util {
void set_process_title(const std::string& title) {
  // proc(5): fields 48 and 49 of /proc/self/stat, counted from 1; the
  // command name (field 2) may hold spaces, so count after its ')'.
  auto stat = read_file_if_exists("/proc/self/stat", 4096);
  if (!stat) return;
  size_t at = stat->rfind(')');
  if (at == std::string::npos) return;
  auto fields = split(stat->substr(at + 2), ' ');  // from field 3
  if (fields.size() < 47) return;
  unsigned long long begin = std::strtoull(fields[45].c_str(), nullptr, 10);
  unsigned long long end = std::strtoull(fields[46].c_str(), nullptr, 10);
  if (begin == 0 || end <= begin) return;
  char* area = reinterpret_cast<char*>(static_cast<uintptr_t>(begin));
  size_t size = static_cast<size_t>(end - begin);
  size_t n = std::min(title.size(), size - 1);
  std::memcpy(area, title.data(), n);
  std::memset(area + n, 0, size - n);
}
}  // namespace rt::util

namespace rt::util {
namespace {

// The private directories of this process, for the signal thread. Never
// freed: the thread may use it until the process ends.
std::mutex& temps_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<std::string>& temps() {
  static auto* v = new std::vector<std::string>;
  return *v;
}

constexpr char kOwner[] = ".owner";  // locked while its process lives

// Removes the caller's `.rt-tmp.*` directories in `parent` whose process is
// gone (killed, or the machine went down): their `.owner` lock is free.
// A directory without `.owner` is being made, or is not one of these.
void clear_stale_beside(const std::string& parent) {
  UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return;
  std::vector<std::string> names;
  try {
    names = list_names(dir.get(), parent);
  } catch (const Error&) {
    return;
  }
  for (const auto& n : names) {
    if (!n.starts_with(".rt-tmp.")) continue;
    struct stat st;
    if (::fstatat(dir.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::geteuid())
      continue;
    UniqueFd d(::openat(dir.get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!d) continue;
    UniqueFd owner(::openat(d.get(), kOwner, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!owner || ::flock(owner.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive, or not ours to judge
    try {
      remove_tree_at(dir.get(), n, parent + "/" + n);
    } catch (const Error&) {
    }
  }
}

}  // namespace

TempDirBeside::TempDirBeside(const std::string& dst) {
  const size_t slash = dst.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dst.substr(0, slash);
  if (!is_directory(parent))
    throw Error("cannot write `" + dst + "`: there is no directory `" + parent + "`", "make it first");
  clear_stale_beside(parent);
  std::string tmpl = (parent == "/" ? "" : parent) + "/.rt-tmp.XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw SysError{errno, "mkdtemp", parent + "/.rt-tmp.XXXXXX"};
  dir_ = tmpl;
  // The lock is taken before `.owner` appears under its name: a sweep
  // never sees it unlocked while this process lives.
  const std::string pending = dir_ + "/.owner.new";
  owner_ = UniqueFd(::open(pending.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!owner_ || ::flock(owner_.get(), LOCK_EX) != 0 || ::rename(pending.c_str(), (dir_ + "/" + kOwner).c_str()) != 0) {
    int e = errno;
    ::rmdir(dir_.c_str());
    throw SysError{e, "create", pending};
  }
  std::lock_guard<std::mutex> g(temps_mutex());
  temps().push_back(dir_);
}

TempDirBeside::~TempDirBeside() {
  {
    std::lock_guard<std::mutex> g(temps_mutex());
    std::erase(temps(), dir_);
  }
  try {
    remove_tree(dir_);
  } catch (...) {
  }
}

std::string full_disk_note(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) != 0) return {};
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes >= (16u << 20)) return {};
  return "; no space left on the filesystem of `" + dir + "` (" + std::to_string(free_bytes) + " bytes free)";
}

void clean_up_on_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    if (::sigwait(&set, &sig) != 0) return;
    {
      std::lock_guard<std::mutex> g(temps_mutex());
      for (const auto& d : temps()) {
        try {
          remove_tree(d);
        } catch (...) {
        }
      }
    }
    // Ends as the signal would have ended it (status 128+N); children die
    // with it (PR_SET_PDEATHSIG).
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
  }).detach();
}
}  // namespace rt::util
