#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "image/oras.hpp"
#include "squash/lazy.hpp"
#include "rt/error.hpp"
#include "store/ref.hpp"

using namespace rt::image;

namespace {
const std::string kSif = "sha256:" + std::string(64, 'c');

Descriptor sif_descriptor() {
  Descriptor d;
  d.media_type = oras::kSifLayer;
  d.digest = kSif;
  d.size = 29814784;
  return d;
}
}  // namespace

TEST_CASE("oras:// is told from other references and taken off") {
  CHECK(is_oras("oras://reg:5000/a/b:1"));
  CHECK_FALSE(is_oras("docker://reg/a"));
  CHECK_FALSE(is_oras("reg/oras://x"));
  CHECK(without_oras("oras://reg:5000/a/b:1") == "reg:5000/a/b:1");
  CHECK(without_oras("oras:///reg/a:1") == "reg/a:1");
}

TEST_CASE("a SIF artifact's manifest is Apptainer's, field for field") {
  const std::string m = sif_manifest(sif_descriptor(), "ubuntu_latest.sif", 1703001734);
  CHECK(m ==
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
        R"("config":{"mediaType":"application/vnd.sylabs.sif.config.v1+json","size":2,)"
        R"("digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","data":"e30="},)"
        R"("layers":[{"mediaType":"application/vnd.sylabs.sif.layer.v1.sif","size":29814784,"digest":")" +
            kSif +
            R"(","annotations":{"org.opencontainers.image.title":"ubuntu_latest.sif"}}],)"
            R"("annotations":{"org.opencontainers.image.created":"2023-12-19T16:02:14Z"}})");
  // Without a creation time: no annotations of the manifest's own.
  CHECK(sif_manifest(sif_descriptor(), "x.sif", -1).find("image.created") == std::string::npos);
  // What is written is what is read.
  const Descriptor back = sif_layer(nlohmann::json::parse(m), "oras://r/x:1");
  CHECK(back.digest == kSif);
  CHECK(back.size == 29814784);
}

TEST_CASE("a manifest that is no SIF artifact is refused naming the reference and the media type") {
  auto manifest = [](const std::string& layers) {
    return nlohmann::json::parse(R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
                                 R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,)"
                                 R"("digest":"sha256:)" +
                                 std::string(64, 'a') + R"("},"layers":[)" + layers + "]}");
  };
  auto layer = [](const std::string& type) {
    return R"({"mediaType":")" + type + R"(","size":5,"digest":"sha256:)" + std::string(64, 'b') + R"("})";
  };
  const std::string gz = "application/vnd.oci.image.layer.v1.tar+gzip";
  CHECK_THROWS_WITH(sif_layer(manifest(layer(gz)), "oras://reg/app:v1"),
                    Catch::Contains("`oras://reg/app:v1` is no SIF file") && Catch::Contains("`" + gz + "`"));
  CHECK_THROWS_WITH(sif_layer(manifest(layer(gz) + "," + layer(gz)), "oras://reg/app:v1"),
                    Catch::Contains("2 layers") && Catch::Contains(gz));
  CHECK_THROWS_WITH(sif_layer(manifest(""), "oras://reg/app:v1"), Catch::Contains("0 layers"));
  auto index = nlohmann::json::parse(R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json",)"
                                     R"("manifests":[]})");
  CHECK_THROWS_WITH(sif_layer(index, "oras://reg/app:v1"),
                    Catch::Contains("oras://reg/app:v1") && Catch::Contains("index"));
  try {
    sif_layer(manifest(layer(gz)), "oras://reg/app:v1");
  } catch (const rt::Error& e) {
    CHECK(e.hint().find("rt pull reg/app:v1") != std::string::npos);
  }
  // Singularity's first, misspelt media type is still a SIF file.
  CHECK(sif_layer(manifest(layer(oras::kSifLayerOld)), "oras://r/x").size == 5);
  CHECK(sif_layer(manifest(layer(oras::kSifLayer)), "oras://r/x").size == 5);
}

TEST_CASE("a pulled SIF file's default name is Apptainer's NAME_TAG.sif") {
  using rt::store::parse_reference;
  CHECK(sif_file_name(parse_reference("reg:5000/group/app:v1")) == "app_v1.sif");
  CHECK(sif_file_name(parse_reference("reg:5000/app")) == "app_latest.sif");
  CHECK(sif_file_name(parse_reference("reg:5000/app@sha256:" + std::string(64, 'd'))) == "app_dddddddddddd.sif");
}

TEST_CASE("RFC 3339 times in UTC") {
  CHECK(rfc3339_utc(0) == "1970-01-01T00:00:00Z");
  CHECK(rfc3339_utc(1703001734) == "2023-12-19T16:02:14Z");
}

TEST_CASE("a chunk index names the chunk index blob by an annotation of the SIF layer") {
  const std::string index = "sha256:" + std::string(64, 'd');
  const auto m = nlohmann::json::parse(sif_manifest(sif_descriptor(), "app.sif", -1, index));
  CHECK(m["layers"][0]["annotations"]["org.rt.sif.chunks"] == index);
  CHECK(m["layers"][0]["annotations"]["org.opencontainers.image.title"] == "app.sif");
  CHECK(chunk_index_digest(m, "oras://r/x:1") == index);
  // Without: Apptainer's manifest, and no index.
  const auto plain = nlohmann::json::parse(sif_manifest(sif_descriptor(), "app.sif", -1));
  CHECK_FALSE(plain["layers"][0]["annotations"].contains("org.rt.sif.chunks"));
  CHECK(chunk_index_digest(plain, "oras://r/x:1").empty());
  auto bad = m;
  bad["layers"][0]["annotations"]["org.rt.sif.chunks"] = "sha256:../../etc";
  CHECK_THROWS_WITH(chunk_index_digest(bad, "oras://r/x:1"), Catch::Contains("oras://r/x:1") && Catch::Contains("no digest"));
}

TEST_CASE("chunk indexes: sizes, round trip, and what is refused") {
  using rt::squash::ChunkIndex;
  using rt::squash::chunk_size_for;
  using rt::squash::format_chunk_index;
  using rt::squash::parse_chunk_index;
  CHECK(chunk_size_for(0) == 256 * 1024);
  CHECK(chunk_size_for(uint64_t{8} << 30) == 256 * 1024);          // 32768 chunks
  CHECK(chunk_size_for((uint64_t{8} << 30) + 1) == 512 * 1024);    // one more: doubled
  CHECK(chunk_size_for(uint64_t{100} << 30) == 4 * 1024 * 1024);

  ChunkIndex c;
  c.chunk_size = 4096;
  c.size = 4096 * 2 + 10;
  c.digests = {std::string(64, 'a'), std::string(64, 'b'), std::string(64, 'c')};
  const std::string text = format_chunk_index(c);
  CHECK(text.starts_with("rt-chunks 1\nchunk-size 4096\nsize 8202\n"));
  const ChunkIndex back = parse_chunk_index(text, "idx");
  CHECK(back.digests == c.digests);
  CHECK(back.length(2) == 10);
  CHECK(back.length(3) == 0);
  CHECK(back.offset(2) == 8192);

  auto refused = [](const std::string& t, const char* why) {
    CHECK_THROWS_WITH(parse_chunk_index(t, "idx"), Catch::Contains("idx") && Catch::Contains(why));
  };
  const std::string d = std::string(64, 'a') + "\n";
  refused("", "not a chunk index");
  refused("rt-chunks 2\nchunk-size 4096\nsize 1\n" + d, "no `rt-chunks 1`");
  refused("rt-chunks 1\nchunk-size 4096\nsize 1\n" + d + d, "2 digests for 1 chunks");
  refused("rt-chunks 1\nchunk-size 4096\nsize 8193\n" + d + d, "2 digests for 3 chunks");
  refused("rt-chunks 1\nchunk-size 4000\nsize 1\n" + d, "not a power of two");
  refused("rt-chunks 1\nchunk-size 0\nsize 0\n", "not a power of two");
  refused("rt-chunks 1\nchunk-size -4096\nsize 1\n" + d, "is not a number");
  refused("rt-chunks 1\nchunk-size 4096\nsize 99999999999999999999\n" + d, "is not a number");
  refused("rt-chunks 1\nchunk-size 4096\nsize 1\n" + std::string(64, 'A') + "\n", "not a SHA-256");
  refused("rt-chunks 1\nchunk-size 4096\nsize 1\n" + std::string(63, 'a') + "\n", "not a SHA-256");
  refused("rt-chunks 1\nchunk-size 4096\nsize 1\n" + std::string(64, 'a'), "does not end a line");
}

TEST_CASE("lazy read-ahead: reads in order are fetched ahead, scattered reads are not") {
  using rt::squash::ReadAhead;
  constexpr uint64_t kRun = ReadAhead::kRunBeforeAhead, kWindow = ReadAhead::kMaxWindow;
  SECTION("a run of misses in order starts a window, topped up in batches, at most kMaxWindow") {
    ReadAhead ahead(10000);
    for (uint64_t c = 0; c < kRun; ++c) CHECK_FALSE(ahead.read(c, c, false));
    auto w = ahead.read(kRun, kRun, false);
    REQUIRE(w);
    CHECK(w->first == kRun + 1);
    CHECK(w->second == 2 * kRun);  // a window as long as the run
    // Reads of what came: nothing more until half the window is left.
    CHECK_FALSE(ahead.read(kRun + 1, kRun + 1, true));
    uint64_t wanted = w->second, topped = 0;
    for (uint64_t c = kRun + 2; c < 2000; ++c)
      if (auto more = ahead.read(c, c, true)) {
        CHECK(more->first == wanted + 1);  // never a chunk twice
        CHECK(more->second - c <= kWindow);
        if (c > 2 * kWindow) CHECK(more->second - more->first + 1 >= kWindow / 2);  // in batches, not a chunk at a time
        wanted = more->second;
        ++topped;
      }
    CHECK(topped > 10);
    CHECK(wanted < 2000 + kWindow);
  }
  SECTION("two interleaved runs (a file's blocks, its fragments) are each followed") {
    ReadAhead ahead(10000);
    int windows = 0;
    for (uint64_t i = 0; i < 3 * kRun; ++i) {
      windows += ahead.read(100 + i, 100 + i, false).has_value();
      windows += ahead.read(5000 + i, 5000 + i, false).has_value();
    }
    CHECK(windows >= 2);
  }
  SECTION("scattered misses and reads of what is there start nothing") {
    ReadAhead ahead(10000);
    for (uint64_t i = 0; i < 200; ++i) CHECK_FALSE(ahead.read((i * 7919) % 10000, (i * 7919) % 10000, false));
    for (uint64_t c = 0; c < 200; ++c) CHECK_FALSE(ahead.read(9000 + c, 9000 + c, true));
  }
  SECTION("out of order by a few chunks is still in order; nothing past the file") {
    ReadAhead ahead(25);
    std::optional<std::pair<uint64_t, uint64_t>> w;
    for (uint64_t c = 0; c < 24 && !w; ++c) {
      w = ahead.read(c + 1, c + 1, false);
      if (!w) w = ahead.read(c, c, false);
    }
    REQUIRE(w);
    CHECK(w->second == 24);  // the file's last chunk
  }
}

TEST_CASE("lazy scan: a file read whole is fetched in order, a program's reads start nothing") {
  using rt::squash::Scan;
  SECTION("below a tenth of the chunks, nothing; at a tenth, the rest from past the last chunk asked, round once") {
    Scan scan(1000);
    for (uint64_t c = 0; c < 99; ++c) CHECK_FALSE(scan.asked(c * 10, c * 10));
    CHECK_FALSE(scan.left());
    CHECK(scan.asked(500, 500));        // the 100th
    CHECK_FALSE(scan.asked(501, 501));  // started once
    std::vector<int> got(1000, 0);
    auto settled = [&](uint64_t i) { return got[i] > 0 || i % 10 == 0; };  // asked ones are there
    std::vector<std::pair<uint64_t, uint64_t>> pieces;
    while (auto p = scan.next(settled, 16)) {
      pieces.push_back(*p);
      for (uint64_t c = p->first; c <= p->second; ++c) ++got[c];
      CHECK(p->second - p->first + 1 <= 16);
    }
    REQUIRE_FALSE(pieces.empty());
    CHECK(pieces.front().first == 501);  // from past the last chunk asked for
    CHECK(pieces.back().second == 499);  // round to where it began
    for (uint64_t c = 0; c < 1000; ++c) CHECK(got[c] == (c % 10 == 0 ? 0 : 1));  // each missing chunk once
    CHECK_FALSE(scan.left());
  }
  SECTION("a run never crosses the file's end, nor takes what is on its way") {
    Scan scan(200);
    for (uint64_t c = 0; c < 64; ++c) scan.asked(130 + c % 60, 130 + c % 60);
    REQUIRE(scan.left());
    auto settled = [](uint64_t i) { return i == 5; };
    auto p = scan.next(settled, 100);
    REQUIRE(p);
    CHECK(p->second == 199);  // ends at the file's end
    p = scan.next(settled, 100);
    REQUIRE(p);
    CHECK(*p == std::pair<uint64_t, uint64_t>(0, 4));  // chunk 5 is on its way
  }
  SECTION("a program's reads of a large image (a Python start: some 5 %) start nothing") {
    Scan scan(3350);
    for (uint64_t c = 0; c < 160; ++c) CHECK_FALSE(scan.asked(c * 20, c * 20));  // 40 MB of 877
    CHECK_FALSE(scan.left());
  }
}
