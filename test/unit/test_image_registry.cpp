// image/registry: the pure parts of registry authentication.
#include <catch2/catch.hpp>

#include "image/registry.hpp"

using rt::image::parse_challenge;
using rt::image::token_url;

TEST_CASE("registry: a Bearer challenge is read, quoted commas included") {
  auto c = parse_challenge(
      R"(Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push")");
  CHECK(c.scheme == "bearer");
  CHECK(c.params.at("realm") == "https://auth.example/token");
  CHECK(c.params.at("service") == "registry.example");
  CHECK(c.params.at("scope") == "repository:a/b:pull,push");
  auto b = parse_challenge(R"(Basic Realm=registry)");
  CHECK(b.scheme == "basic");
  CHECK(b.params.at("realm") == "registry");  // keys lowercase, unquoted values to the comma
  CHECK(parse_challenge("Bearer").params.empty());
}

TEST_CASE("registry: the token URL escapes service and scope, and defaults to pull") {
  auto c = parse_challenge(R"(Bearer realm="https://auth.example/token",service="reg ex")");
  CHECK(token_url(c, "lib/x") == "https://auth.example/token?service=reg%20ex&scope=repository%3Alib%2Fx%3Apull");
  auto q = parse_challenge(R"(Bearer realm="https://a/t?x=1",service="s",scope="repository:r:push")");
  CHECK(token_url(q, "ignored") == "https://a/t?x=1&service=s&scope=repository%3Ar%3Apush");
}

TEST_CASE("registry: docker.io credentials are found under Docker's own names") {
  auto keys = rt::image::docker_config_keys("docker.io");
  CHECK(keys.front() == "https://index.docker.io/v1/");
  CHECK(rt::image::docker_config_keys("ghcr.io") ==
        std::vector<std::string>{"ghcr.io", "https://ghcr.io", "http://ghcr.io"});
}
