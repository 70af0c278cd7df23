// Pushing file data into the kernel's page cache ahead of a reader that
// walks a directory in order (tar, cp -a, rsync, a checksum of a tree), so
// that most of its reads never reach the server (namespace, server side).
//
// A cold read through FUSE costs a round trip per file, however small; a
// whole-image `tar` of a Debian image makes about 13,000 of them, one after
// the other. FUSE_NOTIFY_STORE (linux/fuse.h; the kernel needs the inode,
// which READDIRPLUS has given it) fills a file's pages without a request.
// The trigger is a read, not a listing: `ls` pushes nothing, nor does a
// program start (its files come by LOOKUP, not listed). A read of a listed
// file pushes the next few small files of its directory first (their bytes
// mostly share the fragment block just decompressed); the second file read
// in listing order queues the next files of that directory, a window at a
// time. In such a walk, each directory listed gets its first files pushed
// with the listing. Worker threads push, never the server's: a
// notification waits for pages the kernel holds locked for a READ.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "squash/file_reader.hpp"
#include "util/work_queue.hpp"

namespace rt::squash {

// Writes a whole regular file's data to the FUSE device `fuse_fd` as
// FUSE_NOTIFY_STORE notifications; false if the kernel took none (it has
// no such inode) or a block cannot be read.
bool store_file(int fuse_fd, uint64_t ino, const FileMap& map, FileReader& reader);

// Decides what to push, and pushes it with `push` (store_file, in the
// server) from `threads` workers.
class Pusher {
public:
  using Ino = uint64_t;  // FUSE node id
  using PushFn = std::function<void(Ino)>;

  Pusher(PushFn push, unsigned threads);
  ~Pusher() = default;  // the workers stop first (declared last)
  Pusher(const Pusher&) = delete;
  Pusher& operator=(const Pusher&) = delete;

  // Enables pushing once the kernel takes notifications (FUSE INIT).
  void start();

  // A READDIRPLUS answer for `dir` from listing offset `off` that ends at
  // `next`: its regular files, in order, with their sizes.
  // Returns files to push_now once the listing is answered (in a walk).
  std::vector<Ino> listed(Ino dir, off_t off, off_t next, const std::vector<std::pair<Ino, uint64_t>>& files);

  // A read at offset 0 of `ino`: returns the next files of its directory,
  // to push_now once the read is answered.
  std::vector<Ino> first_read(Ino ino);
  // Queues `files` ahead of everything queued.
  void push_now(const std::vector<Ino>& files);

  // Files waiting for a worker.
  size_t queued();

private:
  struct Dir {
    std::vector<Ino> files;
    std::vector<uint64_t> sizes;
    off_t next = 0;          // listing offset after the last recorded entry
    size_t last = SIZE_MAX;  // index of the last file read from offset 0
    size_t pushed_to = 0;    // files before this index are queued or pushed
    bool started = false;    // the lister has come back for more
  };
  struct Where {
    Ino dir;
    size_t index;
  };
  void take(Dir& d, size_t i, uint64_t budget, std::vector<Ino>& out);

  bool started_ = false;
  std::mutex mu_;
  std::unordered_map<Ino, Dir> dirs_;
  std::unordered_map<Ino, Where> where_;
  unsigned streak_ = 0;           // files lately read in listing order (capped)
  util::WorkQueue<Ino> workers_;  // last: its threads push
};

}  // namespace rt::squash
