#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "image/manifest.hpp"
#include "rt/error.hpp"
#include "util/digest.hpp"

using namespace rt::image;

namespace {
const std::string kD = "sha256:" + std::string(64, 'b');
}

TEST_CASE("JSON over the nesting limit is refused") {
  std::string deep(100, '[');
  deep = "{\"a\":" + deep + std::string(100, ']') + "}";
  CHECK_THROWS_WITH(parse_json(deep, "x"), Catch::Contains("nested deeper"));
  CHECK_THROWS_WITH(parse_json(std::string(5 << 20, ' '), "x"), Catch::Contains("larger than"));
  CHECK_NOTHROW(parse_json(R"({"a":[1,2]})", "x"));
}

TEST_CASE("manifest descriptors are validated before use") {
  auto doc = parse_json(R"({"schemaVersion":2,"config":{"digest":")" + kD +
                            R"(","size":2},"layers":[{"digest":"sha256:../../x","size":1}]})",
                        "m");
  CHECK_THROWS_WITH(parse_manifest(doc, "m"), Catch::Contains("malformed digest"));
  auto v1 = parse_json(R"({"schemaVersion":1})", "m");
  CHECK_THROWS_WITH(parse_manifest(v1, "m"), Catch::Contains("schema version 2"));
}

TEST_CASE("layer media types: foreign, encrypted and unknown refused") {
  Descriptor d;
  d.digest = kD;
  d.media_type = "application/vnd.oci.image.layer.v1.tar+zstd";
  CHECK_NOTHROW(check_layer(d, "i"));
  d.media_type = "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";
  CHECK_THROWS_WITH(check_layer(d, "i"), Catch::Contains("foreign"));
  d.media_type = "application/vnd.oci.image.layer.v1.tar+gzip+encrypted";
  CHECK_THROWS_WITH(check_layer(d, "i"), Catch::Contains("encrypted"));
  d.media_type = "application/x-something";
  CHECK_THROWS_WITH(check_layer(d, "i"), Catch::Contains("unsupported"));
}

TEST_CASE("platform selection and its error listing what exists") {
  std::vector<Descriptor> ms(3);
  ms[0].platform = {"linux", "amd64", ""};
  ms[1].platform = {"linux", "arm64", "v8"};
  ms[2].platform = {"unknown", "unknown", ""};
  CHECK(&select_platform(ms, {"linux", "arm64", "v8"}, "i") == &ms[1]);
  CHECK(&select_platform(ms, {"linux", "arm64", ""}, "i") == &ms[1]);
  try {
    select_platform(ms, {"linux", "s390x", ""}, "i");
    FAIL("no error");
  } catch (const rt::Error& e) {
    CHECK(e.hint().find("linux/amd64, linux/arm64/v8") != std::string::npos);
  }
  CHECK(parse_platform("linux/arm/v7").variant == "v7");
  CHECK_THROWS_AS(parse_platform("linux"), rt::Error);
}

TEST_CASE("digest strings") {
  CHECK(rt::util::is_valid_digest(kD));
  CHECK_FALSE(rt::util::is_valid_digest("sha256:" + std::string(64, 'B')));
  CHECK_FALSE(rt::util::is_valid_digest("sha512:" + std::string(64, 'b')));
  CHECK_FALSE(rt::util::is_valid_digest(kD + "0"));
}

TEST_CASE("a config that lists no diff_ids gets the layers' own") {
  using rt::image::config_with_diff_ids;
  const std::string d = "sha256:" + std::string(64, 'a');
  const std::string empty = R"({"os":"linux","rootfs":{"type":"layers","diff_ids":[]}})";
  std::string filled = config_with_diff_ids(empty, {d});
  CHECK(filled.find(d) != std::string::npos);
  CHECK(config_with_diff_ids(filled, {"sha256:" + std::string(64, 'b')}) == filled);  // listed: kept
  CHECK(config_with_diff_ids(R"({"os":"linux"})", {d}).find(d) != std::string::npos);
  CHECK(config_with_diff_ids(empty, {}) == empty);
}
