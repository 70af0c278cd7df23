// SIF signatures as the SIF reference library's pkg/integrity defines
// them (host): what a signature of an object group signs, and checking
// that against the file. No OpenPGP here (image/openpgp does that).
//
// A signature is a data object (type Signature) in no group, linked to
// the group it signs (link = group | 0xf0000000), its type-specific
// fields the hash type (i32) and the signing key's 20-byte fingerprint.
// Its data is an OpenPGP clear-signed message whose text is JSON:
//   {"version":1,"header":{"digest":"sha256:HEX"},
//    "objects":[{"relativeId":0,"descriptorDigest":"sha256:HEX",
//                "objectDigest":"sha256:HEX"}, ...]}
// the header digest over its launch script, magic, version and id; each
// object's over its descriptor's fixed fields (type, used, id relative to
// the group's lowest, link, size, created, uid, gid, name, extra: what
// neither moving nor adding objects changes) and over its data.
// The legacy format (Singularity 3.5 and older) signs "SIFHASH:\nHEX\n",
// one digest of the data alone: of a group's objects one after another
// (linked to the group) or of one object (linked to that object, the
// signature in its group); nothing covers header or descriptors.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "squash/sif.hpp"

namespace rt::image {

// The digests a signature of the current format holds.
struct SifSignedObject {
  uint32_t relative_id = 0;  // its id less the group's lowest
  std::string descriptor_digest, object_digest;  // "sha256:HEX" (sha224, sha384, sha512, ...)
};
struct SifSignedMetadata {
  int version = 1;
  std::string header_digest;
  std::vector<SifSignedObject> objects;
};

// The signed text, parsed; throws rt::Error naming what is wrong (not
// JSON, an unknown version, a malformed digest, an unknown algorithm).
SifSignedMetadata parse_sif_metadata(std::string_view json);
// As pkg/integrity writes it (compact, in its key order).
std::string sif_metadata_json(const SifSignedMetadata& m);
// A legacy signature's text "SIFHASH:\nHEX\n" as a digest "ALG:HEX", the
// algorithm the descriptor's hash type (`hash`: 1 sha256, 2 sha384, 3
// sha512); throws rt::Error when it is not one.
std::string parse_sif_legacy_text(std::string_view text, int32_t hash);
// Whether a signature's signed text is in the legacy format.
bool is_sif_legacy_text(std::string_view text);

// The bytes the header digest covers, and those of one object's
// descriptor (`min_id`: the lowest id of its group).
std::string sif_header_integrity(const squash::SifFile& sif);
std::string sif_descriptor_integrity(const squash::SifObject& o, uint32_t min_id);

// A descriptor's group as pkg/integrity numbers it (the mask taken off;
// 0: none), and the group a signature is linked to (0: none: it is linked
// to an object, or to nothing).
uint32_t sif_group(const squash::SifObject& o);
uint32_t sif_linked_group(const squash::SifObject& o);
// The groups of the file, ascending; the objects of one (signatures
// included, as the library counts them), in table order; its lowest id.
std::vector<uint32_t> sif_groups(const squash::SifFile& sif);
std::vector<const squash::SifObject*> sif_group_objects(const squash::SifFile& sif, uint32_t group);
uint32_t sif_group_min_id(const squash::SifFile& sif, uint32_t group);

// A signature's key fingerprint from its descriptor (40 hex digits), "" if
// none is recorded; its hash type.
std::string sif_signature_fingerprint(const squash::SifObject& sig);

// "ALG:HEX" of `data` (ALG: sha224, sha256, sha384, sha512, sha512_224,
// sha512_256, as pkg/integrity names them; OpenSSL).
std::string sif_digest(const std::string& alg, std::string_view data);
// The same of `size` bytes of the file at `fd` from `offset`, streamed.
std::string sif_digest_at(const std::string& alg, int fd, uint64_t offset, uint64_t size, const std::string& name);
// The same of the objects' data one after another (a legacy group signature's).
std::string sif_digest_objects(const std::string& alg, int fd, const std::vector<const squash::SifObject*>& objects,
                               const std::string& name);
// The algorithm of a digest string; throws rt::Error for an unknown one.
std::string sif_digest_alg(const std::string& digest);

// What a signature of the current format would hold for `group` of the
// file at `fd`: the header's and every object's digests (sha256).
SifSignedMetadata sif_group_metadata(int fd, const squash::SifFile& sif, uint32_t group, const std::string& name);

// Checks `m` (from a signature of `group`) against the file at `fd`: the
// objects signed are exactly the group's, and every digest matches.
// Returns "" when they do, else why not ("object 2 (partition): its data
// differs from what was signed").
std::string sif_check_metadata(int fd, const squash::SifFile& sif, uint32_t group, const SifSignedMetadata& m,
                               const std::string& name);

// The signature descriptor's type-specific fields: hash type 1 (SHA-256)
// and the key's fingerprint (40 hex digits).
std::string sif_signature_extra(const std::string& fingerprint);

}  // namespace rt::image
