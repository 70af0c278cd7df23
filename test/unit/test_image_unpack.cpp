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
