#include <catch2/catch.hpp>

#include "util/fs.hpp"

using rt::util::normalize_path;

TEST_CASE("normalize_path collapses dots and slashes lexically") {
  CHECK(normalize_path("/a//b/./c/") == "/a/b/c");
  CHECK(normalize_path("/a/b/../c") == "/a/c");
  CHECK(normalize_path("/../..") == "/");
  CHECK(normalize_path("x/y", "/base") == "/base/x/y");
  CHECK(normalize_path("", "/base") == "/base");
}

TEST_CASE("read_file_if_exists tells a missing file from a present one") {
  CHECK_FALSE(rt::util::read_file_if_exists("/nonexistent/file").has_value());
  auto text = rt::util::read_file_if_exists("/proc/self/comm");
  REQUIRE(text.has_value());
  CHECK_FALSE(text->empty());
}
