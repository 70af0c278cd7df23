// Reading regular files out of a SquashFS image for the FUSE server, in
// parallel: squashfuse's own read path shares unlocked caches and keeps one
// data block, so unaligned page-fault reads decompress the same block again
// and again. Here an open file carries its block list (read once, under the
// metadata lock), and decompressed blocks sit in a small shared cache;
// decompression itself runs outside any lock.
#pragma once
#include <sys/uio.h>

#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/work_queue.hpp"

extern "C" {
#include <squashfuse/ll.h>
}

namespace rt::squash {

struct Block;  // one decompressed data or fragment block
class Source;
class BufferPool;

// Where a file's bytes live: its data blocks, then its tail in a fragment.
struct FileMap {
  uint64_t size = 0;
  struct Extent {
    uint64_t pos;  // on disk
    uint32_t hdr;  // SquashFS size header; 0: a sparse block of zeros
    uint32_t bytes() const { return hdr & ~SQUASHFS_COMPRESSED_BIT_BLOCK; }  // its length on disk
  };
  std::vector<Extent> blocks;
  bool has_fragment = false;
  Extent fragment{};
  uint32_t fragment_offset = 0;
};

class FileReader {
public:
  // `fs` must outlive the reader; `capacity` is in blocks. `prefetchers`
  // threads decompress the first blocks of each opened file ahead of the
  // reads (a program's page faults come one at a time). `source`, when
  // given, is asked for each block's bytes before they are read.
  FileReader(sqfs* fs, size_t capacity, unsigned prefetchers, Source* source = nullptr);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Queues the first blocks of a file for decompression. Of a file still
  // to fetch, tells the source that all of it is wanted, or of a file
  // larger than kWantWhole, its first and last kWantEnd bytes.
  void prefetch(const FileMap& f);
  // The rest of such a file (up to kWantLimit) once its first bytes `head`
  // are read, unless they are an ELF object's: the loader reads an
  // object's headers, symbols and relocations at its start, its data at
  // its end, and of its code what runs (most of a math library is kernels
  // for other processors).
  void want_rest(const FileMap& f, std::string_view head);
  static constexpr uint64_t kWantLimit = 32 << 20;
  static constexpr uint64_t kWantWhole = 4 << 20;
  static constexpr uint64_t kWantEnd = 1 << 20;

  // Metadata side (call under the lock that guards squashfuse's caches).
  // Returns false if the inode's block list cannot be read.
  bool map(sqfs_inode* inode, FileMap& out);

  // Data side, thread-safe: the bytes [off, off + size) of a file as
  // iovecs into blocks kept alive by `hold`. Returns 0 or an errno.
  int read(const FileMap& f, uint64_t off, size_t size, std::vector<iovec>& iov,
           std::vector<std::shared_ptr<Block>>& hold);

private:
  using Future = std::shared_future<std::shared_ptr<Block>>;
  // Where a file's blocks lie in the image: [first byte, end).
  static std::pair<uint64_t, uint64_t> span(const FileMap& f);
  // Whether an extent is there to read without fetching it.
  bool there(const FileMap::Extent& e) const;
  std::shared_ptr<Block> block(const FileMap::Extent& e);

  sqfs* fs_;
  Source* source_;
  size_t capacity_;
  std::mutex mu_;
  std::list<uint64_t> lru_;  // most recent at the front
  struct Slot {
    Future block;  // ready, or being decompressed by another thread
    std::list<uint64_t>::iterator at;
  };
  std::unordered_map<uint64_t, Slot> cache_;
  std::shared_ptr<Block> zeros_;
  std::shared_ptr<BufferPool> buffers_;
  util::WorkQueue<FileMap::Extent> prefetch_;  // last: its workers use the rest
};

}  // namespace rt::squash
