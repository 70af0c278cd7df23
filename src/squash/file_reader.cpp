// Parallel reads of file data from a SquashFS image (see file_reader.hpp).
#include "squash/file_reader.hpp"

#include <unistd.h>

#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "squash/lazy.hpp"
#include "util/log.hpp"

extern "C" {
#include <squashfuse/file.h>
#include <squashfuse/fs.h>
#include <squashfuse/squashfs_fs.h>
}

namespace rt::squash {

// Buffers of one block size, kept for reuse: a fresh 128 KiB buffer comes
// from mmap(2) or a trimmed heap, and its first fill costs 32 page faults
// (a tenth of the server's time in a cold read of a whole image).
class BufferPool {
public:
  BufferPool(size_t size, size_t keep) : size_(size), keep_(keep) {}
  std::unique_ptr<char[]> get() {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!free_.empty()) {
        auto b = std::move(free_.back());
        free_.pop_back();
        return b;
      }
    }
    return std::unique_ptr<char[]>(new char[size_]);  // not zeroed: filled whole or cut to size
  }
  void put(std::unique_ptr<char[]> b) {
    std::lock_guard<std::mutex> g(mu_);
    if (free_.size() < keep_) free_.push_back(std::move(b));
  }

private:
  size_t size_, keep_;
  std::mutex mu_;
  std::vector<std::unique_ptr<char[]>> free_;
};

struct Block {
  sqfs_block* raw = nullptr;    // from squashfuse's decompressors
  std::unique_ptr<char[]> own;  // from ours (a pool buffer), or zeros
  size_t own_size = 0;
  std::shared_ptr<BufferPool> pool;  // where `own` goes back
  const char* data() const { return raw ? static_cast<const char*>(raw->data) : own.get(); }
  size_t size() const { return raw ? raw->size : own_size; }
  ~Block() {
    if (raw) sqfs_block_dispose(raw);
    if (pool && own) pool->put(std::move(own));
  }
};

namespace {

// zstd and lz4 blocks are decompressed here with a context and an input
// buffer kept per thread (squashfuse makes a fresh zstd context and two
// heap buffers per block, which halves the throughput); other algorithms
// go through squashfuse. Returns false on a corrupt or short block. The
// block's bytes go to a buffer of `pool`.
bool decompress_fast(sqfs* fs, uint64_t pos, uint32_t hdr, const std::shared_ptr<BufferPool>& pool, Block& out,
                     bool& handled) {
  const int comp = fs->sb.compression;
  handled = comp == ZSTD_COMPRESSION || comp == LZ4_COMPRESSION;
  if (!handled) return false;
  out.own = pool->get();
  out.pool = pool;
  const bool compressed = !(hdr & SQUASHFS_COMPRESSED_BIT_BLOCK);
  const uint32_t size = hdr & ~SQUASHFS_COMPRESSED_BIT_BLOCK;
  const size_t block_size = fs->sb.block_size;
  if (size > block_size + 4096) return false;
  thread_local std::vector<char> in;
  if (in.size() < size) in.resize(size);
  char* dst;
  if (compressed) {
    dst = in.data();
  } else {
    if (size > block_size) return false;
    out.own_size = size;
    dst = out.own.get();
  }
  for (size_t got = 0; got < size;) {
    ssize_t n = ::pread(fs->fd, dst + got, size - got, static_cast<off_t>(fs->offset + pos + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  if (!compressed) return true;
  if (comp == ZSTD_COMPRESSION) {
    thread_local ZSTD_DCtx* dctx = ZSTD_createDCtx();
    if (!dctx) return false;
    size_t n = ZSTD_decompressDCtx(dctx, out.own.get(), block_size, in.data(), size);
    if (ZSTD_isError(n)) return false;
    out.own_size = n;
  } else {
    int n = LZ4_decompress_safe(in.data(), out.own.get(), static_cast<int>(size), static_cast<int>(block_size));
    if (n < 0) return false;
    out.own_size = static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

FileReader::FileReader(sqfs* fs, size_t capacity, unsigned prefetchers, Source* source)
    : fs_(fs),
      source_(source),
      capacity_(capacity),
      // the cache, plus blocks held by replies and pushes in flight
      buffers_(std::make_shared<BufferPool>(fs->sb.block_size, capacity + 16)),
      prefetch_(prefetchers, [this](const FileMap::Extent& e) { block(e); }) {
  zeros_ = std::make_shared<Block>();
  zeros_->own.reset(new char[fs->sb.block_size]());
  zeros_->own_size = fs->sb.block_size;
}

FileReader::~FileReader() = default;

void FileReader::prefetch(const FileMap& f) {
  if (source_) {
    // A file still to fetch (a lazy image): all of it in a few large
    // requests rather than a request per page fault (its blocks lie one
    // after another); of a large file its ends first (want_rest).
    const auto [lo, hi] = span(f);
    if (lo < hi && hi - lo <= kWantWhole) {
      source_->want(fs_->offset + lo, hi - lo);
    } else if (lo < hi) {
      source_->want(fs_->offset + lo, kWantEnd);
      source_->want(fs_->offset + hi - kWantEnd, kWantEnd);
    }
    if (f.has_fragment) source_->want(fs_->offset + f.fragment.pos, f.fragment.bytes());
  }
  // Half the cache per file, so that prefetched blocks are not evicted
  // before they are read; a bounded queue, so that a burst of opens does
  // not queue work nobody waits for. Of a file still to fetch, only what
  // is there: this thread does not fetch (nor start a read-ahead stream).
  if (!prefetch_.serving() || prefetch_.size() > capacity_) return;
  const size_t per_file = capacity_ / 2;
  std::vector<FileMap::Extent> todo;
  {
    std::lock_guard<std::mutex> g(mu_);
    size_t n = 0;
    for (const auto& e : f.blocks) {
      if (n++ == per_file) break;
      if (e.hdr != 0 && !cache_.count(e.pos) && there(e)) todo.push_back(e);
    }
    if (f.has_fragment && n < per_file && !cache_.count(f.fragment.pos) && there(f.fragment))
      todo.push_back(f.fragment);
  }
  prefetch_.push(todo);
}

void FileReader::want_rest(const FileMap& f, std::string_view head) {
  if (!source_) return;
  const auto [lo, hi] = span(f);
  if (lo >= hi || hi - lo <= kWantWhole || head.starts_with("\x7f" "ELF")) return;
  source_->want(fs_->offset + lo + kWantEnd, std::min(hi - lo - 2 * kWantEnd, kWantLimit));
}

bool FileReader::there(const FileMap::Extent& e) const {
  return !source_ || source_->has(fs_->offset + e.pos, e.bytes());
}

std::pair<uint64_t, uint64_t> FileReader::span(const FileMap& f) {
  uint64_t lo = ~uint64_t{0}, hi = 0;
  for (const auto& e : f.blocks)
    if (e.hdr != 0) {
      lo = std::min(lo, e.pos);
      hi = std::max(hi, e.pos + e.bytes());
    }
  return {lo, hi};
}

bool FileReader::map(sqfs_inode* inode, FileMap& out) {
  out = FileMap{};
  out.size = inode->xtra.reg.file_size;
  sqfs_blocklist bl;
  sqfs_blocklist_init(fs_, inode, &bl);
  out.blocks.reserve(bl.remain);
  while (bl.remain) {
    if (sqfs_blocklist_next(&bl) != SQFS_OK) return false;
    out.blocks.push_back({bl.block, bl.header});
  }
  if (inode->xtra.reg.frag_idx != SQUASHFS_INVALID_FRAG) {
    squashfs_fragment_entry frag;
    if (sqfs_frag_entry(fs_, &frag, inode->xtra.reg.frag_idx) != SQFS_OK) return false;
    out.has_fragment = true;
    out.fragment = {frag.start_block, frag.size};
    out.fragment_offset = inode->xtra.reg.frag_off;
  }
  return true;
}

std::shared_ptr<Block> FileReader::block(const FileMap::Extent& e) {
  if (e.hdr == 0) return zeros_;
  std::promise<std::shared_ptr<Block>> promise;
  {
    std::unique_lock<std::mutex> g(mu_);
    auto it = cache_.find(e.pos);
    if (it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.at);
      Future f = it->second.block;
      g.unlock();  // wait for a block in flight without the lock
      return f.get();
    }
    lru_.push_front(e.pos);
    cache_.emplace(e.pos, Slot{promise.get_future().share(), lru_.begin()});
    while (cache_.size() > capacity_) {
      cache_.erase(lru_.back());
      lru_.pop_back();
    }
  }
  // Decompressed outside the lock; others asking for this block meanwhile
  // wait on the future.
  auto b = std::make_shared<Block>();
  bool handled = false;
  bool there = true;
  if (source_) {
    std::string why;
    there = source_->need(fs_->offset + e.pos, e.bytes(), &why);
    if (!there) util::warn("cannot read a block at byte " + std::to_string(fs_->offset + e.pos) + ": " + why);
  }
  bool ok = there && decompress_fast(fs_, e.pos, e.hdr, buffers_, *b, handled);
  if (there && !handled) {
    ok = sqfs_data_block_read(fs_, static_cast<sqfs_off_t>(e.pos), e.hdr, &b->raw) == SQFS_OK;
    if (!ok) b->raw = nullptr;
  }
  if (!ok) {
    b = nullptr;
    std::lock_guard<std::mutex> g(mu_);  // a corrupt block is not remembered
    auto it = cache_.find(e.pos);
    if (it != cache_.end()) {
      lru_.erase(it->second.at);
      cache_.erase(it);
    }
  }
  promise.set_value(b);
  return b;
}

int FileReader::read(const FileMap& f, uint64_t off, size_t size, std::vector<iovec>& iov,
                     std::vector<std::shared_ptr<Block>>& hold) {
  if (off >= f.size) return 0;
  const uint64_t bs = fs_->sb.block_size;
  const uint64_t end = std::min<uint64_t>(f.size, off + size);
  for (uint64_t pos = off; pos < end;) {
    uint64_t idx = pos / bs;
    uint64_t within = pos % bs;
    uint64_t len = std::min<uint64_t>(end - pos, bs - within);
    std::shared_ptr<Block> b;
    uint64_t base = 0;
    if (idx < f.blocks.size()) {
      b = block(f.blocks[idx]);
    } else if (f.has_fragment && idx == f.blocks.size()) {
      b = block(f.fragment);
      base = f.fragment_offset;
    } else {
      return EIO;  // the file claims bytes it has no block for
    }
    if (!b) return EIO;
    if (base + within + len > b->size()) return EIO;  // corrupt: a short block
    iov.push_back({const_cast<char*>(b->data()) + base + within, static_cast<size_t>(len)});
    hold.push_back(std::move(b));
    pos += len;
  }
  return 0;
}

}  // namespace rt::squash
