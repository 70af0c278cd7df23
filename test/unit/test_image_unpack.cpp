#include <archive.h>
#include <catch2/catch.hpp>

#include "image/unpack.hpp"

using rt::image::split_entry_path;
using V = std::vector<std::string>;

TEST_CASE("entry paths are split into clean components") {
  V c;
  REQUIRE(split_entry_path("./usr//bin/./ls", c));
  CHECK(c == V{"usr", "bin", "ls"});
  REQUIRE(split_entry_path("./", c));
  CHECK(c.empty());
  CHECK_FALSE(split_entry_path("../etc/passwd", c));
  CHECK_FALSE(split_entry_path("a/../../b", c));
  CHECK_FALSE(split_entry_path("/etc/passwd", c));
  REQUIRE(split_entry_path("a..b/..c", c));  // dots inside names are fine
  CHECK(c == V{"a..b", "..c"});
}

TEST_CASE("archive_error never gives a null text, even when libarchive has none") {
  archive* a = archive_read_new();
  REQUIRE(a);
  CHECK(rt::image::archive_error(a).starts_with("libarchive gave no reason"));
  archive_read_free(a);
}
