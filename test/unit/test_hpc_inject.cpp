// hpc/inject: the injection planner against the host's real Open MPI (a
// test package) and a made-up image.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "hpc/elf_cache.hpp"
#include "hpc/inject.hpp"
#include "hpc/ldcache.hpp"
#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

using namespace rt::hpc;

namespace {

// An image of a few names; its files are read from host files.
class FakeImage : public ImageView {
public:
  std::map<std::string, std::vector<std::string>> dirs;  // directory -> names
  std::map<std::string, std::string> files;              // path inside -> host file
  const std::string& name() const override { return name_; }
  std::optional<std::string> read(const std::string& path, size_t limit) const override {
    auto it = files.find(path);
    return it == files.end() ? std::nullopt : rt::util::read_file_if_exists(it->second, limit);
  }
  std::vector<std::string> list(const std::string& dir) const override {
    auto it = dirs.find(dir);
    return it == dirs.end() ? std::vector<std::string>{} : it->second;
  }
  std::string stamp(const std::string& path) const override { return files.count(path) ? "stamp:" + path : ""; }

private:
  std::string name_ = "fake";
};

constexpr const char* kImageLibs = "/usr/lib/x86_64-linux-gnu";
const std::string kHostLibc = "/lib/x86_64-linux-gnu/libc.so.6";

Injection plan(const FakeImage& image, const std::string& mpi) {
  InjectRequest req;
  req.mpi = mpi;
  ElfCache memory(-1, "");
  return plan_injection(req, SiteConfig{}, image, &memory);
}

std::string refusal(const FakeImage& image, const std::string& mpi) {
  try {
    plan(image, mpi);
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("injection: the host's Open MPI goes into an Open MPI image, with its closure and plugins") {
  auto cache = read_ld_cache("/etc/ld.so.cache");
  REQUIRE(cache.count("libmpi.so.40"));  // openmpi-bin / libopenmpi-dev: a test package
  FakeImage image;
  image.dirs[kImageLibs] = {"libmpi.so.40", "libc.so.6"};
  image.files[kHostLibc] = kHostLibc;  // the image's glibc is the host's
  Injection inj = plan(image, "auto");
  bool mpi = false, closure = false;
  for (const auto& f : inj.files) {
    mpi |= f.container == "/run/rt-host/lib/libmpi.so.40" && f.host == cache["libmpi.so.40"];
    closure |= f.container.starts_with("/run/rt-host/lib/libopen-pal.so");  // libmpi's own DT_NEEDED
  }
  CHECK(mpi);
  CHECK(closure);
  for (const auto& f : inj.files) CHECK(f.container.find("/libc.so") == std::string::npos);  // never glibc's own
  CHECK(inj.lib_path == std::vector<std::string>{"/run/rt-host/lib"});
  bool note = false;
  for (const auto& n : inj.notes) note |= n == "host MPI: " + cache["libmpi.so.40"] + " (openmpi ABI)";
  CHECK(note);
  const std::string plugins = rt::util::dir_name(cache["libmpi.so.40"]) + "/openmpi";
  if (rt::util::is_directory(plugins)) {
    bool bound = false;
    for (const auto& d : inj.dirs) bound |= d == plugins;
    CHECK(bound);
  }
}

TEST_CASE("injection: an image of the other MPI ABI, or without glibc, is refused with the names") {
  REQUIRE(read_ld_cache("/etc/ld.so.cache").count("libmpi.so.40"));
  FakeImage mpich;
  mpich.dirs[kImageLibs] = {"libmpi.so.12"};
  mpich.files[kHostLibc] = kHostLibc;
  CHECK(refusal(mpich, "openmpi").find("image `fake` has an MPICH-ABI MPI (/usr/lib/x86_64-linux-gnu/libmpi.so.12)") ==
        0);
  FakeImage musl;  // no libc.so.6 anywhere
  CHECK(refusal(musl, "openmpi").find("image `fake` has no glibc (libc.so.6)") == 0);
  FakeImage odd;  // a libc.so.6 that defines no GLIBC_x.y version (here: libz)
  odd.files[kHostLibc] = read_ld_cache("/etc/ld.so.cache").at("libz.so.1");
  CHECK(refusal(odd, "openmpi").find("defines no GLIBC_x.y version") != std::string::npos);
  CHECK(refusal(mpich, "lam").find("--mpi: unknown MPI `lam`") == 0);
}
