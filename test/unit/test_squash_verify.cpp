// squash/verify: a SquashFS image's metadata is checked before
// libsquashfuse reads it; corrupt images are refused with a reason.
#include <fcntl.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "rt/error.hpp"
#include "squash/sqfs.hpp"
#include "squash/verify.hpp"
#include "temp_dir.hpp"
#include "util/fd.hpp"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A tree with a directory long enough to carry an index, a file with blocks
// and a fragment tail, links and a fifo, as mksquashfs OPTIONS makes it.
std::string make_image(const TempDir& t, const std::string& name, const std::string& options) {
  const std::string tree = t.path + "/tree", file = t.path + "/" + name;
  std::string script = "set -e; mkdir -p " + tree + "/etc " + tree + "/long " + tree +
                       "/usr/bin; echo 'root:x:0:0::/root:/bin/sh' >" + tree + "/etc/passwd; head -c 10000 /dev/zero >" +
                       tree + "/usr/bin/prog; ln -sf usr/bin " + tree + "/bin; [ -p " + tree + "/fifo ] || mkfifo " +
                       tree + "/fifo; for i in $(seq 400); do : >" + tree +
                       "/long/a-rather-long-name-to-fill-listing-blocks-$i; done; mksquashfs " + tree + " " + file +
                       " -noappend -quiet -no-progress -b 4096 " + options + " >/dev/null";
  REQUIRE(std::system(script.c_str()) == 0);
  return file;
}

// The message verify_image gives for the file's bytes, or "" if it passes.
std::string verdict(const std::string& file) {
  rt::util::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  try {
    rt::squash::verify_image(fd.get(), file);
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "";
}

void put32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}
void put64(std::string& s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}

}  // namespace

TEST_CASE("images mksquashfs writes pass and read back") {
  TempDir t;
  for (const char* opts : {"-comp gzip", "-comp zstd", "-noI -noD -noF -noX", "-comp xz -b 1M"}) {
    INFO(opts);
    std::string file = make_image(t, "ok.sqfs", opts);
    CHECK(verdict(file).empty());
    rt::squash::Image image(file);
    CHECK(image.read_file("/etc/passwd") == "root:x:0:0::/root:/bin/sh\n");
    CHECK(image.read_file("/bin/prog") == std::string(10000, '\0'));
    CHECK(image.list("/long").size() == 400);
    CHECK(image.has("/long/a-rather-long-name-to-fill-listing-blocks-399"));
  }
}

TEST_CASE("a corrupt superblock is refused naming the field") {
  TempDir t;
  const std::string good = slurp(make_image(t, "ok.sqfs", "-comp gzip")), file = t.path + "/bad.sqfs";
  auto refused = [&](size_t at, uint64_t v, int width, const std::string& why) {
    std::string s = good;
    if (width == 4)
      put32(s, at, static_cast<uint32_t>(v));
    else
      put64(s, at, v);
    spit(file, s);
    std::string msg = verdict(file);
    INFO("offset " << at << " = " << v);
    CHECK_THAT(msg, Catch::Contains("image `" + file + "`") && Catch::Contains(why));
    CHECK_THROWS_AS(rt::squash::Image(file), rt::Error);
  };
  refused(12, 0, 4, "block size 0");  // libsquashfuse divides by it
  refused(12, 96, 4, "block size 96");
  refused(12, 0xffffffff, 4, "block size 4294967295");
  refused(12, 8192, 4, "(log 12)");                // disagrees with block_log
  refused(40, good.size() + 1, 8, "truncated");    // bytes_used
  refused(48, good.size() - 1, 8, "uid/gid table");  // id table's index past its end
  refused(64, 0, 8, "inode table starts outside");
  refused(0, 0x12345678, 4, "no `hsqs` magic");
  std::string s = good;
  s[28] = 3;  // s_major
  spit(file, s);
  CHECK_THAT(verdict(file), Catch::Contains("version 3.0"));
  spit(file, good.substr(0, 50));
  CHECK_THAT(verdict(file), Catch::Contains("smaller than a SquashFS superblock"));
  uint64_t used = 0;
  std::memcpy(&used, &good[40], 8);  // bytes_used (x86: little-endian)
  spit(file, good.substr(0, used - 100));
  CHECK_THAT(verdict(file), Catch::Contains("truncated"));
}

TEST_CASE("corrupt directory listings and inodes are refused") {
  TempDir t;
  // Uncompressed tables: the listing's bytes can be found and changed.
  const std::string good = slurp(make_image(t, "ok.sqfs", "-noI -noD -noF -noX")), file = t.path + "/bad.sqfs";
  const size_t name = good.find("passwd");
  REQUIRE(name != std::string::npos);
  // The entry before the name: offset, inode delta, type, name size - 1.
  std::string s = good;
  s[name - 2] = static_cast<char>(0x2b);  // 300 - 1, little-endian
  s[name - 1] = 0x01;
  spit(file, s);
  CHECK_THAT(verdict(file), Catch::Contains("names more than 256 bytes"));
  s = good;
  s[name - 4] = 9;  // type
  spit(file, s);
  CHECK_THAT(verdict(file), Catch::Contains("unknown type 9"));
  s = good;
  s[name - 4] = 1;  // a file listed as a directory
  spit(file, s);
  CHECK_THAT(verdict(file), Catch::Contains("disagrees with its inode"));
  s = good;
  s[name - 8] = static_cast<char>(0xf0);  // the inode's offset in its block
  s[name - 7] = 0x7f;
  spit(file, s);
  CHECK_THAT(verdict(file), Catch::Contains("inode table"));
  s = good;
  std::memcpy(&s[name], "../../", 6);
  spit(file, s);
  CHECK_THAT(verdict(file), Catch::Contains("named `../../`"));
}
