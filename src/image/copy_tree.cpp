// What COPY and ADD read and write (host).
#include "image/copy_tree.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>

#include "image/layer_stream.hpp"
#include "image/sha256.hpp"
#include "image/tar_filter.hpp"
#include "image/unpack.hpp"
#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/inroot.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "/" + b; }

// "./a//b/" -> "a/b"; ".." may not climb above the root.
std::string clean(const std::string& p) {
  std::string n = util::normalize_path(p, "/");
  return n == "/" ? std::string() : n.substr(1);
}

util::UniqueFd listing_fd(int fd, const std::string& shown) {
  util::UniqueFd d(::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d) throw SysError{errno, "open", shown};
  return d;
}

std::vector<std::string> sorted_names(int fd, const std::string& shown) {
  util::UniqueFd d = listing_fd(fd, shown);
  auto names = util::list_names(d.get(), shown);
  std::sort(names.begin(), names.end());
  return names;
}

// `name` below `dir`, or with `name` empty `dir` itself (an O_PATH
// descriptor) opened anew with `flags`.
int reopen(int dir, const std::string& name, int flags) {
  if (name.empty()) return ::open(("/proc/self/fd/" + std::to_string(dir)).c_str(), (flags & ~O_NOFOLLOW) | O_CLOEXEC);
  return ::openat(dir, name.c_str(), flags | O_CLOEXEC);
}

bool has_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The directory `path` of the image, made (0755) where missing.
util::UniqueFd make_dirs(int tree, const std::string& path, const std::string& where) {
  util::UniqueFd cur(::openat(tree, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  std::string prefix;
  for (const auto& c : util::split(clean(path), '/')) {
    if (c.empty()) continue;
    prefix += "/" + c;
    auto r = util::open_in_root(tree, prefix, O_PATH | O_DIRECTORY);
    if (!r.fd && r.err == ENOENT) {
      if (::mkdirat(cur.get(), c.c_str(), 0755) != 0 && errno != EEXIST)
        throw SysError{errno, "mkdir", where + ": " + prefix};
      r = util::open_in_root(tree, prefix, O_PATH | O_DIRECTORY);
    }
    if (!r.fd) throw SysError(r.err, "open", where + ": " + prefix, "");
    cur = std::move(r.fd);
  }
  return cur;
}

struct Copier {
  const CopyOptions& o;
  std::string where;
  uint64_t bytes = 0;
  // Files with more than one link, as first copied: a later name of the
  // same inode becomes a hard link to it, as it was in the source.
  struct Copied {
    util::UniqueFd dir;
    std::string name;
  };
  std::map<std::pair<dev_t, ino_t>, Copied> linked;

  void times(int dir, const std::string& name, const struct stat& st) {
    const struct timespec t[2] = {st.st_mtim, st.st_mtim};
    ::utimensat(dir, name.c_str(), t, AT_SYMLINK_NOFOLLOW);
  }
  unsigned mode_of(const struct stat& st) const { return o.chmod ? *o.chmod : (st.st_mode & 07777); }

  // Makes room for `name` in `dst`: anything there but a directory (when
  // a directory is coming) goes.
  void clear(int dst, const std::string& name, bool dir_coming, const std::string& shown) {
    struct stat old;
    if (::fstatat(dst, name.c_str(), &old, AT_SYMLINK_NOFOLLOW) != 0) return;
    if (S_ISDIR(old.st_mode) && dir_coming) return;
    util::remove_tree_at(dst, name, shown);
  }

  // Copies the entry `name` of directory `src` to `name` in `dst`.
  // `excluded`: .dockerignore leaves this entry out; a directory is still
  // gone into (for what `!` patterns bring back) and kept only if it
  // received something.
  void entry(const SourceTree& tree, int src, const std::string& rel, const std::string& name, int dst,
             const std::string& dname, const std::string& shown, bool excluded = false) {
    struct stat st;
    if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW | (name.empty() ? AT_EMPTY_PATH : 0)) != 0)
      throw SysError{errno, "stat", where + ": " + rel};
    if (excluded && !S_ISDIR(st.st_mode)) return;
    if (S_ISDIR(st.st_mode)) {
      clear(dst, dname, true, shown);
      const bool made = ::mkdirat(dst, dname.c_str(), 0700) == 0;
      if (!made && errno != EEXIST) throw SysError{errno, "mkdir", shown};
      util::UniqueFd s(::openat(src, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      util::UniqueFd d(::openat(dst, dname.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!s) throw SysError{errno, "open", where + ": " + rel};
      if (!d) throw SysError{errno, "open", shown};
      contents(tree, s.get(), rel, d.get(), shown);
      if (excluded && made && ::unlinkat(dst, dname.c_str(), AT_REMOVEDIR) == 0) return;  // nothing came back
      if (::fchmodat(dst, dname.c_str(), mode_of(st), 0) != 0) throw SysError{errno, "chmod", shown};
      times(dst, dname, st);
      return;
    }
    clear(dst, dname, false, shown);
    if (S_ISLNK(st.st_mode)) {
      char link[4096];
      ssize_t n = ::readlinkat(src, name.c_str(), link, sizeof link - 1);
      if (n < 0) throw SysError{errno, "readlink", where + ": " + rel};
      link[n] = 0;
      if (::symlinkat(link, dst, dname.c_str()) != 0) throw SysError{errno, "symlink", shown};
      times(dst, dname, st);
    } else if (S_ISREG(st.st_mode)) {
      const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
      if (st.st_nlink > 1)
        if (auto first = linked.find(id);
            first != linked.end() &&
            ::linkat(first->second.dir.get(), first->second.name.c_str(), dst, dname.c_str(), 0) == 0)
          return;
      // name "": `src` is the file itself (an O_PATH descriptor), reopened.
      util::UniqueFd in(reopen(src, name, O_RDONLY | O_NOFOLLOW));
      if (!in) throw SysError{errno, "open", where + ": " + rel};
      util::UniqueFd out(::openat(dst, dname.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!out) throw SysError{errno, "create", shown};
      char buf[1 << 16];
      for (;;) {
        size_t n = util::read_some(in.get(), buf, sizeof buf, where + ": " + rel);
        if (n == 0) break;
        util::write_all(out.get(), std::string_view(buf, n), shown);
        bytes += n;
      }
      if (::fchmod(out.get(), mode_of(st)) != 0) throw SysError{errno, "chmod", shown};
      const struct timespec t[2] = {st.st_mtim, st.st_mtim};
      ::futimens(out.get(), t);
      if (st.st_nlink > 1) linked.emplace(id, Copied{util::UniqueFd(::fcntl(dst, F_DUPFD_CLOEXEC, 0)), dname});
    } else if (S_ISFIFO(st.st_mode)) {
      if (::mkfifoat(dst, dname.c_str(), mode_of(st)) != 0) throw SysError{errno, "mkfifo", shown};
    }
    // Sockets and device nodes are not copied.
  }

  void contents(const SourceTree& tree, int src, const std::string& rel, int dst, const std::string& shown) {
    for (const auto& n : sorted_names(src, where + ": " + rel)) {
      const std::string r = join(rel, n);
      const bool out = tree.excluded(r);
      if (out && !tree.look_inside_excluded()) continue;
      entry(tree, src, r, n, dst, n, shown + "/" + n, out);
    }
  }
};

}  // namespace

SourceTree::SourceTree(const std::string& path, std::optional<DockerIgnore> ignore)
    : path_(path), root_(util::open_fd(path, O_PATH | O_DIRECTORY)), ignore_(std::move(ignore)) {}

bool SourceTree::excluded_target(const std::string& rel) const {
  if (!ignore_ || rel.empty()) return false;
  auto r = util::open_in_root(root_.get(), rel, O_PATH);
  if (!r.fd) return false;
  auto real = [](int fd) {
    char buf[4096];
    ssize_t n = ::readlink(util::fd_path(fd).c_str(), buf, sizeof buf);
    return n > 0 && n < static_cast<ssize_t>(sizeof buf) ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  const std::string root = real(root_.get()), target = real(r.fd.get());
  if (root.empty() || target.empty() || target == root) return false;
  if (!target.starts_with(root == "/" ? root : root + "/")) return true;  // not inside: never copied
  return excluded(target.substr(root == "/" ? 1 : root.size() + 1));
}

std::vector<std::string> SourceTree::match(const std::string& pattern, const std::string& where) const {
  const std::string want = clean(pattern);
  std::vector<std::string> out;
  if (!has_glob(want)) {
    auto r = util::open_in_root(root_.get(), want.empty() ? "." : want, O_PATH);
    if (r.fd && !excluded(want) && !excluded_target(want)) out.push_back(want);
  } else {
    std::function<void(int, const std::string&)> walk = [&](int fd, const std::string& rel) {
      for (const auto& n : sorted_names(fd, path_ + "/" + rel)) {
        const std::string r = join(rel, n);
        const bool left_out = excluded(r);
        if (left_out && !look_inside_excluded()) continue;
        if (!left_out && ::fnmatch(want.c_str(), r.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0 && !excluded_target(r))
          out.push_back(r);
        struct stat st;
        if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
          util::UniqueFd sub(::openat(fd, n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (sub) walk(sub.get(), r);
        }
      }
    };
    walk(root_.get(), "");
  }
  if (out.empty())
    throw Error(where + ": `" + pattern + "` names nothing in `" + path_ + "`" +
                (ignore_ ? " (or .dockerignore leaves it out)" : ""));
  return out;
}

bool SourceTree::is_dir(const std::string& rel) const {
  auto r = util::open_in_root(root_.get(), rel.empty() ? "." : rel, O_PATH | O_DIRECTORY);
  return bool(r.fd);
}

std::string SourceTree::digest(const std::vector<std::string>& rels) const {
  Sha256 h;
  auto put = [&](const std::string& s) { h.update(s.data(), s.size() + 1); };  // with its NUL
  std::function<void(int, const std::string&, const std::string&, bool)> one = [&](int dir, const std::string& name,
                                                                                   const std::string& rel,
                                                                                   bool follow) {
    struct stat st;
    if (::fstatat(dir, name.c_str(), &st, (follow ? 0 : AT_SYMLINK_NOFOLLOW) | (name.empty() ? AT_EMPTY_PATH : 0)) != 0)
      throw SysError{errno, "stat", path_ + "/" + rel};
    // What .dockerignore leaves out counts only through what `!` brings back inside it.
    const bool left_out = !follow && excluded(rel);
    if (left_out && !S_ISDIR(st.st_mode)) return;
    if (!left_out) {
      put(rel);
      put(std::to_string(st.st_mode));
    }
    if (S_ISLNK(st.st_mode)) {
      char link[4096];
      ssize_t n = ::readlinkat(dir, name.c_str(), link, sizeof link - 1);
      if (n < 0) throw SysError{errno, "readlink", path_ + "/" + rel};
      link[n] = 0;
      put(link);
    } else if (S_ISREG(st.st_mode)) {
      util::UniqueFd in(reopen(dir, name, O_RDONLY | (follow ? 0 : O_NOFOLLOW)));
      if (!in) throw SysError{errno, "open", path_ + "/" + rel};
      char buf[1 << 16];
      for (size_t n; (n = util::read_some(in.get(), buf, sizeof buf, path_ + "/" + rel)) > 0;) h.update(buf, n);
      put(std::to_string(st.st_size));
    } else if (S_ISDIR(st.st_mode)) {
      util::UniqueFd d(reopen(dir, name, O_PATH | O_DIRECTORY | (follow ? 0 : O_NOFOLLOW)));
      if (!d) throw SysError{errno, "open", path_ + "/" + rel};
      for (const auto& n : sorted_names(d.get(), path_ + "/" + rel)) {
        const std::string r = join(rel, n);
        if (!excluded(r) || look_inside_excluded()) one(d.get(), n, r, false);
      }
    }
  };
  for (const auto& rel : rels) {
    // The source itself is followed (inside the root), as COPY follows it.
    auto r = util::open_in_root(root_.get(), rel.empty() ? "." : rel, O_PATH);
    if (!r.fd) throw SysError(r.err, "open", path_ + "/" + rel, "");
    one(r.fd.get(), "", rel, true);
  }
  return h.digest();
}

bool add_archive(const SourceTree& src, const std::string& rel, int tree, const std::string& dest,
                 const std::string& scratch, const CopyOptions& options, const std::string& where, AttrMap* xattrs) {
  // Opened once, inside the source's root: every read is of that file.
  auto f = util::open_in_root(src.fd(), rel, O_RDONLY);
  if (!f.fd) throw SysError(f.err, "open", src.path() + "/" + rel, "");
  struct stat st;
  if (::fstat(f.fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const std::string shown = src.path() + "/" + rel;
  auto reader = [&] {
    if (::lseek(f.fd.get(), 0, SEEK_SET) != 0) throw SysError{errno, "lseek", shown};
    return ReadFn([fd = f.fd.get(), shown](void* b, size_t n) { return util::read_some(fd, b, n, shown); });
  };
  // gzip and zstd as layers are read; xz, bzip2 and the rest through
  // libarchive's filters.
  unsigned char magic[6] = {};
  const bool other = ::pread(f.fd.get(), magic, sizeof magic, 0) == sizeof magic &&
                     (std::memcmp(magic,
                                  "\xfd"
                                  "7zXZ\0",
                                  6) == 0 ||
                      std::memcmp(magic, "BZh", 3) == 0 || std::memcmp(magic, "\x5d\0\0", 3) == 0 ||
                      std::memcmp(magic, "\x04\x22\x4d\x18", 4) == 0);
  auto tar = [&]() -> ReadFn {
    if (other) return decompressed(reader(), shown);
    auto s = std::make_shared<LayerStream>(reader(), shown);
    return [s](void* b, size_t n) { return s->read(b, n); };
  };
  char head[512];
  size_t got = 0;
  try {
    ReadFn probe = tar();
    for (size_t n = 1; got < sizeof head && n > 0; got += n) n = probe(head + got, sizeof head - got);
  } catch (const Error&) {
    return false;  // not compressed after all: a plain file
  }
  if (got < sizeof head || std::string_view(head + 257, 5) != "ustar") return false;
  TreeWriter w(scratch, shown);
  w.apply_layer(tar(), rel);
  w.finish();
  copy_into(SourceTree(scratch), "", tree, dest, true, options, where);
  // The archive's set-id bits, onto the build's tree as its steps keep
  // them (image/file_attrs); its extended attributes to the caller, by
  // where the entries now are in the image (DEST with its symlinks
  // resolved inside the tree).
  AttrMap attrs = w.attrs();
  if (attrs.empty()) return true;
  auto d = util::open_in_root(tree, dest, O_PATH | O_DIRECTORY);
  if (!d.fd) throw SysError(d.err, "open", dest, "");
  if (!options.chmod) setid_to_disk(d.fd.get(), dest, attrs);
  if (xattrs) {
    const std::string top = util::real_path(tree, "the image's tree"), at = util::real_path(d.fd.get(), dest);
    const std::string base = at.size() > top.size() ? at.substr(top.size() + 1) + "/" : "";
    for (const auto& [path, a] : attrs)
      if (!a.xattrs.empty()) (*xattrs)[base + path].xattrs = a.xattrs;
  }
  return true;
}

bool dir_in_tree(int tree, const std::string& path) {
  return bool(util::open_in_root(tree, path, O_PATH | O_DIRECTORY).fd);
}

uint64_t copy_into(const SourceTree& src, const std::string& rel, int tree, const std::string& dest, bool into_dir,
                   const CopyOptions& options, const std::string& where) {
  Copier c{options, where, 0, {}};
  auto s = util::open_in_root(src.fd(), rel.empty() ? "." : rel, O_PATH);
  if (!s.fd) throw SysError(s.err, "open", src.path() + "/" + rel, "");
  struct stat st;
  if (::fstat(s.fd.get(), &st) != 0) throw SysError{errno, "stat", src.path() + "/" + rel};
  if (S_ISDIR(st.st_mode)) {
    util::UniqueFd d = make_dirs(tree, dest, where);
    c.contents(src, s.fd.get(), rel, d.get(), dest);
    return c.bytes;
  }
  std::string dir = dest, name = util::base_name(rel);
  if (!into_dir) {
    dir = util::dir_name(util::normalize_path(dest, "/"));
    name = util::base_name(util::normalize_path(dest, "/"));
  }
  util::UniqueFd d = make_dirs(tree, dir, where);
  // A source that is a symlink has been followed (inside its root): its
  // target is copied under the source's name.
  c.entry(src, s.fd.get(), rel, "", d.get(), name, dest);
  return c.bytes;
}

}  // namespace rt::image
