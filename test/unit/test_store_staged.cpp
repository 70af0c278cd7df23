// store/staged: a node's staged copy is used only once it is whole.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "rt/error.hpp"
#include "store/root.hpp"
#include "store/staged.hpp"
#include "temp_dir.hpp"
#include "util/fs.hpp"

using rt::store::find_staged;
using rt::store::Root;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  REQUIRE(rt::util::path_exists(path));
}

}  // namespace

TEST_CASE("staged copies: whole ones only, renamed into place once KEY.ready agrees") {
  TempDir t;
  auto root = Root::open(t.path + "/store", true);
  REQUIRE(root);
  const std::string dir = root->sub("staged/42");
  const std::string key = "0123456789abcdef0123456789abcdef";
  CHECK_FALSE(find_staged(*root, "42", key, "sqfs"));  // no directory yet
  root->dir("staged/42", true);
  CHECK_FALSE(find_staged(*root, "", key, "sqfs"));  // outside a job

  // sbcast under way: the data without its note, then a note whose size
  // disagrees, then one for another kind of file.
  write(dir + "/" + key + ".part", "12345");
  CHECK_FALSE(find_staged(*root, "42", key, "sqfs"));
  write(dir + "/" + key + ".ready", rt::store::staged_ready_note(6, "sqfs"));
  CHECK_FALSE(find_staged(*root, "42", key, "sqfs"));
  write(dir + "/" + key + ".ready", rt::store::staged_ready_note(5, "sif"));
  CHECK_FALSE(find_staged(*root, "42", key, "sqfs"));
  write(dir + "/" + key + ".ready", "rt-staged 1\n5\n");
  CHECK_FALSE(find_staged(*root, "42", key, "sqfs"));
  CHECK(rt::util::path_exists(dir + "/" + key + ".part"));

  write(dir + "/" + key + ".ready", rt::store::staged_ready_note(5, "sqfs"));
  auto got = find_staged(*root, "42", key, "sqfs");
  REQUIRE(got);
  CHECK(*got == dir + "/" + key + ".sqfs");
  CHECK_FALSE(rt::util::path_exists(dir + "/" + key + ".part"));
  CHECK(find_staged(*root, "42", key, "sqfs") == got);  // found again as it is
  CHECK_FALSE(find_staged(*root, "43", key, "sqfs"));  // another job's is not
  CHECK_FALSE(find_staged(*root, "42", key, "sif"));

  // A symlink in its place is not followed.
  const std::string other = "fedcba9876543210fedcba9876543210";
  REQUIRE(::symlink((dir + "/" + key + ".sqfs").c_str(), (dir + "/" + other + ".sqfs").c_str()) == 0);
  CHECK_FALSE(find_staged(*root, "42", other, "sqfs"));
}

TEST_CASE("a copy staged by a file's path is found by the path alone, through its note") {
  TempDir t;
  auto root = Root::open(t.path + "/store", true);
  REQUIRE(root);
  const std::string dir = root->sub("staged/42");
  root->dir("staged/42", true);
  const std::string key = "0123456789abcdef0123456789abcdef", path = "/lustre/proj/app.sif";
  const std::string note = dir + "/" + rt::store::staged_key_for_path(path) + ".ref";
  std::string ext;
  CHECK_FALSE(rt::store::find_staged_by_path(*root, "42", path, &ext));  // no note
  write(note, rt::store::staged_ref_note(key, "sif"));
  CHECK_FALSE(rt::store::find_staged_by_path(*root, "42", path, &ext));  // a note, no whole copy yet
  write(dir + "/" + key + ".sif", "12345");
  auto got = rt::store::find_staged_by_path(*root, "42", path, &ext);
  REQUIRE(got);
  CHECK(*got == dir + "/" + key + ".sif");
  CHECK(ext == "sif");
  CHECK_FALSE(rt::store::find_staged_by_path(*root, "42", "/lustre/proj/other.sif", &ext));  // another path
  CHECK_FALSE(rt::store::find_staged_by_path(*root, "43", path, &ext));                      // another job
  CHECK_FALSE(rt::store::find_staged_by_path(*root, "", path, &ext));                        // no job
  // A note that names no key, or a key with a path in it, is no note.
  write(note, "rt-staged-ref 1\n../../x\nsif\n");
  CHECK_FALSE(rt::store::find_staged_by_path(*root, "42", path, &ext));
  write(note, rt::store::staged_ref_note(key, "tar"));
  CHECK_FALSE(rt::store::find_staged_by_path(*root, "42", path, &ext));
}

TEST_CASE("staged keys: a file by path, size, inode and time; a name by its canonical reference") {
  struct stat a {}, b {};
  a.st_size = 10;
  a.st_ino = 7;
  b = a;
  using rt::store::staged_key_for_file;
  using rt::store::staged_key_for_name;
  CHECK(staged_key_for_file("/p/app.sqfs", a) == staged_key_for_file("/p/app.sqfs", b));
  b.st_dev = 99;  // differs between nodes mounting one file system
  CHECK(staged_key_for_file("/p/app.sqfs", a) == staged_key_for_file("/p/app.sqfs", b));
  b.st_mtim.tv_nsec = 1;
  CHECK(staged_key_for_file("/p/app.sqfs", a) != staged_key_for_file("/p/app.sqfs", b));
  CHECK(staged_key_for_file("/p/app.sqfs", a) != staged_key_for_file("/q/app.sqfs", a));
  CHECK(staged_key_for_name("ubuntu") == staged_key_for_name("docker.io/library/ubuntu:latest"));
  CHECK(staged_key_for_name("ubuntu") != staged_key_for_name("ubuntu:24.04"));
  CHECK(staged_key_for_name("ubuntu") != staged_key_for_file("ubuntu", a));
}

TEST_CASE("the Slurm place comes from Slurm's environment, digits only") {
  ::setenv("SLURM_JOB_ID", "123", 1);
  ::setenv("SLURM_STEP_ID", "4", 1);
  ::setenv("SLURM_STEP_NUM_NODES", "16", 1);
  ::setenv("SLURM_NODEID", "3", 1);
  auto p = rt::store::slurm_place();
  CHECK(p.job == "123");
  CHECK(p.step == "4");
  CHECK(p.nodes == 16);
  CHECK(p.node == 3);
  ::setenv("SLURM_JOB_ID", "../1", 1);
  CHECK(rt::store::slurm_place().job.empty());
  for (const char* v : {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NUM_NODES", "SLURM_NODEID"}) ::unsetenv(v);
  CHECK(rt::store::slurm_place().job.empty());
}
