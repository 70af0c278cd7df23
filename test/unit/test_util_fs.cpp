#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "temp_dir.hpp"
#include "util/fs.hpp"

using rt::util::normalize_path;

TEST_CASE("normalize_path collapses dots and slashes lexically") {
  CHECK(normalize_path("/a//b/./c/") == "/a/b/c");
  CHECK(normalize_path("/a/b/../c") == "/a/c");
  CHECK(normalize_path("/../..") == "/");
  CHECK(normalize_path("x/y", "/base") == "/base/x/y");
  CHECK(normalize_path("", "/base") == "/base");
  // Paths already normal come back as they are (is_normal_path), names
  // that begin with dots included.
  for (const char* p : {"/", "/a", "/a/.b/..c/c..", "/run/rt-host/lib/libibverbs.so.1"}) {
    CHECK(rt::util::is_normal_path(p));
    CHECK(normalize_path(p) == p);
  }
  for (const char* p : {"", "a", "/a/", "//a", "/a//b", "/a/.", "/./a", "/a/..", "/a/../b"})
    CHECK_FALSE(rt::util::is_normal_path(p));
}

TEST_CASE("read_file_if_exists tells a missing file from a present one") {
  CHECK_FALSE(rt::util::read_file_if_exists("/nonexistent/file").has_value());
  auto text = rt::util::read_file_if_exists("/proc/self/comm");
  REQUIRE(text.has_value());
  CHECK_FALSE(text->empty());
}

namespace {
// A temporary directory and an O_PATH descriptor of it.
struct Dir : TempDir {
  rt::util::UniqueFd fd = rt::util::open_fd(path, O_PATH | O_DIRECTORY);
};
}  // namespace

TEST_CASE("write_file_atomic_at neither follows nor truncates what is planted under its temporary names") {
  Dir d;
  const std::string victim = d.path + "/victim";
  std::ofstream(victim) << "precious";
  // Every temporary name this process would try, planted as a link to the victim.
  for (int i = 0; i < 8; ++i) {
    std::string tmp = d.path + "/.cache." + std::to_string(::getpid()) + "." + std::to_string(i) + ".tmp";
    REQUIRE(::symlink(victim.c_str(), tmp.c_str()) == 0);
  }
  CHECK_FALSE(rt::util::write_file_atomic_at(d.fd.get(), "cache", "data"));
  CHECK(rt::util::read_file_if_exists(victim) == std::optional<std::string>("precious"));
  CHECK_FALSE(rt::util::read_file_if_exists(d.path + "/cache").has_value());
  // With one name free, the write goes there and is renamed into place.
  ::unlink((d.path + "/.cache." + std::to_string(::getpid()) + ".3.tmp").c_str());
  CHECK(rt::util::write_file_atomic_at(d.fd.get(), "cache", "data"));
  CHECK(rt::util::read_file_if_exists(d.path + "/cache") == std::optional<std::string>("data"));
  CHECK(rt::util::read_file_if_exists(victim) == std::optional<std::string>("precious"));
}

TEST_CASE("read_owned_at reads regular files only, never through a symlink") {
  Dir d;
  std::ofstream(d.path + "/file") << "mine";
  REQUIRE(::symlink((d.path + "/file").c_str(), (d.path + "/link").c_str()) == 0);
  REQUIRE(::mkfifo((d.path + "/fifo").c_str(), 0600) == 0);
  CHECK(rt::util::read_owned_at(d.fd.get(), "file") == std::optional<std::string>("mine"));
  CHECK_FALSE(rt::util::read_owned_at(d.fd.get(), "link").has_value());
  CHECK_FALSE(rt::util::read_owned_at(d.fd.get(), "fifo").has_value());  // and does not block on it
  CHECK_FALSE(rt::util::read_owned_at(d.fd.get(), "missing").has_value());
}

TEST_CASE("link_new_file_at makes a file once: the first one made stays") {
  Dir d;
  CHECK(rt::util::link_new_file_at(d.fd.get(), "secret", "first"));
  CHECK_FALSE(rt::util::link_new_file_at(d.fd.get(), "secret", "second"));
  CHECK(rt::util::read_owned_at(d.fd.get(), "secret") == std::optional<std::string>("first"));
  CHECK(rt::util::list_names(d.fd.get(), d.path).size() == 1);  // no temporary left
}

TEST_CASE("remove_tree works at any depth with few descriptors, and through 0000 and 0555 directories") {
  Dir d;
  // 600 levels, some locked: the removal must neither keep a descriptor
  // per level (the limit is lowered to 128 here) nor stop at missing bits.
  {
    rt::util::UniqueFd cur(::open(d.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(::mkdirat(cur.get(), "deep", 0700) == 0);
    cur.reset(::openat(cur.get(), "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (int i = 0; i < 600; ++i) {
      REQUIRE(::mkdirat(cur.get(), "d", 0700) == 0);
      rt::util::UniqueFd(::openat(cur.get(), "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
      rt::util::UniqueFd next(::openat(cur.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      REQUIRE(next);
      if (i % 100 == 50) ::fchmod(cur.get(), i % 200 == 50 ? 0555 : 0000);
      cur = std::move(next);
    }
  }
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit low = old;
  low.rlim_cur = 128;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  CHECK_NOTHROW(rt::util::remove_tree(d.path + "/deep"));
  ::setrlimit(RLIMIT_NOFILE, &old);
  CHECK_FALSE(rt::util::path_exists(d.path + "/deep"));
}

TEST_CASE("close_own_fds closes rt's descriptors (close-on-exec) and keeps the caller's") {
  // In a child: the test runner's own descriptors are none of its business.
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int own = ::open("/", O_PATH | O_CLOEXEC);
    const int callers = ::open("/", O_PATH);
    const int kept = ::open("/", O_PATH | O_CLOEXEC);
    rt::util::close_own_fds(false, {kept});
    bool ok = ::fcntl(own, F_GETFD) < 0 && ::fcntl(callers, F_GETFD) >= 0 && ::fcntl(kept, F_GETFD) >= 0;
    rt::util::close_own_fds(true);  // 0-2 only
    ok = ok && ::fcntl(callers, F_GETFD) < 0 && ::fcntl(kept, F_GETFD) < 0 && ::fcntl(2, F_GETFD) >= 0;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("read_regular_if_exists reads regular files only, without blocking") {
  TempDir t;
  const std::string fifo = t.path + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(rt::util::read_regular_if_exists(fifo), Catch::Contains("is not a regular file (a FIFO)"));
  CHECK_THROWS_WITH(rt::util::read_regular_if_exists(t.path), Catch::Contains("(a directory)"));
  CHECK_FALSE(rt::util::read_regular_if_exists(t.path + "/none").has_value());
  std::ofstream(t.path + "/f") << "text";
  CHECK(rt::util::read_regular_if_exists(t.path + "/f") == "text");
}
