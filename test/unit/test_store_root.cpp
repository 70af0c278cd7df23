// store/root: the store is trusted only when nobody else can change it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "rt/error.hpp"
#include "store/root.hpp"
#include "temp_dir.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

using rt::store::distrust;
using rt::store::distrust_parent;
using rt::store::Root;
namespace fs = std::filesystem;

namespace {

struct stat st_of(mode_t mode, uid_t uid) {
  struct stat st {};
  st.st_mode = mode;
  st.st_uid = uid;
  return st;
}

std::string refusal(const std::string& path, bool create = false) {
  try {
    Root::open(path, create);
  } catch (const rt::Error& e) {
    return e.what() + std::string(" | ") + e.hint();
  }
  return "";
}

}  // namespace

TEST_CASE("a store directory is trusted only as the caller's own, written by nobody else") {
  const uid_t me = 1000;
  CHECK(distrust(st_of(S_IFDIR | 0700, me), me).empty());
  CHECK(distrust(st_of(S_IFDIR | 0755, me), me).empty());
  CHECK(distrust(st_of(S_IFDIR | 0777, me), me) == "is writable by other users (mode 0777)");
  CHECK(distrust(st_of(S_IFDIR | 0770, me), me) == "is writable by other users (mode 0770)");
  CHECK(distrust(st_of(S_IFDIR | 0700, 1002), me) == "is owned by uid 1002 (mode 0700), not by you (uid 1000)");
  CHECK(distrust(st_of(S_IFLNK | 0777, 1002), me) == "is a symbolic link (owner uid 1002)");
  CHECK(distrust(st_of(S_IFREG | 0644, 1002), me) == "is not a directory (owner uid 1002, mode 0644)");
}

TEST_CASE("the directories above a store may be changed by root and the caller only") {
  const uid_t me = 1000;
  auto mine = st_of(S_IFDIR | 0700, me), roots = st_of(S_IFDIR | 0755, 0), theirs = st_of(S_IFDIR | 0700, 1002);
  CHECK(distrust_parent(st_of(S_IFDIR | 0755, 0), mine, me).empty());
  CHECK(distrust_parent(st_of(S_IFDIR | 0700, me), mine, me).empty());
  CHECK(distrust_parent(st_of(S_IFDIR | 01777, 0), mine, me).empty());  // /tmp, /var/tmp
  CHECK(distrust_parent(st_of(S_IFDIR | 01777, 0), roots, me).empty());
  CHECK_FALSE(distrust_parent(st_of(S_IFDIR | 01777, 0), theirs, me).empty());  // its owner may rename it
  CHECK(distrust_parent(st_of(S_IFDIR | 0777, 0), mine, me) ==
        "a directory other users can write (owner uid 0, mode 0777)");
  CHECK(distrust_parent(st_of(S_IFDIR | 0775, me), mine, me) ==
        "a directory other users can write (owner you, mode 0775)");
  CHECK(distrust_parent(st_of(S_IFDIR | 0755, 1002), mine, me) ==
        "a directory of another user (owner uid 1002, mode 0755)");
}

TEST_CASE("Root::open makes a missing store 0700 and opens an existing one") {
  TempDir t;
  const std::string store = t.path + "/store";
  CHECK_FALSE(Root::open(store, false).has_value());
  CHECK_FALSE(fs::exists(store));
  auto root = Root::open(store, true);
  REQUIRE(root);
  struct stat st;
  REQUIRE(::stat(store.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(root->path() == fs::canonical(store).string());
  CHECK(Root::open(store, false).has_value());
}

TEST_CASE("Root::open refuses a symlink, a file, a shared directory and a store in one") {
  TempDir t;
  const std::string real = t.path + "/real", link = t.path + "/link", file = t.path + "/file";
  REQUIRE(::mkdir(real.c_str(), 0700) == 0);
  REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  CHECK(refusal(link).find("store `" + link + "` is a symbolic link (owner you)") == 0);
  CHECK(refusal(link, true).find("is a symbolic link") != std::string::npos);
  rt::util::UniqueFd(::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  CHECK(refusal(file, true).find("store `" + file + "` is not a directory (owner you, mode 0600)") == 0);
  REQUIRE(::chmod(real.c_str(), 0777) == 0);
  std::string why = refusal(real);
  CHECK(why.find("is writable by other users (mode 0777)") != std::string::npos);
  CHECK(why.find("--storage") != std::string::npos);  // what to do
  CHECK(why.find("RT_STORAGE") != std::string::npos);
  // A store of one's own, in a directory others can write: they could
  // rename it away and put theirs in its place.
  REQUIRE(::mkdir((real + "/store").c_str(), 0700) == 0);
  CHECK(refusal(real + "/store").find("lies in `" + real + "`, a directory other users can write") !=
        std::string::npos);
  REQUIRE(::chmod(real.c_str(), 01777) == 0);  // sticky, as /tmp: fine
  CHECK(Root::open(real + "/store", false).has_value());
}

TEST_CASE("Root::dir opens the store's own directories, never through a symlink") {
  TempDir t;
  auto root = Root::open(t.path + "/store", true);
  REQUIRE(root);
  rt::util::UniqueFd blobs = root->dir("blobs/sha256", true);
  CHECK(blobs);
  CHECK(fs::is_directory(t.path + "/store/blobs/sha256"));
  CHECK_FALSE(root->dir("missing", false));
  REQUIRE(::mkdir((t.path + "/elsewhere").c_str(), 0700) == 0);
  REQUIRE(::symlink((t.path + "/elsewhere").c_str(), (t.path + "/store/tmp").c_str()) == 0);
  CHECK_THROWS_WITH(root->dir("tmp", true),
                    Catch::Contains("store directory `" + root->path() + "/tmp` is a symbolic link"));
}

TEST_CASE("the store's secret is made once, private, and keys names nobody else can compute") {
  TempDir t;
  auto a = Root::open(t.path + "/store", true);
  REQUIRE(a);
  const std::string secret = a->secret();
  CHECK(secret.size() == 64);
  CHECK(rt::util::is_hex(secret));
  struct stat st;
  REQUIRE(::stat((t.path + "/store/secret").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(Root::open(t.path + "/store", false)->secret() == secret);  // kept
  auto b = Root::open(t.path + "/other", true);
  CHECK(b->secret() != secret);
  CHECK(rt::util::keyed_hash_hex(secret, "x") == rt::util::keyed_hash_hex(secret, "x"));
  CHECK(rt::util::keyed_hash_hex(secret, "x") != rt::util::keyed_hash_hex(b->secret(), "x"));
  CHECK(rt::util::keyed_hash_hex(secret, "x").size() == 32);
}

TEST_CASE("a planted secret that is not the caller's regular file is not used") {
  TempDir t;
  const std::string store = t.path + "/store", planted = t.path + "/planted";
  REQUIRE(::mkdir(store.c_str(), 0700) == 0);
  REQUIRE(std::system(("printf %064d 0 > " + planted).c_str()) == 0);
  REQUIRE(::symlink(planted.c_str(), (store + "/secret").c_str()) == 0);
  auto root = Root::open(store, false);
  // The link is not read; it is replaced by a secret of the store's own.
  CHECK(root->secret() != std::string(64, '0'));
  CHECK(rt::util::read_file_if_exists(planted) == std::optional<std::string>(std::string(64, '0')));
}

TEST_CASE("a store reached through a symlinked directory is checked, and named, by its real path") {
  TempDir t;
  const std::string real = t.path + "/real", via = t.path + "/via";
  REQUIRE(::mkdir(real.c_str(), 0700) == 0);
  REQUIRE(::symlink(real.c_str(), via.c_str()) == 0);
  auto root = Root::open(via + "/store", true);
  REQUIRE(root);
  CHECK(root->path() == fs::canonical(real).string() + "/store");
  REQUIRE(::chmod(real.c_str(), 0777) == 0);  // the real parent is what counts
  CHECK(refusal(via + "/store").find("lies in `" + fs::canonical(real).string() + "`") != std::string::npos);
}
