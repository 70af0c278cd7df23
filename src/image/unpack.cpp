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

std::string archive_error(archive* a) {
  const char* text = archive_error_string(a);
  if (text) return text;
  return "libarchive gave no reason (error " + std::to_string(archive_errno(a)) + ")";
}

Error too_large(uint64_t max, const std::string& image, const std::string& layer, const std::string& path) {
  return Error("image `" + image + "` is larger than the limit of " + util::human_bytes(max) + " (at layer `" + layer +
                   "` entry " + util::quoted(path) + "; sizes count holes of sparse files)",
               "raise it with --max-size if the image is genuine");
}

MergeEntry merge_entry_of(archive_entry* e) {
  MergeEntry m;
  const char* path = archive_entry_pathname(e);
  m.path = path ? path : "";
  m.type = archive_entry_filetype(e);
  if (const char* t = archive_entry_symlink(e)) m.symlink = t;
  if (const char* t = archive_entry_hardlink(e)) m.hardlink = t;
  FileAttrs a = attrs_of(e);
  m.perm = archive_entry_perm(e) & 07777;
  m.mtime = archive_entry_mtime(e);
  m.xattrs = std::move(a.xattrs);
  return m;
}

namespace {

// The first `n` components as a path.
std::string join(const std::vector<std::string>& comps, size_t n) { return util::join(std::span(comps).first(n), '/'); }

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
  } catch (const std::exception& e) {
    // The cause (a corrupt gzip stream, a digest mismatch, a failed
    // sqfs2tar) reaches messages made from libarchive's error too.
    s->error = std::current_exception();
    archive_set_error(a, EIO, "%s", e.what());
    return -1;
  } catch (...) {
    s->error = std::current_exception();
    archive_set_error(a, EIO, "read failed");
    return -1;
  }
}

}  // namespace

TreeWriter::TreeWriter(const std::string& root, std::string image_name, uint64_t max_bytes)
    : root_path_(root), image_(std::move(image_name)), max_bytes_(max_bytes), merge_(image_) {
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
int TreeWriter::parent_fd(const std::vector<std::string>& comps, const std::string& layer, const std::string& path) {
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
          throw Error(err_prefix(layer, path) + "cannot make directory `" + join(comps, i + 1) +
                      "`: " + std::strerror(errno));
        next = util::open_in_root(root_.get(), join(comps, i + 1), O_PATH | O_DIRECTORY);
      }
      if (!next.fd)
        throw Error(err_prefix(layer, path) + "`" + join(comps, i + 1) + "` is not a directory" +
                    (next.err == ENOENT ? " (a symlink to a path the image lacks)"
                                        : ": " + std::string(std::strerror(next.err))));
      dir = std::move(next.fd);
    }
    r.fd = std::move(dir);
    r.err = 0;
  }
  if (!r.fd) throw Error(err_prefix(layer, path) + "parent `" + parent + "`: " + std::strerror(r.err));
  cached_parent_ = parent;
  cached_parent_fd_ = std::move(r.fd);
  return cached_parent_fd_.get();
}

// Removes what the merge took out of the tree: `key` is a path with no
// symlink in it (the merge resolved them), opened in-root all the same.
void TreeWriter::remove_key(const std::string& key) {
  const std::string parent = util::dir_name("/" + key).substr(1);
  auto r = util::open_in_root(root_.get(), parent.empty() ? "." : parent, O_PATH | O_DIRECTORY, false);
  if (!r.fd) throw Error("image `" + image_ + "`: cannot remove `" + key + "`: " + std::strerror(r.err));
  util::remove_tree_at(r.fd.get(), util::base_name(key), root_path_ + "/" + key);
  invalidate_parent_cache();
}

void TreeWriter::apply_entry(archive* a, archive_entry* e, uint64_t index, const std::string& layer) {
  const char* raw = archive_entry_pathname(e);
  if (!raw) throw Error("image `" + image_ + "` layer `" + layer + "`: an entry has no name");
  const std::string path = raw;
  ++stats_.entries;
  const MergeStep step = merge_.apply(merge_entry_of(e), index);
  for (const auto& key : step.remove) remove_key(key);
  if (step.whiteout) ++stats_.whiteouts;
  if (step.kind == MergeStep::Kind::Skipped) {
    const mode_t type = archive_entry_filetype(e);
    if (type == AE_IFCHR || type == AE_IFBLK) {
      ++stats_.devices_skipped;
      if (!warned_devices_)
        util::warn("image `" + image_ + "`: skipping device nodes (first: " + util::quoted(path) +
                   "); the container uses the host's /dev");
      warned_devices_ = true;
    } else {
      util::debug(err_prefix(layer, path) + "skipped (socket or unknown type)");
    }
    return;
  }
  if (step.kind != MergeStep::Kind::Make) return;  // the root, a whiteout, a directory merged

  std::vector<std::string> comps = util::split(step.key, '/');
  int dirfd = parent_fd(comps, layer, path);
  const std::string& name = comps.back();
  const char* n = name.c_str();
  const std::string shown = root_path_ + "/" + step.key;
  const mode_t type = archive_entry_filetype(e);
  const mode_t perm = archive_entry_perm(e) & 01777;  // set-id bits: in attrs(), not on disk

  if (!step.hardlink.empty()) {
    auto t = util::open_in_root(root_.get(), step.hardlink, O_PATH, /*follow_final=*/false);
    if (!t.fd)
      throw Error(err_prefix(layer, path) + "hard link target `" + step.hardlink + "`: " + std::strerror(t.err));
    if (::linkat(AT_FDCWD, util::fd_path(t.fd.get()).c_str(), dirfd, n, AT_SYMLINK_FOLLOW) != 0)
      throw SysError{errno, "link", shown};
    return;
  }

  switch (type) {
    case AE_IFDIR:
      if (::mkdirat(dirfd, n, 0700) != 0) throw SysError{errno, "mkdir", shown};
      return;
    case AE_IFREG: {
      int fd = ::openat(dirfd, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) throw SysError{errno, "create", shown};
      UniqueFd file(fd);
      const void* buf;
      size_t size;
      la_int64_t offset;
      int64_t end = 0;
      // Apparent sizes count: a sparse file's holes would become real
      // blocks in a SquashFS image or a copy.
      stats_.bytes += static_cast<uint64_t>(std::max<int64_t>(0, archive_entry_size(e)));
      if (max_bytes_ && stats_.bytes > max_bytes_) throw too_large(max_bytes_, image_, layer, path);
      for (;;) {
        int r = archive_read_data_block(a, &buf, &size, &offset);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN) throw Error(err_prefix(layer, path) + "cannot read file data: " + archive_error(a));
        if (archive_entry_size_is_set(e) &&
            (offset < 0 || static_cast<uint64_t>(offset) + size > static_cast<uint64_t>(archive_entry_size(e))))
          throw Error(err_prefix(layer, path) + "data past the size its header gives");
        const char* p = static_cast<const char*>(buf);
        while (size > 0) {
          ssize_t w = ::pwrite(fd, p, size, offset);
          if (w < 0) {
            if (errno == EINTR) continue;
            throw SysError{errno, "write", shown};
          }
          p += w;
          offset += w;
          size -= static_cast<size_t>(w);
        }
        end = std::max<int64_t>(end, offset);
      }
      // Sparse files end in a hole: the size comes from the header.
      if (archive_entry_size(e) > end && ::ftruncate(fd, archive_entry_size(e)) != 0)
        throw SysError{errno, "truncate", shown};
      if (::fchmod(fd, perm) != 0) throw SysError{errno, "chmod", shown};
      timespec times[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
      ::futimens(fd, times);
      return;
    }
    case AE_IFLNK: {
      const char* target = archive_entry_symlink(e);
      if (!target) throw Error(err_prefix(layer, path) + "symlink without a target");
      // Any target is fine: links are only ever resolved inside the root
      // (here with RESOLVE_IN_ROOT, in the container once its root is entered).
      if (::symlinkat(target, dirfd, n) != 0) throw SysError{errno, "symlink", shown};
      timespec times[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
      ::utimensat(dirfd, n, times, AT_SYMLINK_NOFOLLOW);
      return;
    }
    case AE_IFIFO:
      if (::mkfifoat(dirfd, n, perm & 0777) != 0) throw SysError{errno, "mkfifo", shown};
      return;
    default:
      throw Error(err_prefix(layer, path) + "unexpected entry type");  // the merge skips the others
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
    throw Error("image `" + image + "` layer `" + layer + "` is not a tar archive: " + archive_error(a.get()));
  }
  archive_entry* e;
  for (uint64_t i = 0;; ++i) {
    int r = archive_read_next_header(a.get(), &e);
    if (src.error) std::rethrow_exception(src.error);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN)
      throw Error("image `" + image + "` layer `" + layer + "` is not a valid tar archive: " + archive_error(a.get()));
    fn(a.get(), e, i);
    if (src.error) std::rethrow_exception(src.error);
  }
  // Drain: digests cover the whole stream, padding included.
  char sink[65536];
  while (read(sink, sizeof sink) > 0) {
  }
}

void TreeWriter::apply_layer(const ReadFn& read, const std::string& layer) {
  merge_.begin_layer(layer);
  invalidate_parent_cache();
  for_each_tar_entry(read, image_, layer,
                     [&](archive* a, archive_entry* e, uint64_t index) { apply_entry(a, e, index, layer); });
  invalidate_parent_cache();
}

void TreeWriter::finish() {
  std::vector<std::pair<std::string, unsigned>> dirs;
  for (const auto& [key, node] : merge_.nodes())
    if (node.type == AE_IFDIR) dirs.emplace_back(key, node.perm & 01777);
  // Deepest first: a parent losing its x bit must not hide its children.
  std::sort(dirs.begin(), dirs.end(), [](const auto& x, const auto& y) {
    return std::count(x.first.begin(), x.first.end(), '/') > std::count(y.first.begin(), y.first.end(), '/');
  });
  for (const auto& [path, mode] : dirs) {
    auto r = util::open_in_root(root_.get(), path, O_RDONLY | O_DIRECTORY, /*follow_final=*/false);
    if (!r.fd) throw Error("image `" + image_ + "`: directory `" + path + "`: " + std::strerror(r.err));
    if (::fchmod(r.fd.get(), mode) != 0) throw SysError{errno, "chmod", root_path_ + "/" + path};
  }
}

AttrMap TreeWriter::attrs() const {
  AttrMap out;
  for (const auto& [key, node] : merge_.nodes()) {
    if (node.type == 0 || node.type == AE_IFLNK) continue;  // a hard link's are its file's
    FileAttrs a{node.perm & (S_ISUID | S_ISGID), node.xattrs};
    if (!a.empty()) out.emplace(key, std::move(a));
  }
  return out;
}

}  // namespace rt::image
