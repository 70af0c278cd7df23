// SIF signatures' signed text and digests (host); see sif_sign.hpp.
#include "image/sif_sign.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "rt/error.hpp"
#include "squash/le.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

constexpr uint32_t kGroupMask = 0xf0000000u;

// pkg/integrity's digest names (digest.go) and OpenSSL's functions.
const EVP_MD* digest_md(const std::string& alg) {
  if (alg == "sha224") return EVP_sha224();
  if (alg == "sha256") return EVP_sha256();
  if (alg == "sha384") return EVP_sha384();
  if (alg == "sha512") return EVP_sha512();
  if (alg == "sha512_224") return EVP_sha512_224();
  if (alg == "sha512_256") return EVP_sha512_256();
  return nullptr;
}

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

MdCtx start(const std::string& alg) {
  const EVP_MD* md = digest_md(alg);
  if (!md) throw Error("unknown digest algorithm `" + alg + "`");
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1) throw Error("OpenSSL: cannot start " + alg);
  return ctx;
}

std::string finish(const std::string& alg, EVP_MD_CTX* ctx) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (EVP_DigestFinal_ex(ctx, out, &n) != 1) throw Error("OpenSSL: cannot finish " + alg);
  return alg + ":" + util::hex(reinterpret_cast<const char*>(out), n);
}

// Lower-case hex digits as bytes ("" when `s` is not that).
std::string unhex(std::string_view s) {
  if (s.size() % 2 || !util::is_hex(s)) return {};
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i < s.size(); i += 2) out += static_cast<char>(nibble(s[i]) * 16 + nibble(s[i + 1]));
  return out;
}

// A digest string checked as pkg/integrity reads one: ALG:HEX, a known
// algorithm, the algorithm's length. Lower-case hex, as it writes them.
std::string checked_digest(const nlohmann::json& j, const char* what) {
  if (!j.is_string()) throw Error(std::string(what) + " is not a string");
  std::string d = j.get<std::string>();
  for (auto& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t colon = d.find(':');
  if (colon == std::string::npos || d.find(':', colon + 1) != std::string::npos)
    throw Error(std::string(what) + " " + util::quoted(d) + " is not ALG:HEX");
  const std::string alg = d.substr(0, colon), hex = d.substr(colon + 1);
  const EVP_MD* md = digest_md(alg);
  if (!md) throw Error(std::string(what) + ": unknown digest algorithm " + util::quoted(alg));
  if (!util::is_hex(hex) || hex.size() != 2 * static_cast<size_t>(EVP_MD_get_size(md)))
    throw Error(std::string(what) + " " + util::quoted(d) + " is not a " + alg + " digest");
  return d;
}

const nlohmann::json& member(const nlohmann::json& j, const char* key, const char* where) {
  if (!j.is_object() || !j.contains(key)) throw Error(std::string(where) + " has no \"" + key + "\"");
  return j.at(key);
}

void put_le32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

SifSignedMetadata parse_sif_metadata(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("the signed text is not JSON: ") + e.what());
  }
  SifSignedMetadata m;
  const auto& version = member(j, "version", "the signed text");
  if (!version.is_number_integer() || version.get<int64_t>() != 1)
    throw Error("the signed text's version " + version.dump() + " is not 1, the one rt knows");
  m.header_digest = checked_digest(member(member(j, "header", "the signed text"), "digest", "its header"),
                                   "the header digest");
  const auto& objects = member(j, "objects", "the signed text");
  if (!objects.is_array() || objects.empty()) throw Error("the signed text lists no objects");
  for (const auto& o : objects) {
    SifSignedObject s;
    const auto& id = member(o, "relativeId", "an object of the signed text");
    if (!id.is_number_unsigned() || id.get<uint64_t>() > 0xffffffffu)
      throw Error("an object's relativeId " + id.dump() + " is not a 32-bit number");
    s.relative_id = id.get<uint32_t>();
    s.descriptor_digest = checked_digest(member(o, "descriptorDigest", "an object"), "a descriptor digest");
    s.object_digest = checked_digest(member(o, "objectDigest", "an object"), "an object digest");
    for (const auto& other : m.objects)
      if (other.relative_id == s.relative_id)
        throw Error("the signed text lists object " + std::to_string(s.relative_id) + " (relative) twice");
    m.objects.push_back(std::move(s));
  }
  return m;
}

std::string sif_metadata_json(const SifSignedMetadata& m) {
  // nlohmann's objects sort their keys; pkg/integrity's order is kept by
  // writing the text here (every value is a number or a digest string).
  std::string s = "{\"version\":" + std::to_string(m.version) + ",\"header\":{\"digest\":\"" + m.header_digest +
                  "\"},\"objects\":[";
  for (size_t i = 0; i < m.objects.size(); ++i) {
    const auto& o = m.objects[i];
    s += (i ? ",{" : "{") + std::string("\"relativeId\":") + std::to_string(o.relative_id) +
         ",\"descriptorDigest\":\"" + o.descriptor_digest + "\",\"objectDigest\":\"" + o.object_digest + "\"}";
  }
  return s + "]}";
}

bool is_sif_legacy_text(std::string_view text) { return text.starts_with("SIFHASH:\n"); }

std::string parse_sif_legacy_text(std::string_view text, int32_t hash) {
  if (!is_sif_legacy_text(text)) throw Error("the signed text is not SIFHASH:");
  std::string_view hex = text.substr(9);
  if (hex.ends_with('\n')) hex.remove_suffix(1);
  // pkg/sif's hash types: 1 SHA-256, 2 SHA-384, 3 SHA-512 (BLAKE2 4, 5).
  const char* alg = hash == 1 ? "sha256" : hash == 2 ? "sha384" : hash == 3 ? "sha512" : nullptr;
  if (!alg) throw Error("its hash type " + std::to_string(hash) + " is not one rt checks (SHA-256/384/512)");
  std::string d(hex);
  for (auto& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return checked_digest(nlohmann::json(std::string(alg) + ":" + d), "the legacy digest");
}

std::string sif_header_integrity(const squash::SifFile& sif) {
  // pkg/sif header.GetIntegrityReader: launch script [32], magic [10],
  // version [3], id [16]; not the architecture, times or table geometry.
  const std::string& h = sif.header;
  if (h.size() < squash::kSifHeaderSize) throw Error("the SIF header was not read");
  return h.substr(0, 32 + 10 + 3) + h.substr(48, 16);
}

std::string sif_descriptor_integrity(const squash::SifObject& o, uint32_t min_id) {
  // pkg/sif Descriptor.GetIntegrityReader: type, used, id relative to the
  // group's lowest, link, size, created, uid, gid (little-endian, as in
  // the table), name [128], extra [384]; not the id, group, offset,
  // padding or modification time.
  const std::string& d = o.descriptor;
  if (d.size() != squash::kSifDescriptorSize) throw Error("the SIF descriptor was not read");
  std::string s = d.substr(0, 5);  // type, used
  put_le32(s, o.id - min_id);
  s += d.substr(13, 4);   // link
  s += d.substr(25, 8);   // size
  s += d.substr(41, 8);   // created
  s += d.substr(57, 16);  // uid, gid
  s += d.substr(squash::kSifNameAt);
  return s;
}

uint32_t sif_group(const squash::SifObject& o) { return o.group & ~kGroupMask; }

uint32_t sif_linked_group(const squash::SifObject& o) {
  return (o.link & kGroupMask) == kGroupMask ? o.link & ~kGroupMask : 0;
}

std::vector<uint32_t> sif_groups(const squash::SifFile& sif) {
  std::vector<uint32_t> out;
  for (const auto& o : sif.objects)
    if (const uint32_t g = sif_group(o); g != 0 && std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<const squash::SifObject*> sif_group_objects(const squash::SifFile& sif, uint32_t group) {
  std::vector<const squash::SifObject*> out;
  for (const auto& o : sif.objects)
    if (sif_group(o) == group) out.push_back(&o);
  return out;
}

uint32_t sif_group_min_id(const squash::SifFile& sif, uint32_t group) {
  uint32_t min = 0xffffffffu;
  for (const auto* o : sif_group_objects(sif, group)) min = std::min(min, o->id);
  if (min == 0xffffffffu) throw Error("the SIF file has no object group " + std::to_string(group));
  return min;
}

std::string sif_signature_fingerprint(const squash::SifObject& sig) {
  if (sig.descriptor.size() != squash::kSifDescriptorSize) return {};
  const std::string fp = sig.descriptor.substr(squash::kSifExtraAt + 4, 20);
  if (fp == std::string(20, '\0')) return {};
  return util::hex(fp.data(), fp.size());
}

std::string sif_digest(const std::string& alg, std::string_view data) {
  MdCtx ctx = start(alg);
  if (EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1) throw Error("OpenSSL: " + alg + " failed");
  return finish(alg, ctx.get());
}

namespace {
void update_at(EVP_MD_CTX* ctx, int fd, uint64_t offset, uint64_t size, const std::string& name) {
  std::string buf;
  for (uint64_t done = 0; done < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size - done, 1 << 20));
    buf = util::read_at(fd, offset + done, n, name);
    if (buf.size() != n) throw Error("`" + name + "` ends before the object it describes");
    if (EVP_DigestUpdate(ctx, buf.data(), n) != 1) throw Error("OpenSSL: digest failed");
    done += n;
  }
}
}  // namespace

std::string sif_digest_at(const std::string& alg, int fd, uint64_t offset, uint64_t size, const std::string& name) {
  MdCtx ctx = start(alg);
  update_at(ctx.get(), fd, offset, size, name);
  return finish(alg, ctx.get());
}

std::string sif_digest_objects(const std::string& alg, int fd, const std::vector<const squash::SifObject*>& objects,
                               const std::string& name) {
  MdCtx ctx = start(alg);
  for (const auto* o : objects) update_at(ctx.get(), fd, o->offset, o->size, name);
  return finish(alg, ctx.get());
}

std::string sif_digest_alg(const std::string& digest) {
  const std::string alg = digest.substr(0, digest.find(':'));
  if (!digest_md(alg)) throw Error("unknown digest algorithm `" + alg + "`");
  return alg;
}

SifSignedMetadata sif_group_metadata(int fd, const squash::SifFile& sif, uint32_t group, const std::string& name) {
  SifSignedMetadata m;
  m.header_digest = sif_digest("sha256", sif_header_integrity(sif));
  const uint32_t min = sif_group_min_id(sif, group);
  auto objects = sif_group_objects(sif, group);
  std::sort(objects.begin(), objects.end(), [](auto* a, auto* b) { return a->id < b->id; });
  for (const auto* o : objects)
    m.objects.push_back({o->id - min, sif_digest("sha256", sif_descriptor_integrity(*o, min)),
                         sif_digest_at("sha256", fd, o->offset, o->size, name)});
  return m;
}

std::string sif_check_metadata(int fd, const squash::SifFile& sif, uint32_t group, const SifSignedMetadata& m,
                               const std::string& name) {
  if (sif_digest(sif_digest_alg(m.header_digest), sif_header_integrity(sif)) != m.header_digest)
    return "the SIF header (launch script, magic, version or id) differs from what was signed";
  const uint32_t min = sif_group_min_id(sif, group);
  const auto objects = sif_group_objects(sif, group);
  auto what = [](const squash::SifObject& o) {
    return "object " + std::to_string(o.id) + " (" + squash::sif_type_name(o.type) + ")";
  };
  // pkg/integrity (objectIDsMatch): the signed objects are the group's, all of them.
  for (const auto* o : objects) {
    const auto s = std::find_if(m.objects.begin(), m.objects.end(),
                                [&](const SifSignedObject& x) { return x.relative_id == o->id - min; });
    if (s == m.objects.end()) return what(*o) + " is in the group but not signed";
  }
  for (const auto& s : m.objects)
    if (std::none_of(objects.begin(), objects.end(), [&](auto* o) { return o->id - min == s.relative_id; }))
      return "object " + std::to_string(uint64_t{min} + s.relative_id) + " was signed but is no longer in the group";
  for (const auto* o : objects) {
    const auto& s = *std::find_if(m.objects.begin(), m.objects.end(),
                                  [&](const SifSignedObject& x) { return x.relative_id == o->id - min; });
    if (sif_digest(sif_digest_alg(s.descriptor_digest), sif_descriptor_integrity(*o, min)) != s.descriptor_digest)
      return what(*o) + ": its descriptor (type, size, name, fields) differs from what was signed";
    if (sif_digest_at(sif_digest_alg(s.object_digest), fd, o->offset, o->size, name) != s.object_digest)
      return what(*o) + ": its data differs from what was signed (digest mismatch)";
  }
  return {};
}

std::string sif_signature_extra(const std::string& fingerprint) {
  std::string extra;
  put_le32(extra, 1);  // hash type: SHA-256, the OpenPGP signature's
  std::string lower = fingerprint;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string fp = unhex(lower);
  if (fp.size() != 20)
    throw Error("the key fingerprint " + util::quoted(fingerprint) +
                " is not 20 bytes (a version 4 key's), the length a SIF signature records");
  return extra + fp;
}

}  // namespace rt::image
