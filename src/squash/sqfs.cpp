// SquashFS images: reading their files (host); serving them over FUSE from
// threads of this process (namespace).
#include "squash/sqfs.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern "C" {
#include <squashfuse/dir.h>
#include <squashfuse/ll.h>
#include <squashfuse/table.h>
}

#include "rt/error.hpp"
#include "squash/file_reader.hpp"
#include "squash/fuse_ops.hpp"
#include "squash/lazy.hpp"
#include "squash/le.hpp"
#include "squash/sif.hpp"
#include "squash/verify.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace rt::squash {
namespace {

constexpr unsigned char kMagic[4] = {'h', 's', 'q', 's'};

// Fixed workers reading the device in turn: libfuse's own multi-threaded
// loop (3.14) ends a worker after most requests and starts another, a
// thread creation per request on a cold read.
constexpr unsigned kServerThreads = 4;

void serve(fuse_session* se) {
  fuse_buf buf{};
  while (!fuse_session_exited(se)) {
    int n = fuse_session_receive_buf(se, &buf);
    if (n == -EINTR || n == -EAGAIN || n == -ENOENT) continue;  // ENOENT: an interrupted request
    if (n <= 0) break;                                          // ENODEV: unmounted
    fuse_session_process_buf(se, &buf);
  }
  std::free(buf.mem);
}

// Starts serving the mounted image on `fuse_fd` from threads of this
// process; false if the session cannot start.
bool start_session(sqfs_ll* ll, int fuse_fd, uid_t uid, gid_t gid, Source* source) {
  fuse_lowlevel_ops ops = server_ops(ll, uid, gid, source);
  char arg0[] = "rt";
  char* argv[] = {arg0, nullptr};
  fuse_args args = FUSE_ARGS_INIT(1, argv);
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, ll);
  std::string dev = "/dev/fd/" + std::to_string(fuse_fd);
  if (!se || fuse_session_mount(se, dev.c_str()) != 0) return false;
  serving(se);
  for (unsigned i = 0; i < kServerThreads; ++i) std::thread(serve, se).detach();
  return true;
}

}  // namespace

FileKind file_kind(const std::string& path) {
  // Non-blocking: a FIFO planted under an image's name must not hang rt.
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return FileKind::Other;
  unsigned char m[4] = {};
  if (::pread(fd.get(), m, 4, 0) == 4 && std::memcmp(m, kMagic, 4) == 0) return FileKind::Squashfs;
  if (is_sif(fd.get())) return FileKind::Sif;
  return simg_span(fd.get()) ? FileKind::Squashfs : FileKind::Other;
}

std::optional<Span> simg_span(int fd) {
  char head[512];
  const ssize_t n = ::pread(fd, head, sizeof head, 0);
  if (n < 8 || head[0] != '#' || head[1] != '!') return std::nullopt;
  const void* nl = std::memchr(head, '\n', static_cast<size_t>(n));
  if (!nl) return std::nullopt;
  const size_t at = static_cast<size_t>(static_cast<const char*>(nl) - head) + 1;
  if (at + 4 > static_cast<size_t>(n) || std::memcmp(head + at, kMagic, 4) != 0) return std::nullopt;
  return Span{at, 0};
}

bool is_squashfs(const std::string& path) { return file_kind(path) != FileKind::Other; }

Image::Image(const std::string& path, std::unique_ptr<Source> source) : path_(path), source_(std::move(source)) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) throw SysError{errno, "open", path};
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw SysError{errno, "stat", path};
  if (!S_ISREG(st.st_mode)) throw Error("image `" + path + "` is not a regular file");
  if (source_) fetch_head(fd.get(), static_cast<uint64_t>(st.st_size));
  // A SIF file: its primary partition, served from where it lies.
  Span span;
  if (is_sif(fd.get())) {
    sif_ = read_sif(fd.get(), path);
    const SifObject part = sif_root_partition(*sif_, path);
    span = {part.offset, part.size};
  } else if (auto s = simg_span(fd.get())) {
    span = *s;
  }
  // Everything libsquashfuse will read is checked first, from this same
  // open file: the library trusts what it reads.
  verify_image(fd.get(), path, span, {}, source_.get());
  ll_ = static_cast<sqfs_ll*>(std::calloc(1, sizeof(sqfs_ll)));
  if (!ll_) throw std::bad_alloc();
  if (sqfs_init(&ll_->fs, fd.get(), static_cast<size_t>(span.offset)) != SQFS_OK) {
    std::free(ll_);
    ll_ = nullptr;
    throw Error("image `" + path + "` cannot be opened as SquashFS");
  }
  fd_ = fd.release();  // the library reads through it; closed after it
  if (sqfs_ll_init(ll_) != SQFS_OK) {
    sqfs_destroy(&ll_->fs);
    std::free(ll_);
    ll_ = nullptr;
    throw Error("image `" + path + "` cannot be opened as SquashFS");
  }
}

void Image::need(uint64_t offset, uint64_t length, const std::string& what) {
  std::string why;
  if (!source_->need(offset, length, &why)) throw Error("image `" + path_ + "`: cannot read " + what + ": " + why);
}

void Image::fetch_head(int fd, uint64_t size) {
  // A SIF file's header, its descriptors; then the partition's superblock
  // and, in one piece, the tables that follow the data (inodes,
  // directories, fragments, ids, xattrs), all of which verify_image reads.
  const uint64_t head = std::min<uint64_t>(size, kSifHeaderSize);
  need(0, head, "the SIF header");
  Span span;
  if (is_sif(fd)) {
    const std::string h = util::read_at(fd, 0, kSifHeaderSize, path_);
    if (h.size() < kSifHeaderSize) return;  // read_sif says what is wrong
    const uint64_t at = le<uint64_t>(h, 96), len = le<uint64_t>(h, 104);
    if (at < size && len <= size - at) need(at, len, "the SIF descriptors");
    const SifObject part = sif_root_partition(read_sif(fd, path_), path_);
    span = {part.offset, part.size};
  }
  if (span.offset >= size || size - span.offset < 96) return;  // verify_image says what is wrong
  need(span.offset, 96, "the SquashFS superblock");
  const std::string sb = util::read_at(fd, span.offset, 96, path_);
  if (sb.size() < 96) return;
  const uint64_t used = le<uint64_t>(sb, 40);
  uint64_t tables = used;
  for (size_t at : {48, 56, 64, 72, 80, 88})  // ids, xattrs, inodes, directories, fragments, export
    if (const uint64_t v = le<uint64_t>(sb, at); v >= 96 && v < tables) tables = v;
  if (used <= size - span.offset && tables < used) need(span.offset + tables, used - tables, "the SquashFS tables");
}

Image::~Image() {
  if (ll_) {
    // sqfs_destroy (0.1.105) leaves the xattr table's index allocated.
    sqfs_table_destroy(&ll_->fs.xattr_table);
    sqfs_ll_destroy(ll_);
    std::free(ll_);
  }
  if (fd_ >= 0) ::close(fd_);
}

static std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  for (size_t i = 0; i < path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// Looks `path` up inside the image, following symlinks inside it (Debian's
// /bin -> usr/bin, say); sqfs_lookup_path alone stops at them.
static std::optional<sqfs_inode> lookup(sqfs* fs, const std::string& path, const std::string& image) {
  std::vector<std::string> cur;  // resolved so far: no links in it
  std::vector<std::string> todo = components(path);
  std::reverse(todo.begin(), todo.end());  // the next component at the back
  int links = 0;
  sqfs_inode inode;
  if (sqfs_inode_get(fs, &inode, sqfs_inode_root(fs)) != SQFS_OK)
    throw Error("image `" + image + "`: cannot read the root directory (corrupt?)");
  while (!todo.empty()) {
    std::string c = std::move(todo.back());
    todo.pop_back();
    if (c == ".") continue;
    if (c == "..") {
      if (!cur.empty()) cur.pop_back();
      continue;
    }
    std::string p;
    for (const auto& x : cur) p += "/" + x;
    p += "/" + c;
    sqfs_inode in;
    bool found = false;
    if (sqfs_inode_get(fs, &in, sqfs_inode_root(fs)) != SQFS_OK ||
        sqfs_lookup_path(fs, &in, p.c_str(), &found) != SQFS_OK || !found)
      return std::nullopt;
    if (S_ISLNK(in.base.mode)) {
      if (++links > 40) return std::nullopt;
      char target[4096] = {};
      size_t size = sizeof target;
      if (sqfs_readlink(fs, &in, target, &size) != SQFS_OK) return std::nullopt;
      std::string t(target, strnlen(target, sizeof target));
      if (!t.empty() && t.front() == '/') cur.clear();
      auto more = components(t);
      todo.insert(todo.end(), more.rbegin(), more.rend());
      continue;
    }
    cur.push_back(c);
    inode = in;
  }
  return inode;
}

std::optional<std::string> Image::read_file(const std::string& path, size_t limit) {
  auto found = lookup(&ll_->fs, path, path_);
  if (!found || !S_ISREG(found->base.mode)) return std::nullopt;
  sqfs_inode inode = *found;
  uint64_t size = inode.xtra.reg.file_size;
  if (size > limit)
    throw Error("image `" + path_ + "`: `" + path + "` is larger than " + std::to_string(limit) + " bytes");
  // rt's own reader, which bounds every block by what it holds, not the
  // library's sqfs_read_range.
  FileReader reader(&ll_->fs, 2, 0, source_.get());
  FileMap map;
  std::vector<iovec> iov;
  std::vector<std::shared_ptr<Block>> hold;
  if (!reader.map(&inode, map) || reader.read(map, 0, size, iov, hold) != 0)
    throw Error("image `" + path_ + "`: cannot read `" + path + "` (corrupt?)");
  std::string out;
  out.reserve(size);
  for (const iovec& v : iov) out.append(static_cast<const char*>(v.iov_base), v.iov_len);
  if (out.size() != size)
    throw Error("image `" + path_ + "`: `" + path + "` is shorter than its inode says (corrupt?)");
  return out;
}

std::vector<std::string> Image::list(const std::string& dir) {
  std::vector<std::string> out;
  auto found = lookup(&ll_->fs, dir, path_);
  if (!found || !S_ISDIR(found->base.mode)) return out;
  sqfs_dir d;
  if (sqfs_dir_open(&ll_->fs, &*found, &d, 0) != SQFS_OK) return out;
  sqfs_name name;
  sqfs_dir_entry entry;
  sqfs_dentry_init(&entry, name);
  sqfs_err err = SQFS_OK;
  while (sqfs_dir_next(&ll_->fs, &d, &entry, &err)) out.emplace_back(sqfs_dentry_name(&entry));
  return out;
}

bool Image::has(const std::string& path) { return lookup(&ll_->fs, path, path_).has_value(); }

int Image::mount(const std::string& mountpoint, uid_t uid, gid_t gid) {
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == EACCES || e == EPERM)
      throw Error("cannot open `/dev/fuse`: " + std::string(std::strerror(e)),
                  "SquashFS images need /dev/fuse readable and writable by everyone (mode 0666, as udev sets it)");
    if (e == ENOENT || e == ENODEV || e == ENXIO)
      throw Error("cannot open `/dev/fuse`: " + std::string(std::strerror(e)), "FUSE is not available on this node");
    throw SysError(e, "open", "/dev/fuse");
  }
  char opts[128];
  std::snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=%u,group_id=%u,default_permissions", fd, uid, gid);
  if (::mount("rt", mountpoint.c_str(), "fuse.rt", MS_NOSUID | MS_NODEV | MS_RDONLY, opts) != 0) {
    int e = errno;
    ::close(fd);
    throw SysError(e, "mount(fuse)", path_, mountpoint);
  }
  return fd;
}

void Image::mount_in_background(const std::string& mountpoint, uid_t uid, gid_t gid) {
  int fd = mount(mountpoint, uid, gid);
  if (!start_session(ll_, fd, uid, gid, source_.get())) {
    ::close(fd);
    throw Error("image `" + path_ + "`: cannot start the FUSE session");
  }
  if (source_) source_->serving();
}

}  // namespace rt::squash
