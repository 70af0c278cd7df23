// hpc/pyxis: the Slurm plugin's options as rt exec's.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "hpc/pyxis.hpp"
#include "rt/error.hpp"

using namespace rt::hpc;

namespace {

std::optional<std::string> env(const std::string& name) {
  if (name == "FOO") return "host value";
  return std::nullopt;
}

PyxisTask task(const std::string& lines) { return translate_pyxis(parse_pyxis_lines(lines), env); }

std::string refusal(const std::string& lines) {
  try {
    task(lines);
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("pyxis: enroot's image forms become rt's references, paths stay") {
  CHECK(pyxis_image("nvcr.io#nvidia/pytorch:24.01-py3") == "nvcr.io/nvidia/pytorch:24.01-py3");
  CHECK(pyxis_image("docker://ubuntu:22.04") == "ubuntu:22.04");
  CHECK(pyxis_image("/scratch/app.sqfs") == "/scratch/app.sqfs");
  CHECK(pyxis_image("ubuntu@sha256:0123") == "ubuntu@sha256:0123");
  CHECK_THROWS_WITH(pyxis_image("me@nvcr.io#nvidia/x"), Catch::Contains("a user name in the image"));
  CHECK_THROWS_WITH(pyxis_image("a#b#c"), Catch::Contains("more than one `#`"));
}

TEST_CASE("pyxis: mounts and their flags") {
  CHECK(pyxis_mount("/data") == "/data:/data");
  CHECK(pyxis_mount("/data:/in") == "/data:/in");
  CHECK(pyxis_mount("/data:/in:ro+rprivate") == "/data:/in:ro");
  CHECK(pyxis_mount("/data:/in:rw+nosuid") == "/data:/in");
  CHECK_THROWS_WITH(pyxis_mount("/data:/in:noexec"), Catch::Contains("cannot honour the flag `noexec`"));
  CHECK_THROWS_WITH(pyxis_mount("/data:in"), Catch::Contains("absolute path"));
  CHECK_THROWS_WITH(pyxis_mount("/a:/b:ro:x"), Catch::Contains("not SRC[:DST[:FLAGS]]"));
}

TEST_CASE("pyxis: every option as rt exec's") {
  PyxisTask t = task(
      "image=nvcr.io#nvidia/x:1\nmounts=/site\nmounts=/data:/data:ro\nworkdir=/work\nenv=FOO,BAR\nmount_home=0\n"
      "writable=1\nremap_root=1\nentrypoint=1\nstorage=/local/rt\n");
  CHECK(t.image == "nvcr.io/nvidia/x:1");
  CHECK(t.run);
  CHECK(t.options == std::vector<std::string>{"--root", "--no-home", "--write-tmpfs", "--bind", "/site:/site", "--bind",
                                              "/data:/data:ro", "--cd", "/work", "--env", "FOO=host value",
                                              "--storage", "/local/rt/" + std::to_string(::getuid())});
  CHECK(task("image=/a.sqfs\n").options.empty());  // rt's defaults: read-only, home bound, own uid
}

TEST_CASE("pyxis: named containers, save, and what is refused") {
  PyxisTask t = task("name=work:exec\n");
  CHECK(t.name == "work");
  CHECK(t.name_mode == "exec");
  CHECK(t.image.empty());
  CHECK(task("image=/a.sqfs\nname=work\nwritable=0\n").readonly);
  CHECK(task("image=/a.sqfs\nname=work\nwritable=1\n").options.empty());  // a named container is a writable copy
  CHECK(task("image=/a.sqfs\nsave=/s.sqfs\nwritable=1\n").options.empty());  // so is one to save
  CHECK(task("image=/a.sqfs\nsave=/out/x.sqfs\n").save == "/out/x.sqfs");
  CHECK(refusal("name=work:later\n").find("unknown mode `later`") != std::string::npos);
  CHECK(refusal("name=../x\n").find("a name is letters") != std::string::npos);
  CHECK(refusal("name=work:create\n").find("needs --container-image") != std::string::npos);
  CHECK(refusal("workdir=/w\n").find("--container-image or --container-name is needed") != std::string::npos);
  CHECK(refusal("image=/a.sqfs\nsave=x.sqfs\n").find("absolute path") != std::string::npos);
  CHECK(refusal("image=/a.sqfs\nshm=1\n").find("this rt does not know") != std::string::npos);
}
