// ld.so.cache reader: the "glibc-ld.so.cache1.1" format, alone or after
// the old "ld.so-1.7.0" table (host).
#include "hpc/ldcache.hpp"

#include <cstdint>
#include <cstring>

#include "rt/error.hpp"
#include "util/fs.hpp"

namespace rt::hpc {
namespace {

constexpr char kOldMagic[] = "ld.so-1.7.0";
constexpr char kNewMagic[] = "glibc-ld.so.cache1.1";
constexpr int32_t kElfLibc6 = 0x0003;
#if defined(__x86_64__)
constexpr int32_t kArch = 0x0300;
#elif defined(__aarch64__)
constexpr int32_t kArch = 0x0a00;
#elif defined(__powerpc64__)
constexpr int32_t kArch = 0x0500;
#else
constexpr int32_t kArch = 0;
#endif

struct NewHeader {
  char magic[17];
  char version[3];
  uint32_t nlibs;
  uint32_t len_strings;
  uint8_t flags;
  uint8_t pad[3];
  uint32_t extension_offset;
  uint32_t unused[3];
};

struct NewEntry {
  int32_t flags;
  uint32_t key, value;
  uint32_t osversion;
  uint64_t hwcap;
};

}  // namespace

std::map<std::string, std::string> read_ld_cache(const std::string& path) {
  auto text = util::read_file_if_exists(path, 64u << 20);
  if (!text) throw Error("dynamic linker cache `" + path + "` does not exist");
  return parse_ld_cache(*text, path);
}

std::map<std::string, std::string> parse_ld_cache(const std::string& data, const std::string& path) {
  auto bad = [&](const char* why) { return Error("`" + path + "` is not a dynamic linker cache: " + why); };
  size_t base = 0;
  if (data.compare(0, sizeof kOldMagic - 1, kOldMagic) == 0) {
    // Old table: magic (12 bytes with its NUL), count, 12-byte entries.
    if (data.size() < 16) throw bad("truncated");
    uint32_t n;
    std::memcpy(&n, data.data() + 12, 4);
    base = 16 + uint64_t{n} * 12;
    base = (base + 7) & ~size_t{7};
  }
  if (data.size() < base + sizeof(NewHeader) || data.compare(base, sizeof kNewMagic - 1, kNewMagic) != 0)
    throw bad("no glibc-ld.so.cache1.1 header");
  NewHeader h;
  std::memcpy(&h, data.data() + base, sizeof h);
  const size_t entries = base + sizeof h;
  if (uint64_t{h.nlibs} * sizeof(NewEntry) > data.size() - entries) throw bad("truncated");
  std::map<std::string, std::string> out;
  auto str = [&](uint32_t off) -> std::string {
    size_t at = off;  // offsets count from the new header, which is at 0 or after the old table
    if (at < base) at += base;
    if (at >= data.size()) throw bad("string out of range");
    return std::string(data.c_str() + at, strnlen(data.c_str() + at, data.size() - at));
  };
  for (uint32_t i = 0; i < h.nlibs; ++i) {
    NewEntry e;
    std::memcpy(&e, data.data() + entries + i * sizeof(NewEntry), sizeof e);
    if ((e.flags & 0xff) != kElfLibc6 || (e.flags & 0xff00) != kArch) continue;
    out.emplace(str(e.key), str(e.value));
  }
  return out;
}

}  // namespace rt::hpc
