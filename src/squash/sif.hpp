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
};

struct SifFile {
  std::string arch;  // the header's: "02" ...
  std::string id;    // the image's UUID, in hex
  int64_t created = 0, modified = 0;
  std::vector<SifObject> objects;  // the used descriptors
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

// Names for `rt inspect`.
std::string sif_type_name(int32_t type);
std::string sif_fs_name(int32_t fs);
std::string sif_part_name(int32_t part);
std::string sif_arch_name(const std::string& arch);

}  // namespace rt::squash
