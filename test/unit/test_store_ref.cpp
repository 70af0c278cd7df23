#include <catch2/catch.hpp>

#include "rt/error.hpp"
#include "store/ref.hpp"

using rt::store::parse_reference;

TEST_CASE("Docker Hub defaults") {
  auto r = parse_reference("ubuntu");
  CHECK(r.registry == "docker.io");
  CHECK(r.repository == "library/ubuntu");
  CHECK(r.tag == "latest");
  CHECK(r.str() == "docker.io/library/ubuntu:latest");
  CHECK(r.api_host() == "registry-1.docker.io");
  CHECK(parse_reference("docker://ubuntu:24.04").str() == "docker.io/library/ubuntu:24.04");
  CHECK(parse_reference("user/app:1").repository == "user/app");
}

TEST_CASE("registries with ports and digests") {
  std::string d = "sha256:" + std::string(64, 'a');
  auto r = parse_reference("127.0.0.1:5000/test/bb@" + d);
  CHECK(r.registry == "127.0.0.1:5000");
  CHECK(r.repository == "test/bb");
  CHECK(r.tag.empty());
  CHECK(r.manifest_ref() == d);
  auto n = parse_reference("nvcr.io/nvidia/pytorch:24.01-py3");
  CHECK(n.registry == "nvcr.io");
  CHECK(n.tag == "24.01-py3");
  CHECK(parse_reference("localhost/x").registry == "localhost");
}

TEST_CASE("malformed references are refused") {
  CHECK_THROWS_AS(parse_reference(""), rt::Error);
  CHECK_THROWS_AS(parse_reference("Ubuntu"), rt::Error);
  CHECK_THROWS_AS(parse_reference("ubuntu@sha256:abc"), rt::Error);
  CHECK_THROWS_AS(parse_reference("ubuntu:bad tag"), rt::Error);
  CHECK_THROWS_AS(parse_reference("a//b"), rt::Error);
}
