#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "image/compress.hpp"
#include "image/layer_stream.hpp"
#include "image/sha256.hpp"
#include "temp_dir.hpp"

using namespace rt::image;

namespace {

// Bytes that compress somewhat, like a tree's: words and some noise.
std::string sample(size_t size) {
  std::mt19937 rng(7);
  std::string s;
  const char* words[] = {"usr/lib/", "libc.so.6 ", "\x7f" "ELF", "#!/bin/sh\n", "0000644 ", "ustar  "};
  while (s.size() < size) {
    s += words[rng() % 6];
    if (rng() % 5 == 0) s += static_cast<char>(rng());
  }
  s.resize(size);
  return s;
}

ReadFn string_reader(const std::string& s, size_t step) {
  auto at = std::make_shared<size_t>(0);
  return [&s, at, step](void* buf, size_t size) {
    const size_t n = std::min({size, step, s.size() - *at});
    std::memcpy(buf, s.data() + *at, n);
    *at += n;
    return n;
  };
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// What LayerStream (ISA-L igzip, libzstd) reads back from `file`.
std::string unpack(const std::string& file, std::string* blob_digest) {
  int fd = ::open(file.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  LayerStream s([fd](void* buf, size_t size) { return static_cast<size_t>(::read(fd, buf, size)); }, file);
  std::string out, buf(65536, '\0');
  for (size_t n; (n = s.read(buf.data(), buf.size())) > 0;) out.append(buf.data(), n);
  ::close(fd);
  *blob_digest = s.blob_digest();
  return out;
}

}  // namespace

TEST_CASE("compress: gzip in parallel blocks and zstd read back whole, with both digests") {
  TempDir dir;
  // Several blocks and a short last one; read in odd steps; also empty.
  for (size_t size : {size_t(0), size_t(1), size_t(3u << 20) + 12345}) {
    const std::string in = sample(size);
    for (Compression c : {Compression::Gzip, Compression::Zstd}) {
      for (unsigned threads : {1u, 3u}) {
        const std::string out = dir.path + "/" + std::to_string(size) + compression_name(c) + std::to_string(threads);
        uint64_t counted = 0;
        CompressedLayer z = compress_layer(string_reader(in, 77777), out, c, threads, [&](uint64_t n) { counted += n; });
        CHECK(counted == size);
        CHECK(z.diff_id == sha256_digest(in));
        CHECK(z.digest == sha256_digest(slurp(out)));
        CHECK(z.size == slurp(out).size());
        std::string blob;
        CHECK(unpack(out, &blob) == in);
        CHECK(blob == z.digest);
      }
    }
  }
}

TEST_CASE("compress: the same input gives the same gzip bytes, whatever the threads") {
  TempDir dir;
  const std::string in = sample(5u << 20);
  const CompressedLayer a = compress_layer(string_reader(in, 1 << 20), dir.path + "/a", Compression::Gzip, 1);
  const CompressedLayer b = compress_layer(string_reader(in, 4096), dir.path + "/b", Compression::Gzip, 4);
  CHECK(a.digest == b.digest);
  CHECK(a.size < in.size() / 2);
  // A file gzip(1) itself accepts.
  CHECK(std::system(("gzip -t " + dir.path + "/a").c_str()) == 0);
}

TEST_CASE("compress: only gzip and zstd are layer compressions") {
  CHECK(parse_compression("gzip") == Compression::Gzip);
  CHECK(parse_compression("zstd") == Compression::Zstd);
  CHECK_THROWS_WITH(parse_compression("lz4"), Catch::Contains("unknown layer compression `lz4`"));
  CHECK(std::string(layer_media_type(Compression::Zstd)) == "application/vnd.oci.image.layer.v1.tar+zstd");
}
