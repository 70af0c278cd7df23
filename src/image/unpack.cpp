// Applying image layers to a directory tree (host).
#include "image/unpack.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/inroot.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::image {

using util::UniqueFd;

bool split_entry_path(const std::string& path, std::vector<std::string>& comps) {
  comps.clear();
  if (!path.empty() && path.front() == '/') return false;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string c = path.substr(i, j - i);
    if (c == "..") return false;
    if (!c.empty() && c != ".") comps.push_back(std::move(c));
    i = j + 1;
  }
  return true;
}

namespace {

std::string join(const std::vector<std::string>& comps, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += '/';
    s += comps[i];
  }
  return s;
}

// Feeds libarchive from a ReadFn, keeping any exception for the caller.
struct Source {
  const ReadFn* read;
  std::vector<char> buf = std::vector<char>(1 << 20);
  std::exception_ptr error;
};

la_ssize_t source_read(archive* a, void* client, const void** out) {
  auto* s = static_cast<Source*>(client);
  try {
    size_t n = (*s->read)(s->buf.data(), s->buf.size());
    *out = s->buf.data();
    return static_cast<la_ssize_t>(n);
  } catch (...) {
    s->error = std::current_exception();
    archive_set_error(a, EIO, "read failed");
    return -1;
  }
}

} // namespace

TreeWriter::TreeWriter(const std::string& root, std::string image_name, uint64_t max_bytes)
    : root_path_(root), image_(std::move(image_name)), max_bytes_(max_bytes) {
  root_ = util::open_fd(root, O_PATH | O_DIRECTORY);
}

std::string TreeWriter::err_prefix(const std::string& layer, const std::string& path) const {
  return "image `" + image_ + "` layer `" + layer + "` entry " + util::quoted(path) + ": ";
}

void TreeWriter::invalidate_parent_cache() {
  cached_parent_.clear();
  cached_parent_fd_.reset();
}

// The directory that will hold comps.back(), made (mkdir -p) when missing.
int TreeWriter::parent_fd(const std::vector<std::string>& comps, const std::string& layer,
                          const std::string& path) {
  std::string parent = join(comps, comps.size() - 1);
  if (cached_parent_fd_ && parent == cached_parent_) return cached_parent_fd_.get();
  auto r = util::open_in_root(root_.get(), parent, O_PATH | O_DIRECTORY);
  if (!r.fd && r.err == ENOENT) {
    // Tar streams may omit directory entries: make the missing ones.
    UniqueFd dir(::fcntl(root_.get(), F_DUPFD_CLOEXEC, 0));
    for (size_t i = 0; i + 1 < comps.size(); ++i) {
      auto next = util::open_in_root(root_.get(), join(comps, i + 1), O_PATH | O_DIRECTORY);
      if (!next.fd && next.err == ENOENT) {
        if (::mkdirat(dir.get(), comps[i].c_str(), 0700) != 0 && errno != EEXIST)
          throw Error(err_prefix(layer, path) + "cannot make directory `" + join(comps, i + 1) + "`: " +
                      std::strerror(errno));
        dir_modes_.try_emplace(join(comps, i + 1), 0755);
        next = util::open_in_root(root_.get(), join(comps, i + 1), O_PATH | O_DIRECTORY);
      }
      if (!next.fd)
        throw Error(err_prefix(layer, path) + "`" + join(comps, i + 1) + "` is not a directory" +
                    (next.err == ENOENT ? " (a symlink to a path the image lacks)" : ": " + std::string(std::strerror(next.err))));
      dir = std::move(next.fd);
    }
    r.fd = std::move(dir);
    r.err = 0;
  }
  if (!r.fd)
    throw Error(err_prefix(layer, path) + "parent `" + parent + "`: " + std::strerror(r.err));
  cached_parent_ = parent;
  cached_parent_fd_ = std::move(r.fd);
  return cached_parent_fd_.get();
}

// Makes room for a new entry `name`: removes what is there, except an
// existing directory when the new entry is a directory too (they merge).
void TreeWriter::clear_for(int dirfd, const std::string& name, bool keep_dir, const std::string& shown) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (keep_dir && S_ISDIR(st.st_mode)) return;
  util::remove_tree_at(dirfd, name, shown);
  invalidate_parent_cache();
}

void TreeWriter::opaque(int dirfd, const std::string& dir_path, const std::string& shown) {
  std::vector<std::string> victims;
  for (auto& n : util::list_names(dirfd, shown))
    if (!made_this_layer_.count(dir_path.empty() ? n : dir_path + "/" + n)) victims.push_back(std::move(n));
  for (const auto& n : victims) util::remove_tree_at(dirfd, n, shown + "/" + n);
  if (!victims.empty()) invalidate_parent_cache();
}

void TreeWriter::apply_entry(archive* a, archive_entry* e, const std::string& layer) {
  const char* raw = archive_entry_pathname(e);
  if (!raw) throw Error("image `" + image_ + "` layer `" + layer + "`: an entry has no name");
  const std::string path = raw;
  std::vector<std::string> comps;
  if (!split_entry_path(path, comps))
    throw Error(err_prefix(layer, path) + "absolute or `..` paths are not allowed in a layer");
  ++stats_.entries;
  if (comps.empty()) return;  // the root itself
  const std::string entry_path = join(comps, comps.size());
  const std::string& name = comps.back();
  const std::string shown = root_path_ + "/" + entry_path;

  // Whiteouts (OCI image spec, layer.md "Whiteouts").
  if (name.starts_with(".wh.")) {
    ++stats_.whiteouts;
    std::vector<std::string> pcomps(comps.begin(), comps.end() - 1);
    pcomps.push_back("x");
    int dirfd = parent_fd(pcomps, layer, path);
    if (name == ".wh..wh..opq") {
      opaque(dirfd, join(comps, comps.size() - 1), shown);
    } else {
      std::string victim = name.substr(4);
      if (victim.empty() || victim == "." || victim == "..")
        throw Error(err_prefix(layer, path) + "malformed whiteout");
      util::remove_tree_at(dirfd, victim, shown);
      invalidate_parent_cache();
    }
    return;
  }

  int dirfd = parent_fd(comps, layer, path);
  const char* n = name.c_str();
  const mode_t type = archive_entry_filetype(e);
  const mode_t perm = archive_entry_perm(e) & 01777;  // setuid/setgid dropped
  made_this_layer_.insert(entry_path);

  if (const char* link = archive_entry_hardlink(e)) {
    std::vector<std::string> tcomps;
    if (!split_entry_path(link, tcomps) || tcomps.empty())
      throw Error(err_prefix(layer, path) + "hard link target " + util::quoted(link) + " is outside the image");
    auto t = util::open_in_root(root_.get(), join(tcomps, tcomps.size()), O_PATH, /*follow_final=*/false);
    if (!t.fd)
      throw Error(err_prefix(layer, path) + "hard link target " + util::quoted(link) + ": " + std::strerror(t.err));
    struct stat st;
    if (::fstat(t.fd.get(), &st) != 0 || S_ISDIR(st.st_mode))
      throw Error(err_prefix(layer, path) + "hard link target " + util::quoted(link) + " is a directory");
    clear_for(dirfd, name, false, shown);
    dirfd = parent_fd(comps, layer, path);
    if (::linkat(AT_FDCWD, util::fd_path(t.fd.get()).c_str(), dirfd, n, AT_SYMLINK_FOLLOW) != 0)
      throw SysError("link", shown);
    return;
  }

  switch (type) {
    case AE_IFDIR: {
      clear_for(dirfd, name, true, shown);
      dirfd = parent_fd(comps, layer, path);
      if (::mkdirat(dirfd, n, 0700) != 0 && errno != EEXIST) throw SysError("mkdir", shown);
      dir_modes_[entry_path] = perm;
      return;
    }
    case AE_IFREG: {
      clear_for(dirfd, name, false, shown);
      dirfd = parent_fd(comps, layer, path);
      int fd = ::openat(dirfd, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) throw SysError("create", shown);
      UniqueFd file(fd);
      const void* buf;
      size_t size;
      la_int64_t offset;
      int64_t end = 0;
      for (;;) {
        int r = archive_read_data_block(a, &buf, &size, &offset);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN)
          throw Error(err_prefix(layer, path) + "cannot read file data: " + archive_error_string(a));
        stats_.bytes += size;
        if (max_bytes_ && stats_.bytes > max_bytes_)
          throw Error("image `" + image_ + "` is larger than the limit of " + std::to_string(max_bytes_) +
                      " bytes unpacked (at layer `" + layer + "` entry " + util::quoted(path) + ")",
                      "raise it with --max-size if the image is genuine");
        const char* p = static_cast<const char*>(buf);
        while (size > 0) {
          ssize_t w = ::pwrite(fd, p, size, offset);
          if (w < 0) {
            if (errno == EINTR) continue;
            throw SysError("write", shown);
          }
          p += w;
          offset += w;
          size -= static_cast<size_t>(w);
        }
        end = std::max<int64_t>(end, offset);
      }
      // Sparse files end in a hole: the size comes from the header.
      if (archive_entry_size(e) > end && ::ftruncate(fd, archive_entry_size(e)) != 0)
        throw SysError("truncate", shown);
      if (::fchmod(fd, perm) != 0) throw SysError("chmod", shown);
      timespec times[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
      ::futimens(fd, times);
      return;
    }
    case AE_IFLNK: {
      const char* target = archive_entry_symlink(e);
      if (!target) throw Error(err_prefix(layer, path) + "symlink without a target");
      clear_for(dirfd, name, false, shown);
      dirfd = parent_fd(comps, layer, path);
      // Any target is fine: links are only ever resolved inside the root
      // (here with RESOLVE_IN_ROOT, in the container after pivot_root).
      if (::symlinkat(target, dirfd, n) != 0) throw SysError("symlink", shown);
      timespec times[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
      ::utimensat(dirfd, n, times, AT_SYMLINK_NOFOLLOW);
      return;
    }
    case AE_IFIFO: {
      clear_for(dirfd, name, false, shown);
      dirfd = parent_fd(comps, layer, path);
      if (::mkfifoat(dirfd, n, perm & 0777) != 0) throw SysError("mkfifo", shown);
      return;
    }
    case AE_IFCHR:
    case AE_IFBLK:
      ++stats_.devices_skipped;
      if (!warned_devices_) {
        util::warn("image `" + image_ + "`: skipping device nodes (first: " + util::quoted(path) +
                   "); the container uses the host's /dev");
        warned_devices_ = true;
      }
      made_this_layer_.erase(entry_path);
      return;
    default:
      made_this_layer_.erase(entry_path);
      util::debug(err_prefix(layer, path) + "skipped (socket or unknown type)");
      return;
  }
}

void for_each_tar_entry(const ReadFn& read, const std::string& image, const std::string& layer,
                        const std::function<void(archive*, archive_entry*, uint64_t)>& fn) {
  Source src{&read, std::vector<char>(1 << 20), nullptr};
  struct ArchiveDeleter {
    void operator()(archive* a) const { archive_read_free(a); }
  };
  std::unique_ptr<archive, ArchiveDeleter> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open(a.get(), &src, nullptr, source_read, nullptr) != ARCHIVE_OK) {
    if (src.error) std::rethrow_exception(src.error);
    throw Error("image `" + image + "` layer `" + layer + "` is not a tar archive: " + archive_error_string(a.get()));
  }
  archive_entry* e;
  for (uint64_t i = 0;; ++i) {
    int r = archive_read_next_header(a.get(), &e);
    if (src.error) std::rethrow_exception(src.error);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN)
      throw Error("image `" + image + "` layer `" + layer + "` is not a valid tar archive: " +
                  archive_error_string(a.get()));
    fn(a.get(), e, i);
    if (src.error) std::rethrow_exception(src.error);
  }
  // Drain: digests cover the whole stream, padding included.
  char sink[65536];
  while (read(sink, sizeof sink) > 0) {
  }
}

void TreeWriter::apply_layer(const ReadFn& read, const std::string& layer) {
  made_this_layer_.clear();
  invalidate_parent_cache();
  for_each_tar_entry(read, image_, layer, [&](archive* a, archive_entry* e, uint64_t) { apply_entry(a, e, layer); });
  invalidate_parent_cache();
}

void TreeWriter::finish() {
  std::vector<std::pair<std::string, unsigned>> dirs(dir_modes_.begin(), dir_modes_.end());
  // Deepest first: a parent losing its x bit must not hide its children.
  std::sort(dirs.begin(), dirs.end(), [](const auto& x, const auto& y) {
    return std::count(x.first.begin(), x.first.end(), '/') > std::count(y.first.begin(), y.first.end(), '/');
  });
  for (const auto& [path, mode] : dirs) {
    auto r = util::open_in_root(root_.get(), path, O_RDONLY | O_DIRECTORY, /*follow_final=*/false);
    if (!r.fd) continue;  // removed by a later layer
    if (::fchmod(r.fd.get(), mode) != 0) throw SysError("chmod", root_path_ + "/" + path);
  }
}

} // namespace rt::image
