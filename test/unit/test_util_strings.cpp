#include <catch2/catch.hpp>

#include "util/strings.hpp"

using namespace rt::util;

TEST_CASE("split keeps empty fields") {
  CHECK(split("a::b", ':') == std::vector<std::string>{"a", "", "b"});
  CHECK(split("", ':') == std::vector<std::string>{""});
}

TEST_CASE("glob_match is shell-style") {
  CHECK(glob_match("SLURM_*", "SLURM_JOB_ID"));
  CHECK_FALSE(glob_match("SLURM_*", "XSLURM_JOB_ID"));
  CHECK(glob_match("A?C", "ABC"));
}

TEST_CASE("path_within respects component boundaries") {
  CHECK(path_within("/home/a", "/home"));
  CHECK(path_within("/home", "/home"));
  CHECK_FALSE(path_within("/homework", "/home"));
  CHECK(path_within("/anything", "/"));
}

TEST_CASE("quoted escapes control characters") {
  CHECK(quoted("a\nb") == "`a\\x0ab`");
}

TEST_CASE("join is the inverse of split") {
  using V = std::vector<std::string>;
  CHECK(rt::util::join(V{"a", "b", "c"}, '/') == "a/b/c");
  CHECK(rt::util::join(V{"", "x", ""}, ':') == ":x:");
  CHECK(rt::util::join(V{}, ',').empty());
  CHECK(rt::util::split(rt::util::join(V{"", "lib", "x"}, ':'), ':') == V{"", "lib", "x"});
}
