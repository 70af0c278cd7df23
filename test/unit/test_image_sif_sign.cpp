// SIF signatures' signed text and digests: the JSON pkg/integrity signs,
// and the digests of a small SIF file made here.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "image/sif_sign.hpp"
#include "rt/error.hpp"
#include "squash/sif.hpp"
#include "temp_dir.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"

using namespace rt::image;
using rt::squash::SifData;

namespace {

// The signed text of the SIF library's test image one-group-signed.sif.
const std::string kSigned =
    R"({"version":1,"header":{"digest":"sha256:635fa0a14a8ef0c0351ed3e985799ed1d4f75ce973dea3cc76c99710795cc3f1"},)"
    R"("objects":[{"relativeId":0,"descriptorDigest":"sha256:3634ad01db0dd5482ecf685267b53d6201690438ca27c3d7ea91c971a1f41f92",)"
    R"("objectDigest":"sha256:004dfc8da678c309de28b5386a1e9efd57f536b150c40d29b31506aa0fb17ec2"},)"
    R"({"relativeId":1,"descriptorDigest":"sha256:04b5f87c9692a54f80d10fb6af00c779763aeca29d610348854bd97cd8bf66fd",)"
    R"("objectDigest":"sha256:9f9c4e5e131934969b4ac8f495691c70b8c6c8e3f489c2c9ab5f1af82bce0604"}]})";

// A SIF file as rt convert writes one: a definition file, then a
// "SquashFS" partition of `image`.
struct SmallSif {
  TempDir dir;
  std::string path = dir.path + "/small.sif";
  std::string image = std::string(5000, 'q') + "end";
  SmallSif() {
    const std::string prefix =
        rt::squash::sif_prefix(image.size(), std::string(16, '\x42'), 1700000000,
                               {{SifData::Deffile, "", "Bootstrap: docker\nFrom: busybox\n"}});
    rt::util::UniqueFd fd = rt::util::open_fd(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    rt::util::write_all(fd.get(), prefix + image, path);
  }
  rt::squash::SifFile read(int fd) const { return rt::squash::read_sif(fd, path); }
};

}  // namespace

TEST_CASE("the signed text of a SIF signature is read as pkg/integrity writes it", "[sif_sign]") {
  const SifSignedMetadata m = parse_sif_metadata(kSigned);
  CHECK(m.version == 1);
  CHECK(m.header_digest == "sha256:635fa0a14a8ef0c0351ed3e985799ed1d4f75ce973dea3cc76c99710795cc3f1");
  REQUIRE(m.objects.size() == 2);
  CHECK(m.objects[1].relative_id == 1);
  CHECK(m.objects[1].object_digest == "sha256:9f9c4e5e131934969b4ac8f495691c70b8c6c8e3f489c2c9ab5f1af82bce0604");
  // ... and written back byte for byte.
  CHECK(sif_metadata_json(m) == kSigned);
}

TEST_CASE("signed texts that are not pkg/integrity's are refused with the reason", "[sif_sign]") {
  CHECK_THROWS_WITH(parse_sif_metadata("SIFHASH:\nab\n"), Catch::Contains("not JSON"));
  std::string v2 = kSigned;
  v2.replace(v2.find("\"version\":1"), 11, "\"version\":2");
  CHECK_THROWS_WITH(parse_sif_metadata(v2), Catch::Contains("version 2"));
  std::string short_digest = kSigned;
  short_digest.erase(short_digest.find("635f"), 2);
  CHECK_THROWS_WITH(parse_sif_metadata(short_digest), Catch::Contains("not a sha256 digest"));
  std::string md5 = kSigned;
  md5.replace(md5.find("sha256:3634"), 6, "md5");
  CHECK_THROWS_WITH(parse_sif_metadata(md5), Catch::Contains("unknown digest algorithm"));
  std::string twice = kSigned;
  twice.replace(twice.find("\"relativeId\":1"), 14, "\"relativeId\":0");
  CHECK_THROWS_WITH(parse_sif_metadata(twice), Catch::Contains("twice"));
  CHECK_THROWS_WITH(parse_sif_metadata(R"({"version":1,"header":{"digest":"sha256:00"}})"),
                    Catch::Contains("not a sha256 digest"));
}

TEST_CASE("a legacy signature's SIFHASH text is a digest of the descriptor's hash type", "[sif_sign]") {
  const std::string hex(96, 'a');
  CHECK(is_sif_legacy_text("SIFHASH:\n" + hex + "\n"));
  CHECK(parse_sif_legacy_text("SIFHASH:\n" + hex + "\n", 2) == "sha384:" + hex);
  CHECK_THROWS_WITH(parse_sif_legacy_text("SIFHASH:\n" + hex + "\n", 1), Catch::Contains("not a sha256 digest"));
  CHECK_THROWS_WITH(parse_sif_legacy_text("SIFHASH:\n" + hex + "\n", 4), Catch::Contains("hash type 4"));
}

TEST_CASE("digests of a small SIF file cover header fields, descriptors and data", "[sif_sign]") {
  SmallSif f;
  rt::util::UniqueFd fd = rt::util::open_fd(f.path, O_RDWR | O_CLOEXEC);
  const auto sif = f.read(fd.get());
  REQUIRE(sif_groups(sif) == std::vector<uint32_t>{1});
  REQUIRE(sif_group_min_id(sif, 1) == 1);
  // Launch script, magic, version, id: 32 + 10 + 3 + 16 bytes.
  const std::string header = sif_header_integrity(sif);
  CHECK(header.size() == 61);
  CHECK(header.starts_with("#!/usr/bin/env run-singularity\n"));
  CHECK(header.substr(45) == std::string(16, '\x42'));
  // Type, used, relative id, link, size, created, uid, gid, name, extra.
  const auto& part = sif.objects[1];
  const std::string d = sif_descriptor_integrity(part, 1);
  CHECK(d.size() == 4 + 1 + 4 + 4 + 8 + 8 + 8 + 8 + 128 + 384);
  CHECK(d.substr(5, 4) == std::string("\x01\0\0\0", 4));  // id 2, relative to 1

  const SifSignedMetadata m = sif_group_metadata(fd.get(), sif, 1, f.path);
  REQUIRE(m.objects.size() == 2);
  CHECK(m.objects[0].relative_id == 0);
  CHECK(m.objects[0].object_digest == sif_digest("sha256", "Bootstrap: docker\nFrom: busybox\n"));
  CHECK(m.objects[1].object_digest == sif_digest("sha256", f.image));
  CHECK(m.header_digest == sif_digest("sha256", header));
  CHECK(sif_check_metadata(fd.get(), sif, 1, m, f.path).empty());
  CHECK(sif_check_metadata(fd.get(), sif, 1, parse_sif_metadata(sif_metadata_json(m)), f.path).empty());

  SECTION("one byte of the partition flipped names that object") {
    const uint64_t at = part.offset + 100;
    REQUIRE(::pwrite(fd.get(), "x", 1, static_cast<off_t>(at)) == 1);
    CHECK(sif_check_metadata(fd.get(), sif, 1, m, f.path) ==
          "object 2 (partition): its data differs from what was signed (digest mismatch)");
  }
  SECTION("a descriptor's name changed names that object") {
    auto changed = sif;
    changed.objects[0].descriptor[rt::squash::kSifNameAt] = 'X';
    CHECK(sif_check_metadata(fd.get(), changed, 1, m, f.path).find("object 1 (definition file): its descriptor") == 0);
  }
  SECTION("the image id changed is the header's") {
    auto changed = sif;
    changed.header[50] ^= 1;
    CHECK(sif_check_metadata(fd.get(), changed, 1, m, f.path).find("the SIF header") == 0);
  }
  SECTION("an object missing from the signature, or one signed that is gone") {
    auto fewer = m;
    fewer.objects.pop_back();
    CHECK(sif_check_metadata(fd.get(), sif, 1, fewer, f.path) == "object 2 (partition) is in the group but not signed");
    auto more = m;
    more.objects.push_back({5, m.objects[0].descriptor_digest, m.objects[0].object_digest});
    CHECK(sif_check_metadata(fd.get(), sif, 1, more, f.path) == "object 6 was signed but is no longer in the group");
  }
}

TEST_CASE("a signature descriptor records SHA-256 and the key's 20-byte fingerprint", "[sif_sign]") {
  const std::string fp = "12045C8C0B1004D058DE4BEDA20C27EE7FF7BA84";
  const std::string extra = sif_signature_extra(fp);
  REQUIRE(extra.size() == 24);
  CHECK(extra.substr(0, 4) == std::string("\x01\0\0\0", 4));
  rt::squash::SifObject sig;
  sig.type = static_cast<int32_t>(SifData::Signature);
  sig.descriptor = rt::squash::sif_descriptor(SifData::Signature, 3, 0xf0000000u, 0xf0000001u, 40960, 1054, 1054, 0,
                                              "", extra);
  sig.group = 0xf0000000u;
  sig.link = 0xf0000001u;
  CHECK(sif_signature_fingerprint(sig) == "12045c8c0b1004d058de4beda20c27ee7ff7ba84");
  CHECK(sif_linked_group(sig) == 1);
  CHECK(sif_group(sig) == 0);
  CHECK_THROWS_WITH(sif_signature_extra(std::string(64, 'A')), Catch::Contains("not 20 bytes"));
}
