// SIF files: header and descriptor table (host); see sif.hpp.
#include "squash/sif.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "rt/error.hpp"
#include "squash/le.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::squash {
namespace {

// The header: launch script [32], magic [10], version [3], arch [3], id
// [16], then eight little-endian int64: created, modified, descriptors
// free, total, offset, size, data offset, size.
constexpr size_t kHeaderSize = kSifHeaderSize;
constexpr size_t kSifMagicAt = 32;
constexpr char kSifMagic[10] = {'S', 'I', 'F', '_', 'M', 'A', 'G', 'I', 'C', '\0'};
// A descriptor, packed: type i32, used u8, id, group, link u32, offset,
// size, size with padding, created, modified, uid, gid i64, name [128],
// extra [384].
constexpr size_t kDescriptorSize = kSifDescriptorSize;
constexpr size_t kNameAt = kSifNameAt;
constexpr size_t kExtraAt = kSifExtraAt;
static_assert(kDescriptorSize == 4 + 1 + 3 * 4 + 7 * 8 + 128 + 384 && kNameAt == 4 + 1 + 3 * 4 + 7 * 8 &&
              kExtraAt == kNameAt + 128);
constexpr uint64_t kMaxDescriptors = 1 << 16;

// A NUL-padded field as a string.
std::string padded(const std::string& s, size_t at, size_t n) {
  std::string out = s.substr(at, n);
  out.resize(std::strlen(out.c_str()));
  return out;
}

std::string read_at(int fd, uint64_t at, size_t n, const std::string& what) {
  std::string out = util::read_at(fd, at, n, what);
  if (out.size() < n) throw Error(what + " lies past the end of the file");
  return out;
}

// `at` + `n` within `size`, both as read (signed in the file).
bool within(int64_t at, int64_t n, uint64_t size) {
  return at >= 0 && n >= 0 && static_cast<uint64_t>(at) <= size &&
         static_cast<uint64_t>(n) <= size - static_cast<uint64_t>(at);
}

}  // namespace

namespace {

void put_le(std::string& s, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// This machine's architecture as SIF numbers it (sif_arch_name's table).
const char* own_arch() {
#if defined(__x86_64__)
  return "02";
#elif defined(__aarch64__)
  return "04";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return "06";
#elif defined(__s390x__)
  return "11";
#elif defined(__riscv) && __riscv_xlen == 64
  return "12";
#else
  return "00";
#endif
}

}  // namespace

std::string sif_descriptor(SifData type, uint32_t id, uint32_t group, uint32_t link, uint64_t offset, uint64_t size,
                           uint64_t padded, int64_t time, const std::string& name, const std::string& extra) {
  if (extra.size() > kDescriptorSize - kExtraAt) throw Error("SIF descriptor fields too long");
  std::string d(kDescriptorSize, '\0');
  put_le(d, 0, static_cast<uint32_t>(type), 4);
  d[4] = 1;  // used
  put_le(d, 5, id, 4);
  put_le(d, 9, group, 4);
  put_le(d, 13, link, 4);
  put_le(d, 17, offset, 8);
  put_le(d, 25, size, 8);
  put_le(d, 33, padded, 8);
  put_le(d, 41, static_cast<uint64_t>(time), 8);  // created
  put_le(d, 49, static_cast<uint64_t>(time), 8);  // modified
  std::memcpy(d.data() + kNameAt, name.data(), std::min<size_t>(name.size(), 127));
  std::memcpy(d.data() + kExtraAt, extra.data(), extra.size());
  return d;
}

uint32_t sif_append(int fd, SifFile& sif, const std::string& path, SifData type, uint32_t group, uint32_t link,
                    uint64_t size, uint64_t align, int64_t time, const std::string& extra,
                    const std::function<void(uint64_t offset)>& write) {
  std::vector<bool> used(sif.descriptors, false);
  uint32_t max_id = 0;
  for (const auto& o : sif.objects) {
    if (o.slot < used.size()) used[o.slot] = true;
    max_id = std::max(max_id, o.id);
  }
  const auto slot = static_cast<uint32_t>(std::find(used.begin(), used.end(), false) - used.begin());
  if (slot >= used.size())
    throw Error("`" + path + "` has no free descriptor for another object (all " + std::to_string(sif.descriptors) +
                " used)");
  // pkg/sif numbers an object by its slot; another number where that is taken.
  uint32_t id = slot + 1;
  if (std::any_of(sif.objects.begin(), sif.objects.end(), [&](const auto& o) { return o.id == id; })) id = max_id + 1;
  const uint64_t offset = align > 1 ? (sif.data_end + align - 1) / align * align : sif.data_end;
  write(offset);
  if (::fdatasync(fd) != 0) throw SysError{errno, "fdatasync", path};
  const std::string d = sif_descriptor(type, id, group, link, offset, size, offset + size - sif.data_end, time, "", extra);
  util::pwrite_all(fd, d, sif.table_offset + uint64_t{slot} * kDescriptorSize, path);
  const uint64_t data_start = le<uint64_t>(sif.header, 112);
  put_le(sif.header, 72, static_cast<uint64_t>(time), 8);  // modified
  put_le(sif.header, 80, le<uint64_t>(sif.header, 80) > 0 ? le<uint64_t>(sif.header, 80) - 1 : 0, 8);  // free
  put_le(sif.header, 120, offset + size - data_start, 8);  // data size
  util::pwrite_all(fd, sif.header, 0, path);
  if (::fsync(fd) != 0) throw SysError{errno, "fsync", path};
  SifObject o;
  o.type = static_cast<int32_t>(type);
  o.id = id;
  o.group = group;
  o.link = link;
  o.offset = offset;
  o.size = size;
  o.descriptor = d;
  o.slot = slot;
  if (type == SifData::Partition && extra.size() >= 8) {
    o.fs = le<int32_t>(extra, 0);
    o.part = le<int32_t>(extra, 4);
  }
  sif.objects.push_back(std::move(o));
  sif.data_end = offset + size;
  return id;
}

const SifObject* sif_overlay_partition(const SifFile& sif) {
  for (const auto& o : sif.objects)
    if (o.type == static_cast<int32_t>(SifData::Partition) && o.part == static_cast<int32_t>(SifPart::Overlay) &&
        o.fs == static_cast<int32_t>(SifFs::Ext3))
      return &o;
  return nullptr;
}

std::string sif_prefix(uint64_t size, const std::string& id, int64_t now, const std::vector<SifInput>& objects) {
  constexpr uint64_t kDescriptors = 48, kTableAt = 4096, kAlign = 4096;  // as Apptainer lays them out
  static_assert(kTableAt + kDescriptors * kDescriptorSize <= kSifDataStart);
  if (objects.size() + 1 > kDescriptors)
    throw Error("too many SIF data objects (" + std::to_string(objects.size()) + ")");
  std::string s(kSifDataStart, '\0');
  static const char launch[] = "#!/usr/bin/env run-singularity\n";
  std::memcpy(s.data(), launch, sizeof launch - 1);
  std::memcpy(s.data() + kSifMagicAt, kSifMagic, sizeof kSifMagic);
  std::memcpy(s.data() + 42, "01", 2);
  std::memcpy(s.data() + 45, own_arch(), 2);
  std::memcpy(s.data() + 48, id.data(), std::min<size_t>(id.size(), 16));
  // One descriptor, used, in group 1 (with the group mask), its data at
  // `at`; returns where its type-specific fields start.
  uint32_t next_id = 1;
  auto describe = [&](SifData type, uint64_t at, uint64_t n, const std::string& name) {
    const size_t d = kTableAt + (next_id - 1) * kDescriptorSize;
    const std::string descriptor = sif_descriptor(type, next_id, 0xf0000001u, 0, at, n, n, now, name);
    ++next_id;
    s.replace(d, kDescriptorSize, descriptor);
    return d + kExtraAt;
  };
  for (const auto& o : objects) {
    describe(o.type, s.size(), o.data.size(), o.name);
    s += o.data;
  }
  s.resize((s.size() + kAlign - 1) / kAlign * kAlign, '\0');
  const size_t extra = describe(SifData::Partition, s.size(), size, "");
  put_le(s, extra, static_cast<uint32_t>(SifFs::Squash), 4);
  put_le(s, extra + 4, static_cast<uint32_t>(SifPart::PrimarySystem), 4);
  std::memcpy(s.data() + extra + 8, own_arch(), 2);
  put_le(s, 64, static_cast<uint64_t>(now), 8);
  put_le(s, 72, static_cast<uint64_t>(now), 8);
  put_le(s, 80, kDescriptors - objects.size() - 1, 8);  // free
  put_le(s, 88, kDescriptors, 8);                       // total
  put_le(s, 96, kTableAt, 8);
  put_le(s, 104, kDescriptors * kDescriptorSize, 8);
  put_le(s, 112, kSifDataStart, 8);
  put_le(s, 120, s.size() - kSifDataStart + size, 8);
  return s;
}

const SifObject* SifFile::primary() const {
  for (const auto& o : objects)
    if (o.type == static_cast<int32_t>(SifData::Partition) && o.part == static_cast<int32_t>(SifPart::PrimarySystem))
      return &o;
  return nullptr;
}

size_t SifFile::signatures() const {
  size_t n = 0;
  for (const auto& o : objects) n += o.type == static_cast<int32_t>(SifData::Signature);
  return n;
}

bool is_sif(int fd) {
  char m[sizeof kSifMagic];
  return ::pread(fd, m, sizeof m, kSifMagicAt) == static_cast<ssize_t>(sizeof m) && std::memcmp(m, kSifMagic, sizeof m) == 0;
}

SifFile read_sif(int fd, const std::string& path) {
  const std::string where = "image `" + path + "`";
  struct stat st;
  if (::fstat(fd, &st) != 0) throw SysError{errno, "stat", path};
  const auto size = static_cast<uint64_t>(st.st_size);
  try {
    const std::string h = read_at(fd, 0, kHeaderSize, "the SIF header");
    if (std::memcmp(h.data() + kSifMagicAt, kSifMagic, sizeof kSifMagic) != 0) throw Error("is not a SIF file (no SIF_MAGIC)");
    // Version "01" is the one SIF format there is (sif(5), Apptainer 1.x).
    if (const std::string version = padded(h, 42, 3); version != "01")
      throw Error("its SIF version " + util::utf8_escaped(util::quoted(version)) + " is not one rt knows (01)");
    SifFile sif;
    sif.header = h;
    sif.arch = padded(h, 45, 3);
    sif.id = util::hex(h.data() + 48, 16);
    sif.created = le<int64_t>(h, 64);
    sif.modified = le<int64_t>(h, 72);
    const auto total = le<int64_t>(h, 88), offset = le<int64_t>(h, 96), bytes = le<int64_t>(h, 104);
    if (total <= 0 || static_cast<uint64_t>(total) > kMaxDescriptors)
      throw Error("the SIF descriptor table is corrupt (" + std::to_string(total) + " descriptors)");
    const uint64_t need = static_cast<uint64_t>(total) * kDescriptorSize;
    if (!within(offset, bytes, size) || static_cast<uint64_t>(bytes) < need)
      throw Error("the SIF descriptor table (" + std::to_string(total) + " descriptors at byte " +
                  std::to_string(offset) + ") lies past the end of the file or is too small");
    const std::string table = read_at(fd, static_cast<uint64_t>(offset), need, "the SIF descriptor table");
    sif.table_offset = static_cast<uint64_t>(offset);
    sif.descriptors = static_cast<uint64_t>(total);
    const auto data_at = le<int64_t>(h, 112), data_size = le<int64_t>(h, 120);
    sif.data_end = within(data_at, data_size, size) ? static_cast<uint64_t>(data_at + data_size) : size;
    for (uint64_t i = 0; i < static_cast<uint64_t>(total); ++i) {
      const size_t d = i * kDescriptorSize;
      if (table[d + 4] == 0) continue;  // unused
      SifObject o;
      o.descriptor = table.substr(d, kDescriptorSize);
      o.slot = static_cast<uint32_t>(i);
      o.type = le<int32_t>(table, d);
      o.id = le<uint32_t>(table, d + 5);
      o.group = le<uint32_t>(table, d + 9);
      o.link = le<uint32_t>(table, d + 13);
      const auto at = le<int64_t>(table, d + 17), n = le<int64_t>(table, d + 25);
      if (!within(at, n, size))
        throw Error("SIF object " + std::to_string(o.id) + " (" + sif_type_name(o.type) + ", " + std::to_string(n) +
                    " bytes at byte " + std::to_string(at) + ") lies outside the file (" + std::to_string(size) +
                    " bytes)");
      o.offset = static_cast<uint64_t>(at);
      o.size = static_cast<uint64_t>(n);
      o.name = padded(table, d + kNameAt, 128);
      if (o.type == static_cast<int32_t>(SifData::Partition)) {
        o.fs = le<int32_t>(table, d + kExtraAt);
        o.part = le<int32_t>(table, d + kExtraAt + 4);
        o.arch = padded(table, d + kExtraAt + 8, 3);
      } else if (o.type == static_cast<int32_t>(SifData::Signature)) {
        o.hash = le<int32_t>(table, d + kExtraAt);
        // The key's fingerprint (20 bytes, an OpenPGP v4 key's), zeros after
        // it; zeros ending the fingerprint itself are its own.
        std::string entity = table.substr(d + kExtraAt + 4, 256);
        while (entity.size() > 20 && entity.back() == '\0') entity.pop_back();
        if (entity.find_first_not_of('\0') == std::string::npos) entity.clear();
        o.entity = util::hex(entity.data(), entity.size());
      }
      sif.objects.push_back(std::move(o));
    }
    return sif;
  } catch (const SysError&) {
    throw;
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

SifObject sif_root_partition(const SifFile& sif, const std::string& path) {
  const std::string where = "image `" + path + "`";
  const SifObject* p = sif.primary();
  if (!p) {
    std::string held;
    for (const auto& o : sif.objects) held += (held.empty() ? "" : ", ") + sif_type_name(o.type);
    throw Error(where + ": the SIF file has no primary system partition (it holds " +
                (held.empty() ? std::string("no objects") : held) + ")");
  }
  for (const auto& o : sif.objects)
    if (&o != p && o.type == p->type && o.part == p->part)
      throw Error(where + ": the SIF file has two primary system partitions (objects " + std::to_string(p->id) +
                  " and " + std::to_string(o.id) + "); rt will not choose one");
  if (p->size == 0)
    throw Error(where + ": its primary system partition (object " + std::to_string(p->id) + ") is empty");
  if (p->fs == static_cast<int32_t>(SifFs::EncryptedSquash))
    throw Error(where + ": its root filesystem is an encrypted SquashFS partition, which rt cannot read",
                "decrypt it with Apptainer first (apptainer build --sandbox DIR FILE.sif), then rt convert DIR NAME");
  if (p->fs != static_cast<int32_t>(SifFs::Squash))
    throw Error(where + ": its root filesystem partition is " + sif_fs_name(p->fs) +
                    ", not SquashFS; rt serves SquashFS partitions only",
                "rebuild it as a SquashFS SIF (apptainer build)");
  for (const auto& o : sif.objects)
    if (o.type == static_cast<int32_t>(SifData::Partition) && o.part == static_cast<int32_t>(SifPart::Overlay) &&
        &o != sif_overlay_partition(sif))
      throw Error(where + ": it holds an overlay partition rt cannot serve (" + sif_fs_name(o.fs) + ", object " +
                      std::to_string(o.id) + "; rt serves one ext3 overlay partition)",
                  "copy what the overlay holds out with Apptainer, then run a SIF file without it");
  return *p;
}

namespace {

// The name of `value` in a table of values numbered from `first`.
template <size_t N>
std::string named(int32_t value, int32_t first, const char* const (&names)[N], const std::string& unknown) {
  const int64_t i = int64_t{value} - first;
  return i >= 0 && i < static_cast<int64_t>(N) ? names[i] : unknown + std::to_string(value) + ")";
}

}  // namespace

std::string sif_type_name(int32_t type) {
  static const char* const names[] = {
      "definition file",       "environment", "labels",    "partition", "signature", "JSON", "data",
      "cryptographic message", "SBOM",        "OCI index", "OCI blob"};
  return named(type, static_cast<int32_t>(SifData::Deffile), names, "unknown object type (");
}

std::string sif_fs_name(int32_t fs) {
  static const char* const names[] = {"SquashFS", "ext3", "object archive", "raw", "encrypted SquashFS"};
  return named(fs, static_cast<int32_t>(SifFs::Squash), names, "unknown (");
}

std::string sif_part_name(int32_t part) {
  static const char* const names[] = {"system", "primary system", "data", "overlay"};
  return named(part, static_cast<int32_t>(SifPart::System), names, "unknown (");
}

std::string sif_arch_name(const std::string& arch) {
  static const char* names[] = {"unknown", "386",    "amd64",  "arm",      "arm64", "ppc64",  "ppc64le",
                                "mips",    "mipsle", "mips64", "mips64le", "s390x", "riscv64"};
  if (arch.size() == 2 && std::isdigit(static_cast<unsigned char>(arch[0])) &&
      std::isdigit(static_cast<unsigned char>(arch[1]))) {
    size_t i = static_cast<size_t>((arch[0] - '0') * 10 + (arch[1] - '0'));
    if (i < sizeof names / sizeof names[0]) return names[i];
  }
  return "unknown (" + arch + ")";
}

}  // namespace rt::squash
