// hpc/inject: the injection planner against the host's real Open MPI (a
// test package) and a made-up image.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "hpc/elf_cache.hpp"
#include "hpc/inject.hpp"
#include "hpc/ldcache.hpp"
#include "hpc/plan_cache.hpp"
#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"
#include "temp_dir.hpp"

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
  // A directory's stamp changes with its names, as its modification time does.
  std::string stamp(const std::string& path) const override {
    if (auto d = dirs.find(path); d != dirs.end()) return "dir:" + rt::util::join(d->second, ',');
    return files.count(path) ? "stamp:" + path : "";
  }

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

namespace {

// A host library written in C++ (yaml-cpp: libstdc++ and libgcc_s), injected
// with --ib into `image`.
Injection plan_cxx(const FakeImage& image) {
  SiteConfig conf;
  conf.values["ib.libraries"] = {"/usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.7"};
  conf.values["ib.paths"] = {};
  InjectRequest req;
  req.ib = req.ib_required = true;
  ElfCache memory(-1, "");
  return plan_injection(req, conf, image, &memory);
}

bool injects(const Injection& inj, const std::string& soname) {
  for (const auto& f : inj.files)
    if (f.container == std::string(kLibDir) + "/" + soname) return true;
  return false;
}

bool noted(const Injection& inj, const std::string& text) {
  for (const auto& n : inj.notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("injection: a dependency comes from the image when its copy defines the versions needed") {
  const std::string yaml = "/usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.7";
  REQUIRE(rt::util::path_exists(yaml));  // libyaml-cpp-dev: a build dependency
  auto host = read_ld_cache("/etc/ld.so.cache");
  FakeImage image;
  image.files[kHostLibc] = kHostLibc;
  image.files["/usr/lib/x86_64-linux-gnu/libstdc++.so.6"] = host.at("libstdc++.so.6");  // as new as the host's
  Injection inj = plan_cxx(image);
  CHECK(injects(inj, "libyaml-cpp.so.0.7"));  // what was asked for: always the host's
  CHECK_FALSE(injects(inj, "libstdc++.so.6"));
  CHECK(noted(inj, "`libstdc++.so.6` from the image (/usr/lib/x86_64-linux-gnu/libstdc++.so.6): it has what `" + yaml));
  CHECK(injects(inj, "libgcc_s.so.1"));  // the image has none
  CHECK(noted(inj, "`libgcc_s.so.1` from the host (" + host.at("libgcc_s.so.1") + "): the image has none"));

  // A copy that lacks a version the library needs (here: one defining
  // only GLIBC_ versions) does not do: the host's comes in, and -v says why.
  image.files["/usr/lib/x86_64-linux-gnu/libstdc++.so.6"] = kHostLibc;
  inj = plan_cxx(image);
  CHECK(injects(inj, "libstdc++.so.6"));
  CHECK(noted(inj, "the image's /usr/lib/x86_64-linux-gnu/libstdc++.so.6 lacks GLIBCXX_"));
}

TEST_CASE("injection: the InfiniBand stack is automatic only with a verbs device") {
  TempDir tmp;
  SiteConfig conf;
  conf.values["ib.devices"] = {tmp.path + "/infiniband/uverbs*", tmp.path + "/class/*"};
  CHECK(verbs_devices(conf).empty());  // neither directory exists
  std::filesystem::create_directory(tmp.path + "/infiniband");
  std::ofstream(tmp.path + "/infiniband/rdma_cm").put('\n');
  CHECK(verbs_devices(conf).empty());  // rdma_cm alone is no verbs device
  std::ofstream(tmp.path + "/infiniband/uverbs0").put('\n');
  CHECK(verbs_devices(conf) == std::vector<std::string>{tmp.path + "/infiniband/uverbs0"});
  conf.values["ib.devices"] = {};
  CHECK(verbs_devices(conf).empty());  // a site may turn detection off
}

TEST_CASE("injection: a host MPI brings its own libraries even where the image has copies") {
  auto cache = read_ld_cache("/etc/ld.so.cache");
  REQUIRE(cache.count("libmpi.so.40"));
  REQUIRE(cache.count("libopen-pal.so.40"));
  FakeImage image;
  image.dirs[kImageLibs] = {"libmpi.so.40", "libc.so.6"};
  image.files[kHostLibc] = kHostLibc;
  // The image's Open MPI, with the very versions the host's needs.
  image.files["/usr/lib/x86_64-linux-gnu/libopen-pal.so.40"] = cache["libopen-pal.so.40"];
  Injection inj = plan(image, "openmpi");
  CHECK(injects(inj, "libopen-pal.so.40"));
  CHECK_FALSE(noted(inj, "`libopen-pal.so.40` from the image"));
}

TEST_CASE("injection: a host library is an input by the directories that lead to it") {
  TempDir tmp;
  const std::string a = tmp.path + "/a", b = tmp.path + "/b";
  std::filesystem::create_directory(a);
  std::filesystem::create_directory(b);
  std::ofstream(b + "/libx.so.1.2") << "one";
  std::filesystem::create_symlink("../b/libx.so.1.2", a + "/libx.so.1");
  std::map<std::string, std::string> in;
  record_directories(a + "/libx.so.1", in);
  CHECK(in == std::map<std::string, std::string>{{a, host_stamp(a)}, {b, host_stamp(b)}});
  // A new version renamed into place, as package managers install one:
  // the directory that holds it changes.
  std::ofstream(b + "/libx.so.1.2.new") << "two";
  std::filesystem::rename(b + "/libx.so.1.2.new", b + "/libx.so.1.2");
  CHECK(host_stamp(b) != in.at(b));
  // The link made to lead elsewhere: its directory changes.
  std::filesystem::remove(a + "/libx.so.1");
  std::filesystem::create_symlink("../b/libx.so.1.3", a + "/libx.so.1");
  CHECK(host_stamp(a) != in.at(a));
  // A ".." in a link leads up from where its directory really is.
  std::filesystem::create_directories(tmp.path + "/real/sub");
  std::filesystem::create_directory_symlink("real/sub", tmp.path + "/sub");
  std::filesystem::create_symlink("../../b/libx.so.1.2", tmp.path + "/real/sub/libx.so.1");
  std::map<std::string, std::string> up;
  record_directories(tmp.path + "/sub/libx.so.1", up);
  CHECK(up.count(b));
  // A directory on the way made to lead elsewhere: its identity follows it.
  std::map<std::string, std::string> via;
  std::filesystem::create_directory_symlink("a", tmp.path + "/cur");
  record_directories(tmp.path + "/cur/libx.so.1", via);
  std::filesystem::remove(tmp.path + "/cur");
  std::filesystem::create_directory_symlink("b", tmp.path + "/cur");
  CHECK(host_stamp(tmp.path + "/cur") != via.at(tmp.path + "/cur"));
}

TEST_CASE("injection: a plan is kept while every file it was made from stays as it was") {
  auto cache = read_ld_cache("/etc/ld.so.cache");
  REQUIRE(cache.count("libmpi.so.40"));
  TempDir tmp;
  rt::util::UniqueFd dir = rt::util::open_fd(tmp.path, O_PATH | O_DIRECTORY);
  FakeImage image;
  image.dirs[kImageLibs] = {"libmpi.so.40", "libc.so.6"};
  image.files[kHostLibc] = kHostLibc;
  InjectRequest req;
  req.mpi = "openmpi";
  ElfCache memory(-1, "");
  PlanInputs inputs;
  const Injection inj = plan_injection(req, SiteConfig{}, image, &memory, &inputs);
  // What it was made from: the directory of the host's libmpi (not the
  // library: record_directories) and the image's libc, among others.
  const std::string mpi_dir = cache["libmpi.so.40"].substr(0, cache["libmpi.so.40"].rfind('/'));
  CHECK(inputs.host.at(mpi_dir) == host_stamp(mpi_dir));
  CHECK_FALSE(inputs.host.count(cache["libmpi.so.40"]));
  CHECK(inputs.image.at(kHostLibc) == "stamp:" + std::string(kHostLibc));
  // An image directory is an input; the names it lacks are not, one by one
  // (each would cost a lookup in the image at every start).
  CHECK(inputs.image.at(kImageLibs) == "dir:libmpi.so.40,libc.so.6");
  for (const auto& [path, stamp] : inputs.image) {
    INFO(path);
    const std::string name = path.substr(path.rfind('/') + 1);
    if (stamp == "-") CHECK_FALSE((name.starts_with("lib") && name.find(".so") != std::string::npos));
  }

  const PlanCache plans(dir.get(), "plan-cache");
  const std::string key = plan_key(req, SiteConfig{}, image);
  CHECK_FALSE(plans.find(key, image));  // nothing kept yet
  plans.store(key, inputs, inj);
  auto kept = plans.find(key, image);
  REQUIRE(kept);
  CHECK(kept->files == inj.files);
  CHECK(kept->dirs == inj.dirs);
  CHECK(kept->notes == inj.notes);
  CHECK(kept->lib_path == inj.lib_path);
  CHECK(kept->gpu == inj.gpu);

  // An image file it read has gone: planned again; back: kept again.
  image.files.erase(kHostLibc);
  CHECK_FALSE(plans.find(key, image));
  image.files[kHostLibc] = kHostLibc;
  CHECK(plans.find(key, image));
  // A host file that was absent appears: planned again.
  const std::string later = tmp.path + "/later.so";
  inputs.host[later] = host_stamp(later);
  CHECK(inputs.host[later] == "-");
  plans.store(key, inputs, inj);
  CHECK(plans.find(key, image));
  std::ofstream(later) << "x";
  CHECK_FALSE(plans.find(key, image));
  inputs.host.erase(later);
  plans.store(key, inputs, inj);
  // A library the image lacked comes into a directory it looked in: planned again.
  image.dirs[kImageLibs].push_back("libopen-pal.so.40");
  CHECK_FALSE(plans.find(key, image));
  image.dirs[kImageLibs].pop_back();
  REQUIRE(plans.find(key, image));

  // Another request has another key; CDI devices are never kept.
  InjectRequest other = req;
  other.mpi = "mpich";
  CHECK(plan_key(other, SiteConfig{}, image) != key);
  SiteConfig conf;
  conf.values["ld_cache"] = {"/nonexistent"};
  CHECK(plan_key(req, conf, image) != key);
  other.devices = {"example.com/gpu=0"};
  CHECK(plan_key(other, SiteConfig{}, image).empty());

  // The newest 32 plans are kept, the oldest go; a damaged file is no plan.
  const struct timespec old_times[2] = {{1, 0}, {1, 0}};
  REQUIRE(::utimensat(dir.get(), ("plan-cache/" + key).c_str(), old_times, 0) == 0);
  std::vector<std::string> keys;
  for (int i = 0; i < 32; ++i) keys.push_back(rt::util::hash_hex(std::to_string(i)));
  for (const auto& k : keys) plans.store(k, inputs, inj);
  CHECK_FALSE(plans.find(key, image));
  CHECK(plans.find(keys.front(), image));
  CHECK(plans.find(keys.back(), image));
  std::ofstream(tmp.path + "/plan-cache/" + keys.back()) << "rt-plan-cache 2\nZ\tnonsense\n.\n";
  CHECK_FALSE(plans.find(keys.back(), image));
}
