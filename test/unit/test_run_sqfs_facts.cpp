// run/sqfs_facts: what rt exec reads from a SquashFS image, remembered.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <vector>

#include "rt/error.hpp"
#include "run/sqfs_facts.hpp"
#include "squash/sqfs.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"

using rt::run::prune_squash_facts;
using rt::run::squash_facts;
using rt::run::SquashFacts;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A SquashFS image of `tree`, made with mksquashfs.
void make_image(const std::string& tree, const std::string& file) {
  ::unlink(file.c_str());
  REQUIRE(std::system(("mksquashfs " + tree + " " + file + " -quiet -no-progress -comp zstd >/dev/null").c_str()) == 0);
}

struct FactsFixture {
  std::string dir, tree, image, cache;
  std::unique_ptr<rt::squash::Image> opened;
  rt::util::UniqueFd cachefd;
  int opens = 0;
  FactsFixture() {
    char tmpl[] = "/tmp/rt-sqfs-facts.XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    dir = tmpl;
    tree = dir + "/tree";
    image = dir + "/img.sqfs";
    cache = dir + "/cache";
    REQUIRE(std::system(("mkdir -p " + tree + "/etc " + tree + "/.rt").c_str()) == 0);
    write(tree + "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
    write(tree + "/.rt/image-config.json", R"({"config":{"Env":["A=1"]}})");
  }
  ~FactsFixture() { (void)std::system(("rm -rf " + dir).c_str()); }
  int cache_fd() {
    if (!cachefd) {
      ::mkdir(cache.c_str(), 0700);
      cachefd = rt::util::open_fd(cache, O_PATH | O_DIRECTORY);
    }
    return cachefd.get();
  }
  SquashFacts facts() {
    opened.reset();
    return squash_facts(image, cache_fd(), [this]() -> rt::squash::Image& {
      ++opens;
      opened = std::make_unique<rt::squash::Image>(image);
      return *opened;
    });
  }
};

}  // namespace

TEST_CASE("sqfs facts: read from the image once per version, then from the cache") {
  FactsFixture f;
  make_image(f.tree, f.image);
  SquashFacts a = f.facts();
  CHECK(f.opens == 1);
  CHECK(a.passwd == std::optional<std::string>("root:x:0:0:root:/root:/bin/sh\n"));
  CHECK(a.config == std::optional<std::string>(R"({"config":{"Env":["A=1"]}})"));
  CHECK_FALSE(a.group.has_value());  // the image has none

  SquashFacts b = f.facts();
  CHECK(f.opens == 1);  // not opened again
  CHECK(b.passwd == a.passwd);
  CHECK(b.config == a.config);
  CHECK_FALSE(b.group.has_value());

  // A new version of the file (its time, at least, differs): read again.
  write(f.tree + "/etc/group", "root:x:0:\n");
  write(f.tree + "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\nu:x:5:5::/:/bin/sh\n");
  make_image(f.tree, f.image);
  REQUIRE(std::system(("touch -d @1000000000 " + f.image).c_str()) == 0);
  SquashFacts c = f.facts();
  CHECK(f.opens == 2);
  CHECK(c.passwd == std::optional<std::string>("root:x:0:0:root:/root:/bin/bash\nu:x:5:5::/:/bin/sh\n"));
  CHECK(c.group == std::optional<std::string>("root:x:0:\n"));
  CHECK(f.facts().group == c.group);
  CHECK(f.opens == 2);
}

TEST_CASE("sqfs facts: a damaged cache file is read around, and rewritten") {
  FactsFixture f;
  make_image(f.tree, f.image);
  SquashFacts a = f.facts();
  REQUIRE(f.opens == 1);
  auto entries = rt::util::list_names(rt::util::open_fd(f.cache, O_RDONLY | O_DIRECTORY).get(), f.cache);
  REQUIRE(entries.size() == 1);
  const std::string file = f.cache + "/" + entries[0];
  auto text = rt::util::read_file_if_exists(file);
  REQUIRE(text);
  for (size_t cut : {text->size() - 1, text->size() / 2, size_t{3}}) {
    write(file, text->substr(0, cut));
    SquashFacts b = f.facts();
    CHECK(b.passwd == a.passwd);
    CHECK(b.config == a.config);
  }
  CHECK(f.opens == 4);
  write(file, *text + "trailing");
  CHECK(f.facts().passwd == a.passwd);
  CHECK(f.opens == 5);
  CHECK(rt::util::read_file_if_exists(file) == text);  // rewritten whole
  CHECK(f.facts().passwd == a.passwd);
  CHECK(f.opens == 5);
}

TEST_CASE("sqfs facts: an image that is not SquashFS is refused, and nothing is remembered") {
  FactsFixture f;
  write(f.image, "not an image");
  CHECK_THROWS_AS(f.facts(), rt::Error);
  CHECK(rt::util::list_names(f.cache_fd(), f.cache).empty());
}

TEST_CASE("sqfs facts: prune keeps the facts of current files only") {
  FactsFixture f;
  make_image(f.tree, f.image);
  f.facts();
  auto count = [&] { return rt::util::list_names(f.cache_fd(), f.cache).size(); };
  write(f.cache + "/0123456789abcdef0123456789abcdef", "not facts");
  REQUIRE(count() == 2);
  CHECK(prune_squash_facts(f.cache_fd()) == 9);  // the damaged entry
  CHECK(count() == 1);
  CHECK(prune_squash_facts(f.cache_fd()) == 0);
  f.facts();
  CHECK(f.opens == 1);  // still there, still used
  REQUIRE(std::system(("touch -d @1000000000 " + f.image).c_str()) == 0);
  CHECK(prune_squash_facts(f.cache_fd()) > 0);  // the file changed
  CHECK(count() == 0);
  f.facts();
  CHECK(f.opens == 2);
  ::unlink(f.image.c_str());
  CHECK(prune_squash_facts(f.cache_fd()) > 0);  // the file is gone
  CHECK(count() == 0);
}

TEST_CASE("sqfs facts: prune removes only the cache's own names and follows no symlink") {
  FactsFixture f;
  const std::string outside = f.dir + "/outside";
  REQUIRE(std::system(("mkdir " + outside + " && echo keep > " + outside + "/file").c_str()) == 0);
  f.cache_fd();
  write(f.cache + "/notes.txt", "somebody's file");
  REQUIRE(::symlink(outside.c_str(), (f.cache + "/0123456789abcdef0123456789abcdef").c_str()) == 0);
  REQUIRE(::symlink((outside + "/file").c_str(), (f.cache + "/fedcba9876543210fedcba9876543210").c_str()) == 0);
  prune_squash_facts(f.cache_fd());
  auto left = rt::util::list_names(f.cache_fd(), f.cache);
  CHECK(left == std::vector<std::string>{"notes.txt"});  // the links went, not what they point to
  CHECK(rt::util::read_file_if_exists(outside + "/file") == std::optional<std::string>("keep\n"));
}

TEST_CASE("sqfs facts: an entry planted as a symlink is never read") {
  FactsFixture f;
  make_image(f.tree, f.image);
  f.facts();
  REQUIRE(f.opens == 1);
  auto names = rt::util::list_names(f.cache_fd(), f.cache);
  REQUIRE(names.size() == 1);
  const std::string entry = f.cache + "/" + names[0], forged = f.dir + "/forged";
  REQUIRE(std::rename(entry.c_str(), forged.c_str()) == 0);
  REQUIRE(::symlink(forged.c_str(), entry.c_str()) == 0);
  f.facts();
  CHECK(f.opens == 2);  // read from the image, not through the link
}
