// SIF files (Apptainer/Singularity images): the global header and the
// descriptor table, read from the published layout (host).
//
// A SIF file is a 128-byte header, a table of fixed-size descriptors and
// the data objects they describe: partitions (the primary one a SquashFS
// root filesystem), signatures, the definition file, labels. rt serves the
// primary SquashFS partition from its place in the file, with no copy;
// every offset and size is checked against the file before use.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rt::squash {

// Data object types (descriptor DataType).
enum class SifData : int32_t {
  Deffile = 0x4001,
  EnvVar = 0x4002,
  Labels = 0x4003,
  Partition = 0x4004,
  Signature = 0x4005,
  GenericJson = 0x4006,
  Generic = 0x4007,
  CryptoMessage = 0x4008,
  Sbom = 0x4009,
  OciRootIndex = 0x400a,
  OciBlob = 0x400b,
};
enum class SifFs : int32_t { Squash = 1, Ext3 = 2, ImmutableObjects = 3, Raw = 4, EncryptedSquash = 5 };
enum class SifPart : int32_t { System = 1, PrimarySystem = 2, Data = 3, Overlay = 4 };

struct SifObject {
  int32_t type = 0;  // SifData
  uint32_t id = 0, group = 0, link = 0;
  uint64_t offset = 0, size = 0;
  std::string name;
  // Partitions.
  int32_t fs = 0, part = 0;  // SifFs, SifPart
  std::string arch;          // "02" (amd64), ...
  // Signatures.
  int32_t hash = 0;
  std::string entity;  // the signing key's fingerprint, in hex
  // The descriptor as the file holds it (kSifDescriptorSize bytes) and its
  // place in the table: what signatures cover and where one is added.
  std::string descriptor;
  uint32_t slot = 0;
};

// A descriptor's size, and where its name and type-specific fields start.
inline constexpr size_t kSifDescriptorSize = 585, kSifNameAt = 73, kSifExtraAt = 201;
// The header's size (launch script, magic, version, arch, id, then eight
// int64: created, modified, descriptors free, total, offset, size, data
// offset, size).
inline constexpr size_t kSifHeaderSize = 128;

struct SifFile {
  std::string arch;  // the header's: "02" ...
  std::string id;    // the image's UUID, in hex
  int64_t created = 0, modified = 0;
  std::vector<SifObject> objects;  // the used descriptors
  std::string header;              // the header as the file holds it (kSifHeaderSize bytes)
  uint64_t table_offset = 0, descriptors = 0;  // the descriptor table: where, how many slots
  uint64_t data_end = 0;                       // the data objects' end (data offset + size)
  // The primary system partition, or nullptr.
  const SifObject* primary() const;
  size_t signatures() const;
};

// True when the file at `fd` starts with a SIF header (the magic at byte 32).
bool is_sif(int fd);

// Reads the header and descriptor table of the file at `fd` (named `path`
// in messages). Throws rt::Error "image `PATH`: ..." when either is
// missing, truncated or points outside the file.
SifFile read_sif(int fd, const std::string& path);

// Where the primary SquashFS partition lies. Throws rt::Error naming the
// file and what it holds instead: no system partition, an encrypted one,
// an ext3 one.
SifObject sif_root_partition(const SifFile& sif, const std::string& path);

// A data object to write before the root filesystem: a definition file,
// labels (JSON).
struct SifInput {
  SifData type;
  std::string name;  // at most 127 bytes
  std::string data;
};

// The start of a SIF file holding `objects` (in this order, ids from 1)
// and then one SquashFS image of `size` bytes as its primary system
// partition, for this machine's architecture: header, descriptor table,
// the objects' data and padding; the image follows, at the returned
// string's size (a multiple of 4096, at least kSifDataStart).
// `id`: 16 bytes (a UUID); `now`: the creation time, in Unix seconds.
inline constexpr uint64_t kSifDataStart = 32768;
std::string sif_prefix(uint64_t size, const std::string& id, int64_t now, const std::vector<SifInput>& objects = {});

// One descriptor, used (kSifDescriptorSize bytes); `group` and `link` as
// the file holds them (a group with the 0xf0000000 mask), `padded`: the
// size with the padding before the object; `extra`: the type-specific
// fields (at most 384 bytes).
std::string sif_descriptor(SifData type, uint32_t id, uint32_t group, uint32_t link, uint64_t offset, uint64_t size,
                           uint64_t padded, int64_t time, const std::string& name, const std::string& extra = {});

// Adds a data object to the SIF file `sif` read from `fd` (named `path`),
// in place: `data` (at most `size` bytes, written by `write(offset)`) after
// the data there, at a multiple of `align`, then its descriptor in the first
// free slot (numbered as pkg/sif numbers it), then the header's counts.
// `sif` follows (objects, header, data_end). Returns the object's id.
// Throws rt::Error naming `path` when no descriptor is free.
uint32_t sif_append(int fd, SifFile& sif, const std::string& path, SifData type, uint32_t group, uint32_t link,
                    uint64_t size, uint64_t align, int64_t time, const std::string& extra,
                    const std::function<void(uint64_t offset)>& write);

// The SIF file's ext3 overlay partition (Apptainer's writable data kept in
// the image), or nullptr.
const SifObject* sif_overlay_partition(const SifFile& sif);

// Names for `rt inspect`.
std::string sif_type_name(int32_t type);
std::string sif_fs_name(int32_t fs);
std::string sif_part_name(int32_t part);
std::string sif_arch_name(const std::string& arch);

}  // namespace rt::squash
