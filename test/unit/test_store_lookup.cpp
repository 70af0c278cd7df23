#include <pwd.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "rt/error.hpp"
#include "store/lookup.hpp"
#include "store/root.hpp"
#include "temp_dir.hpp"

using namespace rt::store;

TEST_CASE("image names map to safe directory names and back") {
  CHECK(escape_name("docker.io/library/ubuntu:24.04") == "docker.io+library+ubuntu:24.04");
  CHECK(unescape_name("docker.io+library+ubuntu:24.04") == "docker.io/library/ubuntu:24.04");
  CHECK_THROWS_AS(escape_name(".."), rt::Error);
  CHECK_THROWS_AS(escape_name("../x"), rt::Error);
  CHECK_THROWS_AS(escape_name("/abs"), rt::Error);
  CHECK_THROWS_AS(escape_name("a\nb"), rt::Error);
  CHECK_THROWS_AS(escape_name(""), rt::Error);
}

TEST_CASE("find_image accepts the name as stored or as a reference") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/rt-store-XXXXXX";
  fs::path root = ::mkdtemp(tmpl);
  fs::create_directories(root / "images" / "docker.io+library+ubuntu:latest");
  fs::create_directories(root / "images" / "mine");
  fs::create_directory_symlink(root / "images" / "mine", root / "images" / "linked");
  auto store = Root::open(root, false);
  REQUIRE(store);
  CHECK(find_image(*store, "mine").has_value());
  CHECK(find_image(*store, "ubuntu").has_value());
  CHECK(find_image(*store, "docker.io/library/ubuntu:latest").has_value());
  CHECK_FALSE(find_image(*store, "debian").has_value());
  CHECK_FALSE(find_image(*store, "../images/mine").has_value());
  CHECK_FALSE(find_image(*store, "linked").has_value());  // a symlink is no image
  fs::remove_all(root);
}

TEST_CASE("a name is a path only when it looks like one") {
  CHECK(name_kind("/srv/app.sqfs") == NameKind::Path);
  CHECK(name_kind("./app.sqfs") == NameKind::Path);
  CHECK(name_kind("../img") == NameKind::Path);
  CHECK(name_kind(".") == NameKind::Path);
  // Never paths: bare names, docker://, registry hosts.
  CHECK(name_kind("ubuntu:24.04") == NameKind::Reference);
  CHECK(name_kind("app.sqfs") == NameKind::Reference);
  CHECK(name_kind("docker://busybox") == NameKind::Reference);
  CHECK(name_kind("docker://lab/app") == NameKind::Reference);
  CHECK(name_kind("127.0.0.1:5443/busybox:latest") == NameKind::Reference);
  CHECK(name_kind("ghcr.io/org/app:1") == NameKind::Reference);
  CHECK(name_kind("localhost/app") == NameKind::Reference);
  // Either: the store's when it has it.
  CHECK(name_kind("library/ubuntu") == NameKind::Either);
  CHECK(name_kind("images/app.sqfs") == NameKind::Either);
  CHECK(without_scheme("docker://busybox") == "busybox");
  CHECK(without_scheme("busybox") == "busybox");
}

TEST_CASE("foreign_path names a place another user could change") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/rt-foreign-XXXXXX";
  fs::path dir = ::mkdtemp(tmpl);
  fs::create_directories(dir / "img");
  // The caller's own directory, 0700, in sticky /tmp: only root and they can change it.
  fs::permissions(dir, fs::perms::owner_all);
  CHECK(foreign_path(dir / "img") == "");
  // Writable by others, not sticky: anyone could replace img.
  fs::permissions(dir, fs::perms::all);
  CHECK_THAT(foreign_path(dir / "img"),
             Catch::Contains("lies in `" + dir.string() + "`, a directory other users can write"));
  // Sticky: others may add entries, not replace the caller's.
  fs::permissions(dir, fs::perms::all | fs::perms::sticky_bit);
  CHECK(foreign_path(dir / "img") == "");
  // A symlink on the way is resolved first.
  fs::permissions(dir, fs::perms::owner_all);
  fs::create_directory_symlink(dir / "img", dir / "link");
  CHECK(foreign_path(dir / "link") == "");
  // A symlink others could replace, to a place of the caller's: its
  // target being safe does not make the path so, at its end or on the way.
  fs::create_directory(dir / "open");
  fs::create_directory_symlink(dir / "img", dir / "open" / "link");
  fs::permissions(dir / "open", fs::perms::all);
  CHECK_THAT(foreign_path(dir / "open" / "link"),
             Catch::Contains("`" + (dir / "open" / "link").string() + "` lies in `" + (dir / "open").string() +
                             "`, a directory other users can write"));
  fs::create_directory(dir / "img" / "sub");
  CHECK_THAT(foreign_path(dir / "open" / "link" / "sub"), Catch::Contains("a directory other users can write"));
  fs::permissions(dir / "open", fs::perms::owner_all);
  CHECK(foreign_path(dir / "open" / "link" / "sub") == "");
  // Resolved, the target's own directories are walked too.
  fs::create_directories(dir / "other" / "target");
  fs::create_directory_symlink(dir / "other" / "target", dir / "open" / "elsewhere");
  CHECK(foreign_path(dir / "open" / "elsewhere") == "");
  fs::permissions(dir / "other", fs::perms::all);
  CHECK_THAT(foreign_path(dir / "open" / "elsewhere"),
             Catch::Contains("lies in `" + (dir / "other").string() + "`, a directory other users can write"));
  fs::remove_all(dir);
}

TEST_CASE("the default store is found by the real user when USER is unset or names another") {
  const char* saved_storage = std::getenv("RT_STORAGE");
  const char* saved_user = std::getenv("USER");
  const char* saved_logname = std::getenv("LOGNAME");
  const std::string storage = saved_storage ? saved_storage : "", user = saved_user ? saved_user : "",
                    logname = saved_logname ? saved_logname : "";
  ::unsetenv("RT_STORAGE");
  ::unsetenv("LOGNAME");
  // /etc/passwd's name for this uid (when it is there, not in a directory service).
  std::string name;
  if (FILE* f = std::fopen("/etc/passwd", "re")) {
    while (const struct passwd* pw = ::fgetpwent(f))
      if (pw->pw_uid == ::getuid() && name.empty()) name = pw->pw_name;
    std::fclose(f);
  }
  ::setenv("USER", "someone-else-entirely", 1);  // no user of /etc/passwd: a directory service's, say
  CHECK(rt::store::default_root() == "/var/tmp/someone-else-entirely.rt");
  if (::getuid() != 1) {
    ::setenv("USER", "daemon", 1);  // another user's name (uid 1 in /etc/passwd): never theirs
    CHECK(rt::store::default_root() == "/var/tmp/" + (name.empty() ? std::to_string(::getuid()) : name) + ".rt");
  }
  ::unsetenv("USER");
  ::setenv("LOGNAME", "not-from-logname", 1);
  CHECK(rt::store::default_root() == "/var/tmp/" + (name.empty() ? "not-from-logname" : name) + ".rt");
  ::unsetenv("LOGNAME");
  if (saved_user) ::setenv("USER", user.c_str(), 1);
  if (saved_logname) ::setenv("LOGNAME", logname.c_str(), 1);
  if (saved_storage) ::setenv("RT_STORAGE", storage.c_str(), 1);
}

TEST_CASE("find_image normalises Docker Hub names both ways, as Docker does") {
  namespace fs = std::filesystem;
  const TempDir tmp;
  const fs::path root = tmp.path;
  fs::create_directories(root / "images" / "busybox:latest");
  fs::create_directories(root / "images" / "alpine");
  fs::create_directories(root / "images" / "127.0.0.1:5000+app:1");
  auto store = Root::open(root, false);
  REQUIRE(store);
  for (const char* n : {"busybox", "busybox:latest", "library/busybox", "docker.io/library/busybox:latest"})
    CHECK(find_image(*store, n).value_or("") == find_image(*store, "busybox:latest").value());
  for (const char* n : {"alpine:latest", "docker.io/library/alpine", "library/alpine:latest"})
    CHECK(find_image(*store, n).has_value());
  CHECK_FALSE(find_image(*store, "busybox:1.36").has_value());  // another tag is another image
  CHECK_FALSE(find_image(*store, "alpine:3").has_value());
  CHECK_FALSE(find_image(*store, "otheruser/busybox").has_value());
  CHECK_FALSE(find_image(*store, "127.0.0.1:5000/app:2").has_value());
  CHECK(find_image(*store, "127.0.0.1:5000/app:1").has_value());
}
