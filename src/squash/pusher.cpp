// Pushing file data into the kernel's page cache (see pusher.hpp).
#include "squash/pusher.hpp"

#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace rt::squash {
namespace {

constexpr uint64_t kWindow = 8u << 20;       // bytes queued per step of a walk
constexpr size_t kChunk = 1u << 20;          // bytes per notification
constexpr size_t kMaxKnownFiles = 1u << 20;  // listing records kept, then forgotten
constexpr size_t kMaxQueued = 4096;          // files waiting for a worker
constexpr uint64_t kNear = 128u << 10;       // bytes of next files pushed by the reading thread
constexpr unsigned kStreak = 3;              // files read in listing order that make a walk

}  // namespace

Pusher::Pusher(PushFn push, unsigned threads) : workers_(threads, std::move(push)) {}

void Pusher::start() {
  std::lock_guard<std::mutex> g(mu_);
  started_ = true;
}

std::vector<Pusher::Ino> Pusher::listed(Ino dir, off_t off, off_t next,
                                        const std::vector<std::pair<Ino, uint64_t>>& files) {
  std::vector<Ino> near;
  std::lock_guard<std::mutex> g(mu_);
  if (!started_) return near;
  if (where_.size() + files.size() > kMaxKnownFiles) {
    where_.clear();
    dirs_.clear();
  }
  Dir& d = dirs_[dir];
  // A listing read again (another reader, or after the kernel dropped its
  // cached copy) adds nothing: only the continuation of the recorded part.
  if (off != d.next) return near;
  for (const auto& [ino, size] : files) {
    where_[ino] = {dir, d.files.size()};
    d.files.push_back(ino);
    d.sizes.push_back(size);
  }
  // In the middle of a walk, a directory listed is the walker's next one:
  // its first files go before it asks. Not with the first part of the
  // listing: the kernel makes the inodes as the lister takes the answer,
  // after the server has sent it, and a push to an inode not yet made is
  // lost. It asks again (for more, or for the end) once it has them.
  if (off > 0 && !d.started && streak_ >= kStreak) take(d, 0, kNear, near);
  d.started = d.started || off > 0;
  d.next = next;
  return near;
}

// Appends files of `d` from index `i` (or where pushing reached) to `out`,
// up to `budget` bytes.
void Pusher::take(Dir& d, size_t i, uint64_t budget, std::vector<Ino>& out) {
  size_t k = std::max(i, d.pushed_to);
  for (uint64_t bytes = 0; k < d.files.size() && bytes < budget; ++k) {
    bytes += d.sizes[k];
    out.push_back(d.files[k]);
  }
  d.pushed_to = std::max(d.pushed_to, k);
}

std::vector<Pusher::Ino> Pusher::first_read(Ino ino) {
  std::vector<Ino> near;
  std::lock_guard<std::mutex> g(mu_);
  if (!started_) return near;
  auto w = where_.find(ino);
  if (w == where_.end()) return near;
  Dir& d = dirs_[w->second.dir];
  const size_t i = w->second.index;
  // In order: the next file after the last one read, or (the pushed ones
  // read from the cache, unseen) one up to where pushing reached.
  const bool walking =
      d.last == SIZE_MAX ? d.pushed_to > 0 && i <= d.pushed_to : i > d.last && i <= std::max(d.last + 1, d.pushed_to);
  d.last = i;
  if (walking)
    streak_ = std::min(streak_ + 1, kStreak);
  else if (i != 0)
    streak_ = 0;
  // The next small files, for the caller to push at once: their bytes
  // mostly sit in the fragment block just decompressed for this one.
  take(d, i + 1, kNear, near);
  if (walking && workers_.size() < kMaxQueued) {
    std::vector<Ino> more;
    take(d, i + 1, kWindow, more);
    workers_.push(more);
  }
  return near;
}

// Never from the server's own threads: a notification blocks on a page
// the kernel holds locked for a READ, which only a free server thread can
// answer; with every server thread pushing, nothing would.
void Pusher::push_now(const std::vector<Ino>& files) { workers_.push_front(files); }

size_t Pusher::queued() { return workers_.size(); }

// Notifications of kChunk bytes written straight to the device: header,
// fuse_notify_store_out, then the data as iovecs into the decompressed
// blocks. A failure only costs the push: the reader's own READ still finds
// the data.
bool store_file(int fuse_fd, uint64_t ino, const FileMap& map, FileReader& reader) {
  for (uint64_t off = 0; off < map.size; off += kChunk) {
    std::vector<iovec> iov(2);
    std::vector<std::shared_ptr<Block>> hold;
    if (reader.read(map, off, kChunk, iov, hold) != 0) return false;
    size_t size = 0;
    for (size_t j = 2; j < iov.size(); ++j) size += iov[j].iov_len;
    fuse_out_header out{};
    fuse_notify_store_out arg{};
    out.len = static_cast<uint32_t>(sizeof out + sizeof arg + size);
    out.error = FUSE_NOTIFY_STORE;
    arg.nodeid = ino;
    arg.offset = off;
    arg.size = static_cast<uint32_t>(size);
    iov[0] = {&out, sizeof out};
    iov[1] = {&arg, sizeof arg};
    // ENOENT: the kernel has forgotten the inode (or never had it); ENODEV:
    // the mount is going away.
    if (::writev(fuse_fd, iov.data(), static_cast<int>(iov.size())) < 0) return false;
  }
  return true;
}

}  // namespace rt::squash
