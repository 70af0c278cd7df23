// run/injection: the injected files' links, made once in the store and
// bound at each start; rt prune removes the trees no start used for a week.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <ctime>
#include <string>

#include "run/injection.hpp"
#include "store/layout.hpp"
#include "temp_dir.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"

namespace {

rt::run::HostFilesTree two_links() {
  rt::run::HostFilesTree t;
  t.dirs = {"/usr/lib/x86_64-linux-gnu"};
  t.subdirs = {"lib"};
  t.links = {{"lib/libibverbs.so.1", "../.d/0/libibverbs.so.1.14.44.0", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", 0},
             {"lib/libnl-3.so.200", "../.d/0/libnl-3.so.200.26.0", "/usr/lib/x86_64-linux-gnu/libnl-3.so.200", 0}};
  return t;
}

void age(const std::string& path, int64_t seconds) {
  const struct timespec when[2] = {{std::time(nullptr) - seconds, 0}, {std::time(nullptr) - seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), when, AT_SYMLINK_NOFOLLOW) == 0);
}

}  // namespace

TEST_CASE("the injected files' tree is made once in the store, the same for the same links") {
  TempDir t;
  const std::string store = t.path + "/store";
  const std::string kept = rt::run::kept_host_files_tree(two_links(), store);
  REQUIRE_FALSE(kept.empty());
  CHECK(kept.starts_with(store + "/host-trees/"));
  char target[256] = {};
  REQUIRE(::readlink((kept + "/lib/libibverbs.so.1").c_str(), target, sizeof target - 1) > 0);
  CHECK(std::string(target) == "../.d/0/libibverbs.so.1.14.44.0");
  struct stat st;
  CHECK((::stat((kept + "/.d/0").c_str(), &st) == 0 && S_ISDIR(st.st_mode)));
  CHECK(rt::run::kept_host_files_tree(two_links(), store) == kept);  // found again
  auto other = two_links();
  other.links.pop_back();
  CHECK(rt::run::kept_host_files_tree(other, store) != kept);  // other links, another tree
  CHECK(rt::run::kept_host_files_tree(rt::run::HostFilesTree{}, store).empty());  // nothing to link

  // rt prune: a tree unused for a week goes, a recent one and a foreign name stay.
  age(kept, 8 * 86400);
  const std::string dir = store + "/host-trees";
  rt::util::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd);
  REQUIRE(::mkdir((dir + "/not-a-tree").c_str(), 0700) == 0);
  age(dir + "/not-a-tree", 30 * 86400);
  CHECK(rt::run::prune_host_trees(fd.get(), dir) == 1);
  CHECK_FALSE(rt::util::path_exists(kept));
  CHECK(rt::util::path_exists(dir + "/not-a-tree"));
  CHECK(rt::util::list_names(fd.get(), dir).size() == 2);
}
