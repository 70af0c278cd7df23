#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "util/fs.hpp"
#include "util/inroot.hpp"

namespace fs = std::filesystem;
using namespace rt::util;

namespace {

// A root with links that try to leave it, and a file outside it.
struct Tree {
  fs::path base;
  fs::path root;
  Tree() {
    char tmpl[] = "/tmp/rt-inroot-XXXXXX";
    base = ::mkdtemp(tmpl);
    root = base / "root";
    fs::create_directories(root / "usr/lib");
    std::ofstream(root / "usr/lib/libx.so") << "inside";
    std::ofstream(base / "secret") << "outside";
    fs::create_symlink("usr/lib", root / "lib");
    fs::create_symlink("/usr/lib", root / "abslib");
    fs::create_symlink("../../secret", root / "up");
    fs::create_symlink("/../secret", root / "absup");
    fs::create_symlink("loop", root / "loop");
    fs::create_symlink("../../../..", root / "usr/lib/dotdot");
  }
  ~Tree() { fs::remove_all(base); }
};

std::string read_at(const InRootResult& r) {
  REQUIRE(r.fd);
  UniqueFd fd(::open(fd_path(r.fd.get()).c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  return read_fd(fd.get(), "x");
}

}  // namespace

TEST_CASE("in-root resolution keeps every path inside the root") {
  Tree t;
  UniqueFd root(::open(t.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(root);
  for (bool walk : {false, true}) {
    INFO("fallback walk: " << walk);
    auto open = [&](const char* p, int flags = O_PATH, bool follow = true) {
      return walk ? open_in_root_walk(root.get(), p, flags, follow) : open_in_root(root.get(), p, flags, follow);
    };
    CHECK(read_at(open("/lib/libx.so")) == "inside");
    CHECK(read_at(open("abslib/libx.so")) == "inside");
    // "../../secret" from the root stays at the root: there is no secret there.
    CHECK(open("up").err == ENOENT);
    CHECK(open("absup").err == ENOENT);
    CHECK(open("/../../secret").err == ENOENT);
    CHECK(read_at(open("usr/lib/dotdot/usr/lib/libx.so")) == "inside");
    CHECK(open("loop").err == ELOOP);
    CHECK(open("usr/lib/libx.so/x").err == ENOTDIR);
    // Not following the final link opens the link itself.
    auto link = open("up", O_PATH, false);
    REQUIRE(link.fd);
    struct stat st;
    REQUIRE(::fstatat(link.fd.get(), "", &st, AT_EMPTY_PATH) == 0);
    CHECK(S_ISLNK(st.st_mode));
  }
}

TEST_CASE("in-root resolution never follows a /proc magic link") {
  UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(root);
  UniqueFd held(::open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(held);
  const std::string fd_link = "/proc/self/fd/" + std::to_string(held.get());
  for (bool walk : {false, true}) {
    INFO("fallback walk: " << walk);
    auto open = [&](const std::string& p) {
      return walk ? open_in_root_walk(root.get(), p, O_PATH, true) : open_in_root(root.get(), p, O_PATH, true);
    };
    CHECK(open(fd_link).err == ELOOP);
    CHECK(open(fd_link + "/..").err == ELOOP);
    CHECK(open("/proc/self/cwd").err == ELOOP);
    CHECK(open("/proc/thread-self/root").err == ELOOP);
    // /proc/self itself is a plain link, to this process (its text is
    // longer than the size /proc gives it: 0).
    CHECK(read_at(open("/proc/self/stat")).starts_with(std::to_string(::getpid()) + " ("));
  }
}
