// image/registry: the pure parts of registry authentication.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "image/registry.hpp"
#include "temp_dir.hpp"

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
  // A push asks for both where the challenge names no scope.
  CHECK(token_url(c, "lib/x", true) ==
        "https://auth.example/token?service=reg%20ex&scope=repository%3Alib%2Fx%3Apull%2Cpush");
}

TEST_CASE("registry: docker.io credentials are found under Docker's own names") {
  auto keys = rt::image::docker_config_keys("docker.io");
  CHECK(keys.front() == "https://index.docker.io/v1/");
  CHECK(rt::image::docker_config_keys("ghcr.io") ==
        std::vector<std::string>{"ghcr.io", "https://ghcr.io", "http://ghcr.io"});
}

TEST_CASE("registry: logout removes every key of a registry's credentials and nothing else") {
  TempDir home;
  const std::string old = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("HOME", home.path.c_str(), 1);
  rt::image::save_docker_config_credentials("docker.io", "me", "pw");
  rt::image::save_docker_config_credentials("ghcr.io", "me", "pw2");
  // Docker's older name for the Hub, as another client filed it.
  {
    std::ifstream in(home.path + "/.docker/config.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["auths"]["index.docker.io"] = {{"auth", "bWU6b2xk"}};
    j["credsStore"] = "pass";
    std::ofstream(home.path + "/.docker/config.json") << j.dump();
  }
  CHECK(rt::image::docker_config_credentials("docker.io") == "me:pw");
  CHECK(rt::image::remove_docker_config_credentials("docker.io") ==
        std::vector<std::string>{"https://index.docker.io/v1/", "index.docker.io"});
  CHECK(rt::image::docker_config_credentials("docker.io").empty());
  CHECK(rt::image::docker_config_credentials("ghcr.io") == "me:pw2");
  CHECK(rt::image::remove_docker_config_credentials("docker.io").empty());  // none left: the file is untouched
  CHECK(rt::image::remove_docker_config_credentials("") == std::vector<std::string>{"ghcr.io"});
  std::ifstream in(home.path + "/.docker/config.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j["auths"].empty());
  CHECK(j["credsStore"] == "pass");
  if (old.empty())
    ::unsetenv("HOME");
  else
    ::setenv("HOME", old.c_str(), 1);
}

TEST_CASE("credentials go only to a token service as safe as the registry") {
  using rt::image::may_send_credentials;
  std::string why;
  CHECK(may_send_credentials("https://reg.example.org/token", "reg.example.org", false, &why));
  CHECK(may_send_credentials("https://127.0.0.1:5000/token", "127.0.0.1:5000", false, &why));
  CHECK(may_send_credentials("https://reg.example.org:443/token", "reg.example.org", false, &why));
  CHECK(may_send_credentials("https://auth.docker.io/token", "registry-1.docker.io", false, &why));
  CHECK(may_send_credentials("http://127.0.0.1:5000/token", "127.0.0.1:5000", true, &why));  // a plain-HTTP registry
  // Another port of the same host may be another user's service.
  CHECK_FALSE(may_send_credentials("https://127.0.0.1:5001/token", "127.0.0.1:5000", false, &why));
  CHECK_THAT(why, Catch::Contains("another port (127.0.0.1:5001)"));
  CHECK_FALSE(may_send_credentials("http://127.0.0.1:5001/token", "127.0.0.1:5000", true, &why));
  CHECK_FALSE(may_send_credentials("https://reg.example.org:8443/token", "reg.example.org", false, &why));
  ::setenv("RT_AUTH_REALMS", "127.0.0.1:5001", 1);
  CHECK(may_send_credentials("https://127.0.0.1:5001/token", "127.0.0.1:5000", false, &why));
  CHECK_FALSE(may_send_credentials("https://127.0.0.1:5002/token", "127.0.0.1:5000", false, &why));
  ::unsetenv("RT_AUTH_REALMS");
  CHECK_FALSE(may_send_credentials("http://reg.example.org/token", "reg.example.org", false, &why));
  CHECK_THAT(why, Catch::Contains("not HTTPS"));
  CHECK_FALSE(may_send_credentials("https://evil.example.com/token", "reg.example.org", false, &why));
  CHECK_THAT(why, Catch::Contains("another host (evil.example.com:443)"));
  CHECK_FALSE(may_send_credentials("https://user@evil.example.com/t", "reg.example.org", false, &why));
  ::setenv("RT_AUTH_REALMS", "login.example.net, evil.example.com", 1);
  CHECK(may_send_credentials("https://evil.example.com/token", "reg.example.org", false, &why));
  ::unsetenv("RT_AUTH_REALMS");
}

TEST_CASE("a blob's deadline has a floor and grows with its size") {
  ::unsetenv("RT_PULL_TIMEOUT");
  ::unsetenv("RT_PULL_MIN_RATE");
  CHECK(rt::image::blob_deadline(0) == 300);
  CHECK(rt::image::blob_deadline(64 * 1024 * 100) == 400);
  ::setenv("RT_PULL_TIMEOUT", "2", 1);
  ::setenv("RT_PULL_MIN_RATE", "1000", 1);
  CHECK(rt::image::blob_deadline(5000) == 7);
  ::setenv("RT_PULL_MIN_RATE", "junk", 1);
  CHECK(rt::image::blob_deadline(0) == 2);
  ::unsetenv("RT_PULL_TIMEOUT");
  ::unsetenv("RT_PULL_MIN_RATE");
}
