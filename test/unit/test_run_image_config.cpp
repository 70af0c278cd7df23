#include <catch2/catch.hpp>

#include "rt/error.hpp"
#include "run/image_config.hpp"

using rt::run::parse_image_config;

TEST_CASE("OCI image config fields are read") {
  auto c = parse_image_config(R"({"architecture":"amd64","config":{"Env":["PATH=/x","A=b"],
      "Entrypoint":["/bin/ep"],"Cmd":["-c","x"],"WorkingDir":"/w","User":"1000"}})",
                              "c.json");
  CHECK(c.env == std::vector<std::string>{"PATH=/x", "A=b"});
  CHECK(c.entrypoint == std::vector<std::string>{"/bin/ep"});
  CHECK(c.cmd == std::vector<std::string>{"-c", "x"});
  CHECK(c.working_dir == "/w");
  CHECK(c.user == "1000");
}

TEST_CASE("absent and null fields are empty") {
  auto c = parse_image_config(R"({"config":{"Entrypoint":null}})", "c.json");
  CHECK(c.entrypoint.empty());
  CHECK(parse_image_config("{}", "c.json").cmd.empty());
}

TEST_CASE("malformed configs are refused naming the file") {
  CHECK_THROWS_WITH(parse_image_config("{not json", "bad.json"), Catch::Contains("`bad.json`"));
  CHECK_THROWS_AS(parse_image_config(R"({"config":{"Cmd":"sh"}})", "c.json"), rt::Error);
  CHECK_THROWS_AS(parse_image_config(R"({"config":{"Env":[1]}})", "c.json"), rt::Error);
}
