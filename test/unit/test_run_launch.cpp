#include <catch2/catch.hpp>

#include "rt/error.hpp"
#include "run/launch.hpp"

using namespace rt::run;
using rt::ExecMode;
using V = std::vector<std::string>;

TEST_CASE("rt run follows Docker's ENTRYPOINT/CMD rules") {
  ImageConfig c;
  c.entrypoint = {"/ep", "-x"};
  c.cmd = {"default"};
  CHECK(command_for(ExecMode::Run, {}, &c, "i", "") == V{"/ep", "-x", "default"});
  CHECK(command_for(ExecMode::Run, {"mine"}, &c, "i", "") == V{"/ep", "-x", "mine"});
  c.entrypoint.clear();
  CHECK(command_for(ExecMode::Run, {}, &c, "i", "") == V{"default"});
  CHECK(command_for(ExecMode::Run, {"ls", "-l"}, &c, "i", "") == V{"ls", "-l"});
}

TEST_CASE("nothing to run is an error") {
  ImageConfig empty;
  CHECK_THROWS_AS(command_for(ExecMode::Run, {}, &empty, "i", ""), rt::Error);
  CHECK_THROWS_AS(command_for(ExecMode::Run, {}, nullptr, "i", ""), rt::Error);
  CHECK_THROWS_AS(command_for(ExecMode::Exec, {}, nullptr, "i", ""), rt::Error);
}

TEST_CASE("rt shell runs the given shell or else bin sh") {
  CHECK(command_for(ExecMode::Shell, {}, nullptr, "i", "/bin/bash") == V{"/bin/bash"});
  CHECK(command_for(ExecMode::Shell, {}, nullptr, "i", "") == V{"/bin/sh"});
}
