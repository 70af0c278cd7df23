// FUSE operations for SquashFS images (namespace, server side).
//
// squashfuse's metadata operations (lookup, getattr, readlink, xattrs) run
// one at a time under a lock: its caches are not thread-safe. Directory
// listings and file data are rt's own: listings answer READDIRPLUS, so a
// walk of the tree needs no LOOKUP per entry; files and directories need no
// OPEN/RELEASE round trip where the kernel supports skipping them; file
// data comes from a FileReader, decompressed in parallel, and a Pusher
// fills the page cache ahead of a reader walking a directory in order.
#include "squash/fuse_ops.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "squash/file_reader.hpp"
#include "squash/pusher.hpp"

extern "C" {
#include <squashfuse/dir.h>
#include <squashfuse/fs.h>
#include <squashfuse/squashfs_fs.h>
sqfs_err sqfs_stat(sqfs* fs, sqfs_inode* inode, struct stat* st);
}

namespace rt::squash {
namespace {

constexpr size_t kCachedBlocks = 64;        // 8 MiB of 128 KiB blocks
constexpr size_t kMaxMaps = 4096;           // file block lists kept for open-less reads
constexpr double kForever = 86400.0 * 365;  // the image never changes under the mount

// Pushing threads: half the processors this server may run on (a job's
// cpuset, not the machine), 2 to 8. On 16 processors 8 pushers read a whole
// image cold in 0.89 of the time 2 take; on 2 they make no difference.
unsigned pushers() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int n = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 2;
  return static_cast<unsigned>(std::clamp(n / 2, 2, 8));
}

std::mutex g_meta;  // squashfuse's caches
sqfs_ll* g_ll = nullptr;
std::unique_ptr<FileReader> g_reader;
std::unique_ptr<Pusher> g_pusher;
int g_fd = -1;  // the FUSE device
bool g_no_open = false, g_no_opendir = false;
uid_t g_owner = 0;  // every entry's owner, as a directory image's entries are the user's
gid_t g_group = 0;
bool g_xattrs = false;                                                  // the image has an xattr table
std::unordered_map<fuse_ino_t, std::shared_ptr<const FileMap>> g_maps;  // under g_meta

template <auto Op, class... Args>
void locked(Args... args) {
  std::lock_guard<std::mutex> g(g_meta);
  Op(args...);
}

void op_init(void*, fuse_conn_info* conn) {
  if (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) {
    conn->want |= FUSE_CAP_NO_OPEN_SUPPORT;
    g_no_open = true;
  }
  if (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) {
    conn->want |= FUSE_CAP_NO_OPENDIR_SUPPORT;
    g_no_opendir = true;
  }
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;  // always READDIRPLUS
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  if (conn->proto_minor >= 15) g_pusher->start();  // FUSE_NOTIFY_STORE
}

// The block list of a regular file, or an errno.
int file_map(fuse_ino_t ino, std::shared_ptr<const FileMap>& out, bool prefetch) {
  std::shared_ptr<FileMap> map;
  {
    std::lock_guard<std::mutex> g(g_meta);
    if (auto it = g_maps.find(ino); it != g_maps.end()) {
      out = it->second;
      return 0;
    }
    sqfs_inode inode;
    if (sqfs_ll_inode(g_ll, &inode, ino) != SQFS_OK) return ENOENT;
    if (!S_ISREG(inode.base.mode)) return EISDIR;
    map = std::make_shared<FileMap>();
    if (!g_reader->map(&inode, *map)) return EIO;
    if (g_maps.size() >= kMaxMaps) g_maps.clear();
    g_maps.emplace(ino, map);
  }
  if (prefetch) g_reader->prefetch(*map);
  out = std::move(map);
  return 0;
}

void push_file(Pusher::Ino ino) {
  std::shared_ptr<const FileMap> map;
  if (file_map(ino, map, false) == 0) store_file(g_fd, ino, *map, *g_reader);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (fi->flags & (O_WRONLY | O_RDWR)) {
    fuse_reply_err(req, EROFS);
    return;
  }
  if (g_no_open) {  // the kernel stops sending OPEN and RELEASE
    fuse_reply_err(req, ENOSYS);
    return;
  }
  std::shared_ptr<const FileMap> map;
  if (int err = file_map(ino, map, true)) {
    fuse_reply_err(req, err);
    return;
  }
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  std::shared_ptr<const FileMap> map;
  int err = off < 0 ? EINVAL : file_map(ino, map, off == 0);
  std::vector<iovec> iov;
  std::vector<std::shared_ptr<Block>> hold;
  if (!err) err = g_reader->read(*map, static_cast<uint64_t>(off), size, iov, hold);
  std::vector<Pusher::Ino> next;
  if (!err && off == 0) {
    next = g_pusher->first_read(ino);
    if (!iov.empty()) g_reader->want_rest(*map, {static_cast<const char*>(iov[0].iov_base), iov[0].iov_len});
  }
  if (err)
    fuse_reply_err(req, err);
  else
    fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
  g_pusher->push_now(next);
}

// `ino`'s inode (under g_meta). When it has none, or `want_dir` and it is
// not a directory, replies ENOENT or ENOTDIR and returns false.
bool inode_or_reply(fuse_req_t req, fuse_ino_t ino, sqfs_inode& inode, bool want_dir) {
  if (sqfs_ll_inode(g_ll, &inode, ino) != SQFS_OK) {
    fuse_reply_err(req, ENOENT);
    return false;
  }
  if (want_dir && !S_ISDIR(inode.base.mode)) {
    fuse_reply_err(req, ENOTDIR);
    return false;
  }
  return true;
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (g_no_opendir) {
    fuse_reply_err(req, ENOSYS);
    return;
  }
  std::lock_guard<std::mutex> g(g_meta);
  sqfs_inode inode;
  if (!inode_or_reply(req, ino, inode, true)) return;
  fi->keep_cache = 1;
  fi->cache_readdir = 1;
  fuse_reply_open(req, fi);
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

// An entry's attributes as the container sees them: the image's modes, the
// mount's user as owner. A directory image's files belong to the user who
// unpacked it; the SquashFS form of the same image must let that user read
// the same files (its 0600 and 0700 entries), not show them as nobody's.
bool attributes(sqfs_inode& inode, struct stat& st) {
  if (sqfs_stat(&g_ll->fs, &inode, &st) != SQFS_OK) return false;
  st.st_uid = g_owner;
  st.st_gid = g_group;
  return true;
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  std::lock_guard<std::mutex> g(g_meta);
  sqfs_inode inode;
  struct stat st {};
  if (!inode_or_reply(req, ino, inode, false)) return;
  if (!attributes(inode, st)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  st.st_ino = ino;
  fuse_reply_attr(req, &st, kForever);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::lock_guard<std::mutex> g(g_meta);
  sqfs_inode dir;
  if (!inode_or_reply(req, parent, dir, true)) return;
  sqfs_name buf;
  sqfs_dir_entry entry;
  sqfs_dentry_init(&entry, buf);
  bool found = false;
  if (sqfs_dir_lookup(&g_ll->fs, &dir, name, std::strlen(name), &entry, &found) != SQFS_OK) {
    fuse_reply_err(req, EIO);
    return;
  }
  fuse_entry_param e{};
  e.entry_timeout = kForever;  // absent names too: the image never changes
  if (found) {
    sqfs_inode inode;
    if (sqfs_inode_get(&g_ll->fs, &inode, sqfs_dentry_inode(&entry)) != SQFS_OK || !attributes(inode, e.attr)) {
      fuse_reply_err(req, EIO);
      return;
    }
    e.ino = g_ll->ino_register(g_ll, &entry);
    e.attr.st_ino = e.ino;
    e.attr_timeout = kForever;
  }
  fuse_reply_entry(req, &e);
}

// An image without xattrs (rt writes none) answers ENOSYS once: the kernel
// then stops asking, where `ls -l` would ask twice per file.
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (g_xattrs)
    locked<sqfs_ll_op_getxattr>(req, ino, name, size);
  else
    fuse_reply_err(req, ENOSYS);
}
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  if (g_xattrs)
    locked<sqfs_ll_op_listxattr>(req, ino, size);
  else
    fuse_reply_err(req, ENOSYS);
}

// READDIR and READDIRPLUS: as many entries from `off` as fit in `size`.
void list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  // One buffer per server thread, not zeroed: libfuse writes each entry
  // whole, padding included, and only `used` bytes are sent (zeroing the
  // request's whole size every time showed in a cold walk's profile).
  thread_local std::unique_ptr<char[]> buffer;
  thread_local size_t buffer_size = 0;
  if (buffer_size < size) {
    buffer.reset(new char[size]);
    buffer_size = size;
  }
  char* const buf = buffer.get();
  size_t used = 0;
  std::vector<std::pair<Pusher::Ino, uint64_t>> files;  // regular files listed
  off_t next = off;
  std::unique_lock<std::mutex> g(g_meta);
  sqfs* fs = &g_ll->fs;
  sqfs_inode dir_inode;
  sqfs_dir dir;
  if (!inode_or_reply(req, ino, dir_inode, false)) return;
  if (sqfs_dir_open(fs, &dir_inode, &dir, off) != SQFS_OK) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  sqfs_name name;
  sqfs_dir_entry entry;
  sqfs_dentry_init(&entry, name);
  sqfs_err err = SQFS_OK;
  while (sqfs_dir_next(fs, &dir, &entry, &err)) {
    const off_t after = static_cast<off_t>(sqfs_dentry_next_offset(&entry));
    size_t n;
    if (plus) {
      fuse_entry_param e{};
      sqfs_inode inode;
      if (sqfs_inode_get(fs, &inode, sqfs_dentry_inode(&entry)) != SQFS_OK || !attributes(inode, e.attr)) {
        err = SQFS_ERR;
        break;
      }
      // Measure first: an entry that does not fit must not count as looked up.
      n = fuse_add_direntry_plus(req, nullptr, 0, sqfs_dentry_name(&entry), &e, after);
      if (n > size - used) break;
      e.ino = g_ll->ino_register(g_ll, &entry);
      e.attr.st_ino = e.ino;
      e.attr_timeout = e.entry_timeout = kForever;
      fuse_add_direntry_plus(req, buf + used, size - used, sqfs_dentry_name(&entry), &e, after);
      if (S_ISREG(e.attr.st_mode)) files.emplace_back(e.ino, static_cast<uint64_t>(e.attr.st_size));
    } else {
      struct stat st {};
      st.st_ino = g_ll->ino_fuse_num(g_ll, &entry);
      st.st_mode = sqfs_dentry_mode(&entry);
      n = fuse_add_direntry(req, buf + used, size - used, sqfs_dentry_name(&entry), &st, after);
      if (n > size - used) break;
    }
    used += n;
    next = after;
  }
  g.unlock();
  std::vector<Pusher::Ino> first;
  if (plus) first = g_pusher->listed(ino, off, next, files);
  if (err != SQFS_OK && used == 0)
    fuse_reply_err(req, EIO);
  else
    fuse_reply_buf(req, buf, used);
  g_pusher->push_now(first);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  list(req, ino, size, off, false);
}
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  list(req, ino, size, off, true);
}

}  // namespace

void serving(fuse_session* se) { g_fd = fuse_session_fd(se); }

fuse_lowlevel_ops server_ops(sqfs_ll* ll, uid_t owner, gid_t group, Source* source) {
  g_ll = ll;
  g_owner = owner;
  g_group = group;
  g_xattrs =
      static_cast<int64_t>(ll->fs.sb.xattr_id_table_start) != SQUASHFS_INVALID_BLK && ll->fs.xattr_info.xattr_ids > 0;
  g_reader = std::make_unique<FileReader>(&ll->fs, kCachedBlocks, 1, source);
  g_pusher = std::make_unique<Pusher>(push_file, pushers());
  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = locked<sqfs_ll_op_forget, fuse_req_t, fuse_ino_t, uint64_t>;
  ops.getattr = op_getattr;
  ops.readlink = locked<sqfs_ll_op_readlink, fuse_req_t, fuse_ino_t>;
  ops.open = op_open;
  ops.read = op_read;
  ops.release = op_release;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.readdirplus = op_readdirplus;
  ops.releasedir = op_releasedir;
  ops.statfs = locked<stfs_ll_op_statfs, fuse_req_t, fuse_ino_t>;
  ops.getxattr = op_getxattr;
  ops.listxattr = op_listxattr;
  ops.create = locked<sqfs_ll_op_create, fuse_req_t, fuse_ino_t, const char*, mode_t, fuse_file_info*>;
  return ops;
}

}  // namespace rt::squash
