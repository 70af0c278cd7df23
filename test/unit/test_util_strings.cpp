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

TEST_CASE("quoted escapes control characters") { CHECK(quoted("a\nb") == "`a\\x0ab`"); }

TEST_CASE("join is the inverse of split") {
  using V = std::vector<std::string>;
  CHECK(rt::util::join(V{"a", "b", "c"}, '/') == "a/b/c");
  CHECK(rt::util::join(V{"", "x", ""}, ':') == ":x:");
  CHECK(rt::util::join(V{}, ',').empty());
  CHECK(rt::util::split(rt::util::join(V{"", "lib", "x"}, ':'), ':') == V{"", "lib", "x"});
}

TEST_CASE("join takes a separator string and any span of parts") {
  std::vector<std::string> v{"a", "b", "c"};
  CHECK(rt::util::join(v, ", ") == "a, b, c");
  CHECK(rt::util::join(std::span(v).first(2), '/') == "a/b");
  CHECK(rt::util::join(std::vector<std::string>{}, '/').empty());
}

TEST_CASE("trim drops the given characters at both ends only") {
  CHECK(rt::util::trim("  a b \r\n") == "a b");
  CHECK(rt::util::trim("\t\t") == "");
  CHECK(rt::util::trim("xxaxx", "x") == "a");
}

TEST_CASE("base_name and dir_name split a path lexically") {
  CHECK(rt::util::base_name("/a/b") == "b");
  CHECK(rt::util::base_name("b") == "b");
  CHECK(rt::util::base_name("/a/") == "");
  CHECK(rt::util::dir_name("/a/b") == "/a");
  CHECK(rt::util::dir_name("/b") == "/");
  CHECK(rt::util::dir_name("b") == "/");
}

TEST_CASE("human_bytes picks a unit") {
  CHECK(rt::util::human_bytes(999) == "999 B");
  CHECK(rt::util::human_bytes(12300) == "12.3 kB");
  CHECK(rt::util::human_bytes(12300000) == "12.3 MB");
  CHECK(rt::util::human_bytes(1230000000) == "1.23 GB");
}

TEST_CASE("utf8_escaped keeps UTF-8 and escapes every other byte") {
  CHECK(utf8_escaped("plain") == "plain");
  CHECK(utf8_escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(utf8_escaped("caf\xe9") == "caf\\xe9");                    // Latin-1
  CHECK(utf8_escaped("\xc0\xaf") == "\\xc0\\xaf");                 // overlong
  CHECK(utf8_escaped("\xed\xa0\x80") == "\\xed\\xa0\\x80");        // a surrogate
  CHECK(utf8_escaped("\xe2\x82") == "\\xe2\\x82");                 // cut short
  CHECK(utf8_escaped("a\xff" "b") == "a\\xffb");
  CHECK(utf8_escaped(std::string("n\0l", 3)) == std::string("n\0l", 3));
}
