// Layers from a tree that changed (host).
#include "image/tree_diff.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <set>
#include <vector>

#include "image/file_attrs.hpp"
#include "image/sha256.hpp"
#include "image/unpack.hpp"
#include "rt/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/inroot.hpp"

namespace rt::image {
namespace {

int64_t ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

TreeStat stat_of(const struct stat& st) {
  return {st.st_mode, static_cast<uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim),
          static_cast<uint64_t>(st.st_ino)};
}

// Opens the directory `name` below `dirfd` for listing; one the owner may
// not read (mode 0311, say) is opened after granting the owner r-x, then
// given its mode back: every file of a rootless tree is the caller's.
util::UniqueFd open_listing(int dirfd, const std::string& name, const struct stat& st, const std::string& shown) {
  const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(dirfd, name.c_str(), flags);
  if (fd < 0 && errno == EACCES && ::fchmodat(dirfd, name.c_str(), (st.st_mode & 07777) | 0500, 0) == 0) {
    fd = ::openat(dirfd, name.c_str(), flags);
    int saved = errno;
    ::fchmodat(dirfd, name.c_str(), st.st_mode & 07777, 0);
    errno = saved;
  }
  if (fd < 0) throw SysError{errno, "open", shown};
  return util::UniqueFd(fd);
}

void walk(int dirfd, const std::string& prefix, const std::string& shown, TreeSnapshot& out) {
  std::vector<std::string> names = util::list_names(dirfd, shown + "/" + prefix);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    struct stat st;
    const std::string rel = prefix.empty() ? n : prefix + "/" + n;
    if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // gone meanwhile
      throw SysError{errno, "stat", shown + "/" + rel};
    }
    out.entries.emplace(rel, stat_of(st));
    if (S_ISDIR(st.st_mode)) {
      util::UniqueFd sub = open_listing(dirfd, n, st, shown + "/" + rel);
      walk(sub.get(), rel, shown, out);
    }
  }
}

bool changed(const TreeStat& a, const TreeStat& b) {
  if ((a.mode & S_IFMT) != (b.mode & S_IFMT) || a.mode != b.mode || a.mtime_ns != b.mtime_ns) return true;
  if (S_ISDIR(a.mode)) return false;
  return a.ino != b.ino || a.ctime_ns != b.ctime_ns || a.size != b.size;
}

std::string parent_of(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

struct DiffSink {
  int fd;
  std::string shown;
  Sha256 hash;
  uint64_t bytes = 0;
};

la_ssize_t sink_write(struct archive*, void* data, const void* buf, size_t size) {
  auto* s = static_cast<DiffSink*>(data);
  util::write_all(s->fd, std::string_view(static_cast<const char*>(buf), size), s->shown);
  s->hash.update(buf, size);
  s->bytes += size;
  return static_cast<la_ssize_t>(size);
}

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
// Opens a file of the tree for reading, granting the owner read for the
// open when its mode denies it (then puts the mode back).
util::UniqueFd open_for_reading(int rootfd, const std::string& rel, unsigned mode, const std::string& shown) {
  auto r = util::open_in_root(rootfd, rel, O_RDONLY, /*follow_final=*/false);
  if (!r.fd && r.err == EACCES) {
    auto path = util::open_in_root(rootfd, rel, O_PATH, false);
    std::string proc = path.fd ? "/proc/self/fd/" + std::to_string(path.fd.get()) : "";
    if (path.fd && ::chmod(proc.c_str(), (mode & 07777) | 0400) == 0) {
      r = util::open_in_root(rootfd, rel, O_RDONLY, false);
      ::chmod(proc.c_str(), mode & 07777);
    }
  }
  if (!r.fd) throw SysError(r.err, "open", shown + "/" + rel, "");
  return std::move(r.fd);
}

}  // namespace

TreeSnapshot TreeSnapshot::take(int rootfd, const std::string& shown) {
  TreeSnapshot s;
  util::UniqueFd dir(::openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw SysError{errno, "open", shown};
  walk(dir.get(), "", shown, s);
  return s;
}

LayerWritten write_tree_layer(int rootfd, const std::string& shown, TreeSnapshot& before, int out_fd, AttrMap* attrs,
                              const AttrMap* given) {
  TreeSnapshot now = TreeSnapshot::take(rootfd, shown);
  const bool whole = before.entries.empty();

  // What goes in: changed entries, the directories above them, and a
  // whiteout for each entry gone from a directory that is still there.
  std::map<std::string, bool> out;  // path -> whiteout
  std::set<std::string> made;       // new or changed, not only above what is
  for (const auto& [rel, st] : now.entries) {
    auto old = before.entries.find(rel);
    if (old != before.entries.end() && !changed(old->second, st)) continue;
    out[rel] = false;
    made.insert(rel);
    for (std::string p = parent_of(rel); !p.empty() && !out.count(p); p = parent_of(p)) out[p] = false;
  }
  for (const auto& [rel, st] : before.entries) {
    if (now.entries.count(rel)) continue;
    const std::string parent = parent_of(rel);
    if (!parent.empty()) {
      auto p = now.entries.find(parent);
      if (p == now.entries.end() || !S_ISDIR(p->second.mode)) continue;  // the parent's own entry covers it
      for (std::string q = parent; !q.empty() && !out.count(q); q = parent_of(q)) out[q] = false;
    }
    out[(parent.empty() ? "" : parent + "/") + ".wh." + rel.substr(parent.empty() ? 0 : parent.size() + 1)] = true;
  }

  DiffSink sink{out_fd, shown + " (layer)", {}, 0};
  std::unique_ptr<struct archive, ArchiveDeleter> a(archive_write_new());
  archive_write_set_format_pax_restricted(a.get());
  // Names are bytes, whatever the locale: never translated (a name that is
  // not ASCII failed under LANG=C, ca-certificates' among them).
  archive_write_set_format_option(a.get(), "pax", "hdrcharset", "BINARY");
  archive_write_set_bytes_in_last_block(a.get(), 1);
  if (archive_write_open2(a.get(), &sink, nullptr, sink_write, nullptr, nullptr) != ARCHIVE_OK)
    throw Error("cannot write a layer of `" + shown + "`: " + archive_error(a.get()));
  std::map<uint64_t, std::string> links;  // inode -> first path written, for hard links
  std::vector<char> buf(1 << 16);
  uint64_t changes = 0;
  for (const auto& [rel, whiteout] : out) {
    EntryPtr e(archive_entry_new());
    archive_entry_set_pathname(e.get(), rel.c_str());
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    ++changes;
    if (whiteout) {
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_perm(e.get(), 0644);
      archive_entry_set_size(e.get(), 0);
      if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK)
        throw Error("cannot write a layer of `" + shown + "`: " + archive_error(a.get()));
      continue;
    }
    const TreeStat& st = now.entries.at(rel);
    const unsigned type = st.mode & S_IFMT;
    if (type == S_IFSOCK || type == S_IFCHR || type == S_IFBLK) {
      --changes;
      continue;
    }
    archive_entry_set_mtime(e.get(), st.mtime_ns / 1000000000, st.mtime_ns % 1000000000);
    archive_entry_set_filetype(e.get(), type);
    archive_entry_set_perm(e.get(), st.mode & 07777);
    if (type == S_IFREG || type == S_IFDIR) {
      // What the disk holds, and what is kept beside it for what the step
      // did not change (or for the whole tree).
      auto r = util::open_in_root(rootfd, rel, O_PATH, false);
      FileAttrs fa{st.mode & (S_ISUID | S_ISGID), r.fd ? read_xattrs(r.fd.get()) : Xattrs{}};
      if (given && fa.xattrs.empty())
        if (auto g = given->find(rel); g != given->end()) fa.xattrs = g->second.xattrs;
      if (attrs && (whole || !made.count(rel))) {
        if (auto k = attrs->find(rel); k != attrs->end()) {
          fa.setid |= k->second.setid;
          if (fa.xattrs.empty()) fa.xattrs = k->second.xattrs;
        }
      }
      if (attrs && fa.empty()) attrs->erase(rel);
      if (attrs && !fa.empty()) (*attrs)[rel] = fa;
      add_attrs(e.get(), fa);
    }
    std::string target;
    if (type == S_IFLNK) {
      auto r = util::open_in_root(rootfd, rel, O_PATH, false);
      char link[4096];
      ssize_t n = r.fd ? ::readlinkat(r.fd.get(), "", link, sizeof link) : -1;
      if (n < 0) throw SysError{r.fd ? errno : r.err, "readlink", shown + "/" + rel};
      target.assign(link, static_cast<size_t>(n));
      archive_entry_set_symlink(e.get(), target.c_str());
    }
    util::UniqueFd data;
    if (type == S_IFREG) {
      auto [it, first] = links.try_emplace(st.ino, rel);
      // Only a file that has other names can be a hard link; inodes are
      // not reused within one walk.
      if (!first) {
        archive_entry_set_hardlink(e.get(), it->second.c_str());
        archive_entry_set_size(e.get(), 0);
      } else {
        archive_entry_set_size(e.get(), static_cast<la_int64_t>(st.size));
        data = open_for_reading(rootfd, rel, st.mode, shown);
      }
    }
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK)
      throw Error("cannot write a layer of `" + shown + "`: " + archive_error(a.get()));
    if (!data) continue;
    // Exactly the size the header gave, even when the file changed since.
    uint64_t left = st.size;
    while (left > 0) {
      size_t n = util::read_some(data.get(), buf.data(), std::min<uint64_t>(buf.size(), left), shown + "/" + rel);
      if (n == 0) {
        std::fill(buf.begin(), buf.end(), 0);
        n = std::min<uint64_t>(buf.size(), left);
      }
      if (archive_write_data(a.get(), buf.data(), n) < 0)
        throw Error("cannot write a layer of `" + shown + "`: " + archive_error(a.get()));
      left -= n;
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK)
    throw Error("cannot write a layer of `" + shown + "`: " + archive_error(a.get()));
  if (attrs) {
    std::erase_if(*attrs, [&](const auto& k) {
      auto it = now.entries.find(k.first);
      return it == now.entries.end() || !(S_ISREG(it->second.mode) || S_ISDIR(it->second.mode));
    });
  }
  before = std::move(now);
  return {sink.hash.digest(), sink.bytes, changes};
}

}  // namespace rt::image
