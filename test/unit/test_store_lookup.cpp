#include <catch2/catch.hpp>

#include <filesystem>

#include "rt/error.hpp"
#include "store/lookup.hpp"
#include "store/root.hpp"

using namespace rt::store;

TEST_CASE("image names map to safe directory names and back") {
  CHECK(escape_name("docker.io/library/ubuntu:24.04") == "docker.io+library+ubuntu:24.04");
  CHECK(unescape_name("docker.io+library+ubuntu:24.04") == "docker.io/library/ubuntu:24.04");
  CHECK_THROWS_AS(escape_name(".."), rt::Error);
  CHECK_THROWS_AS(escape_name("../x"), rt::Error);
  CHECK_THROWS_AS(escape_name("/abs"), rt::Error);
  CHECK_THROWS_AS(escape_name("a\nb"), rt::Error);
  CHECK_THROWS_AS(escape_name(""), rt::Error);
}

TEST_CASE("find_image accepts the name as stored or as a reference") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/rt-store-XXXXXX";
  fs::path root = ::mkdtemp(tmpl);
  fs::create_directories(root / "images" / "docker.io+library+ubuntu:latest");
  fs::create_directories(root / "images" / "mine");
  fs::create_directory_symlink(root / "images" / "mine", root / "images" / "linked");
  auto store = Root::open(root, false);
  REQUIRE(store);
  CHECK(find_image(*store, "mine").has_value());
  CHECK(find_image(*store, "ubuntu").has_value());
  CHECK(find_image(*store, "docker.io/library/ubuntu:latest").has_value());
  CHECK_FALSE(find_image(*store, "debian").has_value());
  CHECK_FALSE(find_image(*store, "../images/mine").has_value());
  CHECK_FALSE(find_image(*store, "linked").has_value());  // a symlink is no image
  fs::remove_all(root);
}
