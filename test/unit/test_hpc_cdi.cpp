// hpc/cdi: CDI specs are read only as far as the devices asked for need,
// within bounds, and their errors name the file and the field.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "hpc/cdi.hpp"
#include "rt/error.hpp"
#include "temp_dir.hpp"

using rt::hpc::apply_cdi;
using rt::hpc::Injection;

namespace {

void spec(const TempDir& t, const std::string& name, const std::string& text) {
  std::ofstream(t.path + "/" + name) << text;
}

std::string refusal(const std::vector<std::string>& names, const TempDir& t) {
  Injection inj;
  try {
    apply_cdi(names, {t.path}, inj);
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "";
}

const char* kGood = R"(cdiVersion: 0.6.0
kind: example.com/gpu
containerEdits:
  env: [GPU_ALL=1]
devices:
  - name: "0"
    containerEdits:
      env: [GPU=0]
      mounts:
        - hostPath: /usr/lib/libfake.so.1
          containerPath: /usr/lib/gpu/libfake.so.1
)";

}  // namespace

TEST_CASE("a YAML spec's devices and edits are applied") {
  TempDir t;
  spec(t, "gpu.yaml", kGood);
  Injection inj;
  apply_cdi({"example.com/gpu=0"}, {t.path}, inj);
  CHECK(inj.env_set == std::vector<std::string>{"GPU_ALL=1", "GPU=0"});
  REQUIRE(inj.cdi_mounts.size() == 1);
  CHECK(inj.lib_path == std::vector<std::string>{"/usr/lib/gpu"});
  CHECK_THAT(refusal({"example.com/gpu=7"}, t), Catch::Contains("has no device `7`"));
  CHECK_THAT(refusal({"other.com/x=1"}, t), Catch::Contains("no CDI spec for `other.com/x`"));
}

TEST_CASE("YAML aliases cannot loop or explode") {
  TempDir t;
  spec(t, "loop.yaml", "kind: &a [*a]\n");
  // Nine levels of ten aliases each: 10^9 values once expanded.
  std::string laughs = "kind: example.com/gpu\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    std::string p = "*a" + std::to_string(i - 1);
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + p;
    for (int j = 1; j < 10; ++j) laughs += ", " + p;
    laughs += "]\n";
  }
  spec(t, "laughs.yaml", laughs);
  std::string msg = refusal({"example.com/gpu=all"}, t);
  CHECK_THAT(msg, Catch::Contains("laughs.yaml` expands to more than"));
  // loop.yaml is named too, whatever yaml-cpp makes of the alias.
  CHECK_THAT(msg, Catch::Contains("loop.yaml"));
}

TEST_CASE("only the specs needed are read; a broken one elsewhere does not matter") {
  TempDir t;
  spec(t, "a-gpu.yaml", kGood);
  spec(t, "b-broken.yaml", "kind: [unclosed\n");
  Injection inj;
  CHECK_NOTHROW(apply_cdi({"example.com/gpu=0"}, {t.path}, inj));
  CHECK_THAT(refusal({"example.com/nic=0"}, t), Catch::Contains("b-broken.yaml` is not valid YAML"));
}

TEST_CASE("a field of the wrong type is named, not nlohmann's text") {
  TempDir t;
  spec(t, "gpu.json", R"({"kind": "example.com/gpu", "devices": [{"name": 0}]})");
  std::string msg = refusal({"example.com/gpu=0"}, t);
  CHECK_THAT(msg, Catch::Contains("gpu.json` devices: field `name` is not a string"));
  CHECK_THAT(msg, !Catch::Contains("json.exception"));
  spec(t, "gpu.json", R"({"kind": "example.com/gpu", "containerEdits": {"env": "X=1"}, "devices": []})");
  CHECK_THAT(refusal({"example.com/gpu=all"}, t), Catch::Contains("field `env` is not a list"));
  spec(t, "gpu.json", R"({"kind": 7})");
  CHECK_THAT(refusal({"example.com/gpu=all"}, t), Catch::Contains("field `kind` is not a string"));
}
