// store/store: images committed whole, blobs pruned, debris of killed runs
// cleared, and nothing removed but the store's own names.
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "app/store.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "temp_dir.hpp"
#include "util/fs.hpp"

namespace fs = std::filesystem;
using rt::app::Store;
using rt::app::WorkDir;

namespace {

struct TempStore : TempDir {
  std::string root() const { return path + "/store"; }
};

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// An image `name` whose rt-image.json names `blob`.
void commit(Store& s, const std::string& name, const std::string& blob) {
  WorkDir w(s.tmp_dir(), "image");
  fs::create_directory(w.path() + "/rootfs");
  write_text(w.path() + "/rt-image.json", R"({"layers":["sha256:)" + blob + R"("]})");
  s.commit_image(name, w);
}

const std::string kA(64, 'a'), kB(64, 'b');

}  // namespace

TEST_CASE("store: commit makes an image visible whole, and a second commit replaces it") {
  TempStore t;
  Store s(t.root());
  CHECK(fs::is_directory(t.root() + "/blobs/sha256"));
  commit(s, "x", kA);
  auto info = s.info("x");
  REQUIRE(info);
  CHECK(info->dir == s.root() + "/images/x");
  write_text(info->dir + "/marker", "old");
  commit(s, "x", kB);  // RENAME_EXCHANGE: the old one goes with the work directory
  CHECK_FALSE(fs::exists(s.info("x")->dir + "/marker"));
  CHECK(fs::is_empty(s.tmp_dir()));
  CHECK(s.list().size() == 1);
}

TEST_CASE("store: prune removes blobs no image names, and only blob names") {
  TempStore t;
  Store s(t.root());
  commit(s, "x", kA);
  const std::string blobs = s.root() + "/blobs/sha256/";
  write_text(blobs + kA, "used");
  write_text(blobs + kB, "unused");
  write_text(blobs + "NOTES", "not a blob");
  CHECK(s.prune() == 6);
  CHECK(fs::exists(blobs + kA));
  CHECK_FALSE(fs::exists(blobs + kB));
  CHECK(fs::exists(blobs + "NOTES"));
  s.remove("x");
  CHECK_FALSE(s.info("x"));
  CHECK_THROWS_WITH(s.remove("x"), Catch::Contains("no image `x` in store"));
  CHECK(s.prune() == 4);
  CHECK_FALSE(fs::exists(blobs + kA));
}

TEST_CASE("store: debris of a killed run is cleared, work in progress and foreign names are not") {
  TempStore t;
  std::string live_path;
  {
    Store s(t.root());
    WorkDir live(s.tmp_dir(), "image");
    live_path = live.path();
    // A killed run: its work directory and lock, nobody holding the lock.
    const std::string dead = s.tmp_dir() + "/blob.0123456789abcdef";
    fs::create_directories(dead + ".d/sub");
    write_text(dead + ".lock", "");
    write_text(s.tmp_dir() + "/notes.lock", "");  // not of the store's form
    Store again(t.root());                   // a later store user
    CHECK_FALSE(fs::exists(dead + ".d"));
    CHECK_FALSE(fs::exists(dead + ".lock"));
    CHECK(fs::exists(live_path));  // its lock is held
    CHECK(fs::exists(s.tmp_dir() + "/notes.lock"));
  }
  CHECK_FALSE(fs::exists(live_path));  // WorkDir removes itself
}

TEST_CASE("store: debris that cannot be cleared does not stop the store") {
  TempStore t;
  {
    Store s(t.root());
    fs::create_directories(s.tmp_dir() + "/blob.0123456789abcdef.d");
    write_text(s.tmp_dir() + "/blob.0123456789abcdef.lock", "");
    REQUIRE(::chmod(s.tmp_dir().c_str(), 0500) == 0);  // cannot remove inside
  }
  if (::geteuid() != 0) CHECK_NOTHROW(Store(t.root()));  // root ignores the mode
  ::chmod((t.root() + "/tmp").c_str(), 0700);
}

TEST_CASE("store: commands that only read or remove do not make a missing store") {
  TempStore t;
  rt::StoreOptions o;
  o.storage = t.root();
  o.verbosity = -1;
  CHECK(rt::list_images(o).empty());
  CHECK_THROWS_WITH(rt::inspect_image("x", o), Catch::Contains("no image `x` in store"));
  CHECK_THROWS_WITH(rt::remove_image("x", o), Catch::Contains("no image `x` in store"));
  CHECK(rt::prune_store(o).freed() == 0);
  CHECK_FALSE(fs::exists(t.root()));
  CHECK_FALSE(Store::existing(t.root()).has_value());
  Store made(t.root());  // a writer makes it
  CHECK(Store::existing(t.root()).has_value());
}
