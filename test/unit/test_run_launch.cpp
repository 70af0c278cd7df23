#include <algorithm>

#include <catch2/catch.hpp>

#include "rt/error.hpp"
#include "run/image.hpp"
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

TEST_CASE("rt run of an Apptainer image runs its runscript when there is no ENTRYPOINT or CMD") {
  ApptainerFiles a;
  a.runscript = true;
  CHECK(command_for(ExecMode::Run, {"x", "y z"}, nullptr, "i", "", a) == V{"/.singularity.d/runscript", "x", "y z"});
  ImageConfig empty;
  CHECK(command_for(ExecMode::Run, {}, &empty, "i", "", a) == V{"/.singularity.d/runscript"});
  ImageConfig c;
  c.cmd = {"default"};
  CHECK(command_for(ExecMode::Run, {}, &c, "i", "", a) == V{"default"});  // the image's own CMD wins
  CHECK(command_for(ExecMode::Exec, {"prog"}, nullptr, "i", "", a) == V{"prog"});
}

TEST_CASE("Apptainer's environment scripts run before the program, whose arguments pass as they are") {
  V argv = after_apptainer_env({"prog", "a b", "$(x);"});
  REQUIRE(argv.size() == 7);
  CHECK(argv[0] == "/bin/sh");
  CHECK(argv[1] == "-c");
  CHECK(argv[2].find("/.singularity.d/env/*.sh") != std::string::npos);
  CHECK(argv[2].ends_with("exec \"$@\""));
  CHECK(V(argv.begin() + 4, argv.end()) == V{"prog", "a b", "$(x);"});
}

TEST_CASE("without /bin/sh, an environment script's plain exports apply") {
  int skipped = -1;
  const V kv = plain_exports(
      "#!/bin/sh\n# a comment\nexport A=1\nexport B=\"two words\"\nexport C='$literal'\n"
      "export D=\"$HOME/x\"\nexport E=$(id)\nF=3\nif true; then export G=1; fi\nexport 9X=1\nexport H=\n",
      &skipped);
  CHECK(kv == V{"A=1", "B=two words", "C=$literal", "H="});
  CHECK(skipped == 5);  // two expansions, a plain assignment, a compound line, a bad name
}

namespace {

// A tree of paths, as apptainer_files reads one.
struct FakeTree {
  std::vector<std::string> paths;
  bool has(const std::string& p) const { return std::find(paths.begin(), paths.end(), p) != paths.end(); }
  std::vector<std::string> list(const std::string& dir) const {
    std::vector<std::string> out;
    for (const auto& p : paths)
      if (p.starts_with(dir + "/")) out.push_back(p.substr(dir.size() + 1));
    return out;
  }
};

}  // namespace

TEST_CASE("Apptainer's files are found; those rt made from the config are left to it") {
  FakeTree apptainer{{"/.singularity.d", "/.singularity.d/env/90-environment.sh", "/.singularity.d/runscript"}};
  ApptainerFiles a = apptainer_files(apptainer);
  CHECK(a.env_scripts);
  CHECK(a.runscript);
  CHECK_FALSE(a.startscript);
  // rt convert IMAGE FILE.sif: its environment script and runscript say
  // what the config says, which rt reads itself.
  FakeTree rt_made{
      {"/.singularity.d", std::string("/.singularity.d/env/") + kRtEnvScript, "/.singularity.d/runscript"}};
  a = apptainer_files(rt_made);
  CHECK_FALSE(a.env_scripts);
  CHECK_FALSE(a.runscript);
  FakeTree plain{{"/etc/passwd"}};
  CHECK_FALSE(apptainer_files(plain).env_scripts);
}
