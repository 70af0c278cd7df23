// SquashFS metadata checks before libsquashfuse (host and namespace); see
// verify.hpp. The layout is SquashFS 4.0's, little-endian throughout.
#include "squash/verify.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <stdexcept>
#include <unordered_set>
#include <vector>

extern "C" {
#include <squashfuse/decompress.h>
#include <squashfuse/squashfs_fs.h>
}

#include "rt/error.hpp"
#include "squash/lazy.hpp"
#include "squash/le.hpp"
#include "util/fs.hpp"

namespace rt::squash {
namespace {

constexpr uint64_t kMeta = SQUASHFS_METADATA_SIZE;
constexpr uint64_t kNone = ~uint64_t{0};
constexpr uint32_t kNoIndex = 0xffffffffU;  // no fragment, no xattrs
constexpr size_t kMaxLink = 4095;           // a symlink target, as PATH_MAX allows

// What is wrong, before the image's name is put in front.
struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void bad(const std::string& why) { throw Bad(why); }

// The image's bytes: `size` of them from `base` in the file.
class File {
public:
  File(int fd, uint64_t base, uint64_t size, Source* source) : fd_(fd), base_(base), size_(size), source_(source) {}
  uint64_t size() const { return size_; }
  std::string read(uint64_t pos, uint64_t n, const std::string& what) const {
    if (pos > size_ || n > size_ - pos) bad(what + " lies past the end of the file");
    std::string why;
    if (source_ && !source_->need(base_ + pos, n, &why)) bad("cannot read " + what + ": " + why);
    std::string out = util::read_at(fd_, base_ + pos, n, what);
    if (out.size() < n) bad(what + " lies past the end of the file");
    return out;
  }

private:
  int fd_;
  uint64_t base_, size_;
  Source* source_;
};

struct Super {
  uint32_t inodes, block_size, fragments;
  uint16_t compression, block_log, no_ids, major, minor;
  uint64_t root, bytes_used, id_table, xattr_table, inode_table, dir_table, frag_table, export_table;
};

Super read_super(const File& f) {
  if (f.size() < sizeof(squashfs_super_block)) bad("truncated: smaller than a SquashFS superblock");
  std::string s = f.read(0, sizeof(squashfs_super_block), "the superblock");
  if (le<uint32_t>(s, 0) != SQUASHFS_MAGIC) bad("not a SquashFS file (no `hsqs` magic)");
  Super sb{le<uint32_t>(s, 4),  le<uint32_t>(s, 12), le<uint32_t>(s, 16), le<uint16_t>(s, 20),
           le<uint16_t>(s, 22), le<uint16_t>(s, 26), le<uint16_t>(s, 28), le<uint16_t>(s, 30),
           le<uint64_t>(s, 32), le<uint64_t>(s, 40), le<uint64_t>(s, 48), le<uint64_t>(s, 56),
           le<uint64_t>(s, 64), le<uint64_t>(s, 72), le<uint64_t>(s, 80), le<uint64_t>(s, 88)};
  if (sb.major != 4 || sb.minor != 0)
    bad("SquashFS version " + std::to_string(sb.major) + "." + std::to_string(sb.minor) + " (rt reads 4.0)");
  if (sb.block_size < 4096 || sb.block_size > (1U << 20) || (sb.block_size & (sb.block_size - 1)) ||
      sb.block_log >= 32 || (1U << sb.block_log) != sb.block_size)
    bad("corrupt superblock: block size " + std::to_string(sb.block_size) + " (log " + std::to_string(sb.block_log) +
        "); SquashFS allows a power of two from 4 KiB to 1 MiB");
  if (sb.bytes_used > f.size())
    bad("truncated: the superblock says " + std::to_string(sb.bytes_used) + " bytes, the file has " +
        std::to_string(f.size()));
  if (sb.no_ids == 0) bad("corrupt superblock: no uid/gid table entries");
  auto within = [&](uint64_t v, const char* what) {
    if (v < sizeof(squashfs_super_block) || v >= sb.bytes_used)
      bad(std::string("corrupt superblock: the ") + what + " starts outside the image");
  };
  within(sb.inode_table, "inode table");
  within(sb.dir_table, "directory table");
  within(sb.id_table, "uid/gid table");
  if (sb.dir_table <= sb.inode_table) bad("corrupt superblock: the directory table starts before the inode table");
  if (sb.fragments) within(sb.frag_table, "fragment table");
  if (sb.export_table != kNone) within(sb.export_table, "export table");
  if (sb.xattr_table != kNone) within(sb.xattr_table, "xattr table");
  return sb;
}

struct MetaBlock {
  std::string data;
  uint64_t next;  // where the following block starts, in the file
};

// One metadata block at `pos`, which must end by `limit`.
MetaBlock read_meta(const File& f, sqfs_decompressor decompress, uint64_t pos, uint64_t limit,
                    const std::string& what) {
  uint16_t hdr = le<uint16_t>(f.read(pos, 2, what), 0);
  uint64_t size = hdr & ~SQUASHFS_COMPRESSED_BIT;
  if (size == 0 || size > kMeta) bad(what + ": a metadata block of " + std::to_string(size) + " bytes");
  if (pos + 2 + size > limit) bad(what + " runs past its end");
  std::string raw = f.read(pos + 2, size, what);
  MetaBlock b{std::move(raw), pos + 2 + size};
  if (!(hdr & SQUASHFS_COMPRESSED_BIT)) {
    std::string out(kMeta, '\0');
    size_t outsz = kMeta;
    if (decompress(b.data.data(), size, out.data(), &outsz) != SQFS_OK || outsz == 0)
      bad(what + ": a metadata block does not decompress");
    out.resize(outsz);
    b.data = std::move(out);
  }
  return b;
}

// A position in a metadata table, as libsquashfuse keeps it: a block's
// offset from the table's start and an offset in its decompressed bytes.
struct Cursor {
  uint64_t block;
  uint64_t offset;
};

// The inode or directory table, read block by block in order as far as a
// reference needs: a reference must land on a block's start.
class MetaTable {
public:
  MetaTable(const File& f, sqfs_decompressor d, uint64_t start, uint64_t end, std::string name)
      : f_(f), d_(d), start_(start), end_(end), name_(std::move(name)) {}

  const MetaBlock& block(uint64_t rel) {
    while (loaded_ <= rel && start_ + loaded_ < end_) {
      MetaBlock b = read_meta(f_, d_, start_ + loaded_, end_, "the " + name_);
      uint64_t here = loaded_;
      loaded_ = b.next - start_;
      blocks_.emplace(here, std::move(b));
    }
    auto it = blocks_.find(rel);
    if (it == blocks_.end())
      bad("the " + name_ + ": a reference to offset " + std::to_string(rel) +
          (start_ + rel >= end_ ? " lies past the table" : " is not the start of a metadata block"));
    return it->second;
  }

  // `n` bytes at `c`, which moves past them.
  std::string read(Cursor& c, uint64_t n) {
    std::string out;
    while (n > 0) {
      const MetaBlock& b = block(c.block);
      if (c.offset >= b.data.size())
        bad("the " + name_ + ": offset " + std::to_string(c.offset) + " lies past a block of " +
            std::to_string(b.data.size()) + " bytes");
      uint64_t take = std::min<uint64_t>(n, b.data.size() - c.offset);
      out.append(b.data, c.offset, take);
      n -= take;
      c.offset += take;
      if (c.offset == b.data.size()) c = {b.next - start_, 0};
    }
    return out;
  }

  // True when `c` is where a read may start.
  bool valid(Cursor c) {
    if (start_ + c.block >= end_) return false;
    return c.offset < block(c.block).data.size();
  }
  const std::string& name() const { return name_; }

private:
  const File& f_;
  sqfs_decompressor d_;
  uint64_t start_, end_;
  std::string name_;
  uint64_t loaded_ = 0;
  std::map<uint64_t, MetaBlock> blocks_;
};

// A table of `count` entries of `entry` bytes in metadata blocks listed at
// `index`; `each` sees every entry.
template <class Each>
void check_table(const File& f, sqfs_decompressor d, const Super& sb, uint64_t index, uint64_t count, size_t entry,
                 const std::string& name, Each each) {
  const uint64_t bytes = count * entry;
  const uint64_t blocks = (bytes + kMeta - 1) / kMeta;
  if (index + blocks * 8 > sb.bytes_used) bad("the " + name + "'s index runs past the image");
  std::string list = f.read(index, blocks * 8, "the " + name + "'s index");
  for (uint64_t i = 0; i < blocks; ++i) {
    uint64_t pos = le<uint64_t>(list, i * 8);
    if (pos < sizeof(squashfs_super_block) || pos >= index) bad("the " + name + ": a block outside the image");
    MetaBlock b = read_meta(f, d, pos, index, "the " + name);
    uint64_t want = std::min(kMeta, bytes - i * kMeta);
    if (b.data.size() < want) bad("the " + name + ": a short block");
    for (uint64_t at = 0; at + entry <= want; at += entry) each(b.data, at);
  }
}

class Walker {
public:
  Walker(const File& f, const Super& sb, sqfs_decompressor d, const VerifyLimits& limits)
      : sb_(sb),
        limits_(limits),
        inodes_(f, d, sb.inode_table, sb.dir_table, "inode table"),
        dirs_(f, d, sb.dir_table, first_table_after_dirs(), "directory table") {
    if (sb.xattr_table != kNone) {
      std::string h = f.read(sb.xattr_table, 16, "the xattr table");
      const uint64_t kv_start = le<uint64_t>(h, 0);
      xattr_ids_ = le<uint32_t>(h, 8);
      if (kv_start < sizeof(squashfs_super_block) || kv_start >= sb.xattr_table)
        bad("corrupt superblock: the xattr values start outside the image");
      MetaTable kv(f, d, kv_start, sb.xattr_table, "xattr table");
      check_table(f, d, sb, sb.xattr_table + 16, xattr_ids_, 16, "xattr id table",
                  [&](const std::string& s, uint64_t at) { xattrs(kv, le<uint64_t>(s, at), le<uint32_t>(s, at + 8)); });
    }
    check_table(f, d, sb, sb.id_table, sb.no_ids, 4, "uid/gid table", [](const std::string&, uint64_t) {});
    if (sb.fragments)
      check_table(f, d, sb, sb.frag_table, sb.fragments, 16, "fragment table", [&](const std::string& s, uint64_t at) {
        uint64_t start = le<uint64_t>(s, at);
        uint32_t size = le<uint32_t>(s, at + 8) & ~SQUASHFS_COMPRESSED_BIT_BLOCK;
        if (size == 0 || size > sb.block_size || start > sb.bytes_used || size > sb.bytes_used - start)
          bad("the fragment table: a fragment outside the image");
      });
    if (sb.export_table != kNone)
      check_table(f, d, sb, sb.export_table, sb.inodes, 8, "export table", [&](const std::string& s, uint64_t at) {
        if (!inodes_.valid(ref(le<uint64_t>(s, at)))) bad("the export table: a reference outside the inode table");
      });
  }

  void walk() {
    Dir root;
    if (inode(sb_.root, SQUASHFS_DIR_TYPE, &root) != SQUASHFS_DIR_TYPE) bad("the root is not a directory");
    std::vector<Dir> todo{root};
    seen_dirs_.insert(sb_.root);
    while (!todo.empty()) {
      Dir d = std::move(todo.back());
      todo.pop_back();
      listing(d, todo);
    }
  }

private:
  struct Dir {
    uint64_t ref = 0;
    Cursor at{};
    uint64_t size = 0;  // the listing's bytes
    struct Index {
      uint32_t index, start_block;
    };
    std::vector<Index> indexes;
  };

  uint64_t first_table_after_dirs() const {
    uint64_t end = sb_.bytes_used;
    for (uint64_t t : {sb_.id_table, sb_.frag_table, sb_.export_table, sb_.xattr_table})
      if (t != kNone && t > sb_.dir_table && t < end) end = t;
    return end;  // the tables' blocks lie before their indexes, and check_table bounds them
  }

  static Cursor ref(uint64_t r) { return {r >> 16, r & 0xffff}; }

  // One inode's `count` extended attributes at `r`: names of a known
  // prefix and at most 255 bytes, values of at most 64 KiB, stored inline
  // or out of line.
  static void xattrs(MetaTable& kv, uint64_t r, uint32_t count) {
    Cursor c = ref(r);
    for (; count > 0; --count) {
      std::string key = kv.read(c, 4);
      const uint16_t type = le<uint16_t>(key, 0), name = le<uint16_t>(key, 2);
      if ((type & 0xff) > 2 || (type & ~0x1ffu) || name == 0 || name > 255) bad("the xattr table: a bad key");
      kv.read(c, name);
      uint32_t size = le<uint32_t>(kv.read(c, 4), 0);
      if (type & 0x100) {  // out of line: a reference to the value
        if (size != 8) bad("the xattr table: a bad out-of-line value");
        Cursor v = ref(le<uint64_t>(kv.read(c, 8), 0));
        size = le<uint32_t>(kv.read(v, 4), 0);
        if (size > (1u << 16)) bad("the xattr table: a value of " + std::to_string(size) + " bytes");
        kv.read(v, size);
      } else {
        if (size > (1u << 16)) bad("the xattr table: a value of " + std::to_string(size) + " bytes");
        kv.read(c, size);
      }
    }
  }

  // Reads the inode at `r` and checks it; a directory's listing goes to
  // `dir`. Returns the inode's basic type (1-7).
  unsigned inode(uint64_t r, unsigned want, Dir* dir) {
    Cursor c = ref(r);
    std::string base = inodes_.read(c, 16);
    unsigned type = le<uint16_t>(base, 0);
    if (type < 1 || type > 14) bad("an inode of unknown type " + std::to_string(type));
    unsigned basic = type > 7 ? type - 7 : type;
    if (basic != want) bad("a directory entry's type disagrees with its inode");
    if (le<uint16_t>(base, 4) >= sb_.no_ids || le<uint16_t>(base, 6) >= sb_.no_ids)
      bad("an inode's owner lies outside the uid/gid table");
    uint32_t number = le<uint32_t>(base, 12);
    if (number == 0 || number > sb_.inodes) bad("an inode number outside the image's count");
    auto xattr = [&](uint32_t x) {
      if (x != kNoIndex && x >= xattr_ids_) bad("an inode's xattrs lie outside the xattr table");
    };
    switch (type) {
      case SQUASHFS_DIR_TYPE: {
        std::string s = inodes_.read(c, 16);
        *dir = Dir{r, {le<uint32_t>(s, 0), le<uint16_t>(s, 10)}, le<uint16_t>(s, 8), {}};
        break;
      }
      case SQUASHFS_LDIR_TYPE: {
        std::string s = inodes_.read(c, 24);
        *dir = Dir{r, {le<uint32_t>(s, 8), le<uint16_t>(s, 18)}, le<uint32_t>(s, 4), {}};
        xattr(le<uint32_t>(s, 20));
        for (unsigned n = le<uint16_t>(s, 16); n > 0; --n) {
          std::string idx = inodes_.read(c, 12);
          uint32_t name = le<uint32_t>(idx, 8) + 1;
          if (name > SQUASHFS_NAME_LEN) bad("a directory index names more than 256 bytes");
          inodes_.read(c, name);
          dir->indexes.push_back({le<uint32_t>(idx, 0), le<uint32_t>(idx, 4)});
        }
        break;
      }
      case SQUASHFS_REG_TYPE: {
        std::string s = inodes_.read(c, 16);
        blocks(c, le<uint32_t>(s, 0), le<uint32_t>(s, 12), le<uint32_t>(s, 4), le<uint32_t>(s, 8));
        break;
      }
      case SQUASHFS_LREG_TYPE: {
        std::string s = inodes_.read(c, 40);
        xattr(le<uint32_t>(s, 36));
        blocks(c, le<uint64_t>(s, 0), le<uint64_t>(s, 8), le<uint32_t>(s, 28), le<uint32_t>(s, 32));
        break;
      }
      case SQUASHFS_SYMLINK_TYPE:
      case SQUASHFS_LSYMLINK_TYPE: {
        uint32_t size = le<uint32_t>(inodes_.read(c, 8), 4);
        if (size == 0 || size > kMaxLink) bad("a symlink target of " + std::to_string(size) + " bytes");
        inodes_.read(c, size);
        if (type == SQUASHFS_LSYMLINK_TYPE) xattr(le<uint32_t>(inodes_.read(c, 4), 0));
        break;
      }
      case SQUASHFS_BLKDEV_TYPE:
      case SQUASHFS_CHRDEV_TYPE:
        inodes_.read(c, 8);
        break;
      case SQUASHFS_LBLKDEV_TYPE:
      case SQUASHFS_LCHRDEV_TYPE:
        xattr(le<uint32_t>(inodes_.read(c, 12), 8));
        break;
      case SQUASHFS_FIFO_TYPE:
      case SQUASHFS_SOCKET_TYPE:
        inodes_.read(c, 4);
        break;
      default:  // the long fifo and socket
        xattr(le<uint32_t>(inodes_.read(c, 8), 4));
        break;
    }
    return basic;
  }

  // A regular file's block list: every block within the image, the
  // fragment within the fragment table and its block.
  void blocks(Cursor& c, uint64_t start, uint64_t size, uint32_t frag, uint32_t frag_off) {
    const uint64_t bs = sb_.block_size;
    uint64_t count = size / bs + (frag == kNoIndex && size % bs ? 1 : 0);
    if (frag != kNoIndex && (frag >= sb_.fragments || frag_off > bs || size % bs > bs - frag_off))
      bad("a file's tail lies outside the fragment table");
    uint64_t pos = start;
    while (count > 0) {  // each step reads from the table: a false count ends at its end
      uint64_t n = std::min<uint64_t>(count, 1024);
      std::string list = inodes_.read(c, n * 4);
      for (uint64_t i = 0; i < n; ++i) {
        uint32_t len = le<uint32_t>(list, i * 4) & ~SQUASHFS_COMPRESSED_BIT_BLOCK;
        if (len > bs) bad("a data block of " + std::to_string(len) + " bytes");
        pos += len;
        if (pos > sb_.bytes_used) bad("a file's data lies past the image");
      }
      count -= n;
    }
  }

  void listing(const Dir& d, std::vector<Dir>& todo) {
    if (d.size < 3) bad("a directory listing of " + std::to_string(d.size) + " bytes");
    const uint64_t total = d.size - 3;
    std::map<uint64_t, Cursor> heads;  // where each header starts: for the directory's index
    Cursor c = d.at;
    if (total > 0 && !dirs_.valid(c)) bad("a directory listing outside the directory table");
    for (uint64_t done = 0; done < total;) {
      heads.emplace(done, c);
      std::string h = dirs_.read(c, 12);
      done += 12;
      uint32_t count = le<uint32_t>(h, 0) + 1;
      if (count == 0 || count > 256) bad("a directory header of " + std::to_string(count) + " entries");
      const uint64_t inode_block = le<uint32_t>(h, 4);
      for (; count > 0; --count) {
        std::string e = dirs_.read(c, 8);
        uint32_t name_size = le<uint16_t>(e, 6) + 1u;
        if (name_size > SQUASHFS_NAME_LEN) bad("a directory entry names more than 256 bytes");
        std::string name = dirs_.read(c, name_size);
        done += 8 + name_size;
        if (done > total) bad("a directory listing runs past its size");
        if (name == "." || name == ".." || name.find_first_of(std::string("/\0", 2)) != std::string::npos)
          bad("a directory entry named `" + name + "`");
        if (++entries_ > limits_.max_entries) bad("more than " + std::to_string(limits_.max_entries) + " entries");
        const uint64_t r = (inode_block << 16) | le<uint16_t>(e, 0);
        const unsigned type = le<uint16_t>(e, 4);
        if (type < 1 || type > 7) bad("a directory entry of unknown type " + std::to_string(type));
        if (type == SQUASHFS_DIR_TYPE) {
          if (!seen_dirs_.insert(r).second) bad("a directory reached twice (a loop)");
          Dir sub;
          inode(r, type, &sub);
          todo.push_back(std::move(sub));
        } else if (seen_.insert(r).second) {
          inode(r, type, nullptr);
        }
      }
    }
    for (const auto& i : d.indexes) {
      auto it = heads.find(i.index);
      if (it == heads.end() || it->second.block != i.start_block ||
          it->second.offset != (d.at.offset + i.index) % kMeta)
        bad("a directory index points outside its listing");
    }
  }

  const Super& sb_;
  const VerifyLimits& limits_;
  MetaTable inodes_, dirs_;
  uint32_t xattr_ids_ = 0;
  uint64_t entries_ = 0;
  std::unordered_set<uint64_t> seen_dirs_, seen_;
};

}  // namespace

void verify_image(int fd, const std::string& path, const Span& span, const VerifyLimits& limits, Source* source) {
  struct stat st;
  if (::fstat(fd, &st) != 0) throw SysError{errno, "stat", path};
  const auto file_size = static_cast<uint64_t>(st.st_size);
  try {
    if (span.offset > file_size || span.size > file_size - span.offset)
      bad("the SquashFS partition lies past the end of the file");
    File f(fd, span.offset, span.size ? span.size : file_size - span.offset, source);
    Super sb = read_super(f);
    sqfs_decompressor d = sqfs_decompressor_get(sb.compression);
    if (!d) {
      char* name = sqfs_compression_name(sb.compression);
      bad(std::string("compressed with ") +
          (name ? name : "an unknown algorithm (id " + std::to_string(sb.compression) + ")") +
          ", which this rt cannot read");
    }
    Walker w(f, sb, d, limits);
    w.walk();
  } catch (const Bad& e) {
    throw Error("image `" + path + "`: " + e.what());
  }
}

}  // namespace rt::squash
