#include <catch2/catch.hpp>

#include "rt/error.hpp"
#include "rt/exec.hpp"

using rt::parse_bind;

TEST_CASE("bind SRC alone binds at the same path") {
  auto b = parse_bind("/data");
  CHECK(b.src == "/data");
  CHECK(b.dst.empty());  // the plan puts it where SRC is
  CHECK_FALSE(b.readonly);
}

TEST_CASE("bind with destination and ro") {
  auto b = parse_bind("/data:/mnt/d:ro");
  CHECK(b.dst == "/mnt/d");
  CHECK(b.readonly);
  CHECK_FALSE(parse_bind("/data:/mnt/d:rw").readonly);
  CHECK(parse_bind("rel::ro").dst.empty());  // empty DST means where SRC is
}

TEST_CASE("malformed --bind is refused") {
  CHECK_THROWS_AS(parse_bind(":/x"), rt::Error);
  CHECK_THROWS_AS(parse_bind("/a:/b:rx"), rt::Error);
  CHECK_THROWS_AS(parse_bind("/a:relative"), rt::Error);
  CHECK_THROWS_AS(parse_bind("/a:/b:ro:x"), rt::Error);
}
