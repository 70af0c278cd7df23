#include <catch2/catch.hpp>

#include <algorithm>

#include "rt/error.hpp"
#include "run/env.hpp"

using namespace rt::run;

namespace {
std::string get(const std::vector<std::string>& env, const std::string& k) {
  for (const auto& kv : env)
    if (kv.rfind(k + "=", 0) == 0) return kv.substr(k.size() + 1);
  return "<unset>";
}
}  // namespace

TEST_CASE("host environment passes and the image's Env applies on top") {
  EnvInputs in;
  in.host = {"PATH=/host/bin", "FOO=host", "KEEP=1"};
  in.image = {"PATH=/image/bin", "FOO=image", "NEW=x"};
  in.container = "img";
  auto env = compute_env(in);
  CHECK(get(env, "PATH") == "/image/bin");
  CHECK(get(env, "FOO") == "image");
  CHECK(get(env, "KEEP") == "1");
  CHECK(get(env, "NEW") == "x");
  CHECK(get(env, "RT_CONTAINER") == "img");
}

TEST_CASE("the image never overwrites launcher variables the host has") {
  EnvInputs in;
  in.host = {"SLURM_JOB_ID=7", "PMI_FD=5", "OMPI_COMM_WORLD_RANK=3", "PMIX_RANK=3", "UCX_TLS=sm"};
  in.image = {"SLURM_JOB_ID=1", "PMI_FD=9", "OMPI_COMM_WORLD_RANK=0", "PMIX_RANK=0", "UCX_TLS=tcp", "SLURM_OTHER=img"};
  auto env = compute_env(in);
  CHECK(get(env, "SLURM_JOB_ID") == "7");
  CHECK(get(env, "PMI_FD") == "5");
  CHECK(get(env, "OMPI_COMM_WORLD_RANK") == "3");
  CHECK(get(env, "PMIX_RANK") == "3");
  CHECK(get(env, "UCX_TLS") == "sm");
  CHECK(get(env, "SLURM_OTHER") == "img");  // not set by the launcher: the image may
}

TEST_CASE("unset-env then env-file then env apply in that order") {
  EnvInputs in;
  in.host = {"A_1=h", "A_2=h", "B=h"};
  in.unset = {"A_*"};
  in.files = {"B=file", "C=file"};
  in.set = {"C=cli", "A_1=back"};
  auto env = compute_env(in);
  CHECK(get(env, "A_1") == "back");
  CHECK(get(env, "A_2") == "<unset>");
  CHECK(get(env, "B") == "file");
  CHECK(get(env, "C") == "cli");
}

TEST_CASE("clean-env keeps only essentials and launcher variables") {
  EnvInputs in;
  in.host = {"HOME=/h", "SECRET=x", "SLURM_PROCID=2", "TERM=xterm", "PATH=/host"};
  in.clean = true;
  auto env = compute_env(in);
  CHECK(get(env, "SECRET") == "<unset>");
  CHECK(get(env, "HOME") == "/h");
  CHECK(get(env, "SLURM_PROCID") == "2");
  CHECK(get(env, "PATH") == kDefaultPath);
}

TEST_CASE("changes are reported for -v") {
  EnvInputs in;
  in.host = {"X=1"};
  in.set = {"X=2"};
  std::vector<std::string> changes;
  compute_env(in, &changes);
  CHECK(std::find(changes.begin(), changes.end(), "env --env: X=2 (was 1)") != changes.end());
}

TEST_CASE("malformed assignments are refused") {
  EnvInputs in;
  in.set = {"NOEQUALS"};
  CHECK_THROWS_AS(compute_env(in), rt::Error);
  in.set = {"=x"};
  CHECK_THROWS_AS(compute_env(in), rt::Error);
}

TEST_CASE("env files take comments blanks export and literal values and name the bad line") {
  auto v = parse_env_file("# c\n\nA=1\nexport B=two words\r\nC=\"q\"\n", "f");
  CHECK(v == std::vector<std::string>{"A=1", "B=two words", "C=\"q\""});
  try {
    parse_env_file("A=1\nbad line\n", "vars.env");
    FAIL("no error");
  } catch (const rt::Error& e) {
    CHECK(std::string(e.what()).find("`vars.env` line 2") != std::string::npos);
  }
}
