// Layers from a tree that changed (rt build's steps) and what COPY reads
// and writes: the layer of a change set holds what changed and whiteouts
// for what went, and applied over the old tree it gives the new one.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "image/copy_tree.hpp"
#include "image/tree_diff.hpp"
#include "image/unpack.hpp"
#include "rt/error.hpp"
#include "temp_dir.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"

using namespace rt;
namespace fs = std::filesystem;

namespace {

void put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// Files below `dir`, by relative path.
void put_all(const std::string& dir, const std::map<std::string, std::string>& files) {
  for (const auto& [rel, text] : files) put(dir + "/" + rel, text);
}

std::string get(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The layer's entries: path -> type letter (f, d, l, h for a hard link).
struct Layer {
  std::string file;
  std::map<std::string, char> entries;
  image::LayerWritten written;
};

Layer layer_of(const std::string& root, image::TreeSnapshot& before, const std::string& file) {
  util::UniqueFd rootfd = util::open_fd(root, O_PATH | O_DIRECTORY);
  util::UniqueFd out = util::open_fd(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  Layer l{file, {}, image::write_tree_layer(rootfd.get(), root, before, out.get())};
  util::UniqueFd in = util::open_fd(file, O_RDONLY);
  image::for_each_tar_entry([&](void* b, size_t n) { return util::read_some(in.get(), b, n, file); }, "test", "layer",
                            [&](archive*, archive_entry* e, uint64_t) {
                              auto m = image::merge_entry_of(e);
                              char t = !m.hardlink.empty()            ? 'h'
                                       : (m.type & S_IFMT) == S_IFDIR ? 'd'
                                       : (m.type & S_IFMT) == S_IFLNK ? 'l'
                                                                      : 'f';
                              std::string p = m.path;
                              while (!p.empty() && p.back() == '/') p.pop_back();
                              l.entries[p] = t;
                            });
  return l;
}

// Every entry of a tree: path -> type and contents (or link target).
std::map<std::string, std::string> listing(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), root).string();
    if (it->is_symlink())
      out[rel] = "l:" + fs::read_symlink(it->path()).string();
    else if (it->is_directory())
      out[rel] = "d";
    else
      out[rel] = "f:" + get(it->path().string());
  }
  return out;
}

}  // namespace

TEST_CASE("a layer holds what changed, the directories above it, and whiteouts for what went") {
  TempDir t;
  const std::string root = t.path + "/root";
  auto base = [](const std::string& dir) {
    put_all(
        dir,
        {{"etc/keep", "same"}, {"etc/edit", "old"}, {"etc/gone", "x"}, {"var/old/a", "a"}, {"usr/bin/tool", "tool"}});
  };
  base(root);
  util::UniqueFd rootfd = util::open_fd(root, O_PATH | O_DIRECTORY);
  image::TreeSnapshot before = image::TreeSnapshot::take(rootfd.get(), root);

  SECTION("nothing changed: no entries") {
    Layer l = layer_of(root, before, t.path + "/l.tar");
    CHECK(l.written.changes == 0);
    CHECK(l.entries.empty());
  }
  SECTION("new, changed, removed, replaced, linked") {
    put(root + "/etc/edit", "new!");
    fs::remove(root + "/etc/gone");
    fs::remove_all(root + "/var/old");
    put(root + "/opt/new/file", "n");
    fs::create_symlink("../usr/bin/tool", root + "/opt/link");
    REQUIRE(::link((root + "/opt/new/file").c_str(), (root + "/opt/hard").c_str()) == 0);
    fs::permissions(root + "/usr/bin/tool", fs::perms::owner_all);  // chmod only
    Layer l = layer_of(root, before, t.path + "/l.tar");
    CHECK(l.entries == std::map<std::string, char>{{"etc", 'd'},
                                                   {"etc/.wh.gone", 'f'},
                                                   {"etc/edit", 'f'},
                                                   {"opt", 'd'},
                                                   {"opt/hard", 'f'},
                                                   {"opt/link", 'l'},
                                                   {"opt/new", 'd'},
                                                   {"opt/new/file", 'h'},
                                                   {"usr", 'd'},
                                                   {"usr/bin", 'd'},
                                                   {"usr/bin/tool", 'f'},
                                                   {"var", 'd'},
                                                   {"var/.wh.old", 'f'}});
    CHECK(l.written.diff_id.starts_with("sha256:"));

    // The original tree as a whole layer (from a copy made the same way),
    // then this one: applied in order they give the tree as it is now.
    const std::string again = t.path + "/again";
    fs::create_directories(again);
    base(t.path + "/o");
    image::TreeSnapshot empty;
    Layer orig = layer_of(t.path + "/o", empty, t.path + "/o.tar");
    image::TreeWriter w(again, "test");
    for (const auto& f : {orig.file, l.file}) {
      util::UniqueFd in = util::open_fd(f, O_RDONLY);
      w.apply_layer([&](void* b, size_t n) { return util::read_some(in.get(), b, n, f); }, f);
    }
    w.finish();
    CHECK(listing(again) == listing(root));
  }
  SECTION("the snapshot moves on: a second layer holds only what came after") {
    put(root + "/etc/edit", "one");
    layer_of(root, before, t.path + "/1.tar");
    put(root + "/etc/second", "two");
    Layer l = layer_of(root, before, t.path + "/2.tar");
    CHECK(l.entries == std::map<std::string, char>{{"etc", 'd'}, {"etc/second", 'f'}});
  }
  SECTION("a file the owner may not read is still read, and keeps its mode") {
    put(root + "/etc/secret", "s");
    REQUIRE(::chmod((root + "/etc/secret").c_str(), 0) == 0);
    Layer l = layer_of(root, before, t.path + "/l.tar");
    CHECK(l.entries.count("etc/secret"));
    struct stat st;
    REQUIRE(::stat((root + "/etc/secret").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0);
    ::chmod((root + "/etc/secret").c_str(), 0600);
  }
}

TEST_CASE("COPY sources: patterns, .dockerignore, content digests") {
  TempDir t;
  const std::string ctx = t.path + "/ctx";
  put_all(ctx, {{"a.txt", "a"}, {"b.txt", "b"}, {"sub/c.txt", "c"}, {"sub/skip.log", "log"}});
  fs::create_symlink("/etc/passwd", ctx + "/escape");
  image::SourceTree src(ctx, image::DockerIgnore::parse("**/*.log\n"));
  CHECK(src.match("*.txt", "Dockerfile:1") == std::vector<std::string>{"a.txt", "b.txt"});
  CHECK(src.match("./sub/", "Dockerfile:1") == std::vector<std::string>{"sub"});
  CHECK_THROWS_WITH(src.match("sub/skip.log", "Dockerfile:2"),
                    Catch::Contains("Dockerfile:2") && Catch::Contains(".dockerignore"));
  CHECK_THROWS_WITH(src.match("nothing*", "Dockerfile:3"), Catch::Contains("names nothing"));
  const std::string d1 = src.digest({"sub"});
  put(ctx + "/sub/skip.log", "changed, but ignored");
  CHECK(src.digest({"sub"}) == d1);
  put(ctx + "/sub/c.txt", "C");
  CHECK(src.digest({"sub"}) != d1);

  // Into an image: inside it whatever its symlinks say, never outside.
  const std::string img = t.path + "/img";
  fs::create_directories(img + "/usr/lib");
  fs::create_symlink("/usr/lib", img + "/lib");
  fs::create_symlink("/../../../..", img + "/up");
  util::UniqueFd tree = util::open_fd(img, O_PATH | O_DIRECTORY);
  image::copy_into(src, "sub", tree.get(), "/lib/x", false, {}, "Dockerfile:4");
  CHECK(get(img + "/usr/lib/x/c.txt") == "C");
  CHECK_FALSE(fs::exists(img + "/usr/lib/x/skip.log"));
  image::copy_into(src, "a.txt", tree.get(), "/up/etc/", true, {}, "Dockerfile:5");
  CHECK(get(img + "/etc/a.txt") == "a");
  image::copy_into(src, "b.txt", tree.get(), "/opt/renamed", false, {0600}, "Dockerfile:6");
  CHECK(get(img + "/opt/renamed") == "b");
  CHECK((fs::status(img + "/opt/renamed").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  // A source symlink is followed inside the context: /etc/passwd there is not the host's.
  CHECK_THROWS(src.match("escape", "Dockerfile:7"));
}

TEST_CASE("COPY of a directory: a `!` pattern brings entries back from an excluded directory") {
  TempDir t;
  const std::string ctx = t.path + "/ctx";
  put_all(ctx, {{"keep.txt", "k"}, {"secret/key", "do not copy"}, {"secret/public.pem", "pem"}, {"cache/a", "a"}});
  image::SourceTree src(ctx, image::DockerIgnore::parse("secret/\ncache/\n!secret/*.pem\n"));
  const std::string img = t.path + "/img";
  fs::create_directories(img);
  util::UniqueFd tree = util::open_fd(img, O_PATH | O_DIRECTORY);
  image::copy_into(src, "", tree.get(), "/app", true, {}, "Dockerfile:2");
  CHECK(get(img + "/app/keep.txt") == "k");
  CHECK(get(img + "/app/secret/public.pem") == "pem");
  CHECK_FALSE(fs::exists(img + "/app/secret/key"));
  CHECK_FALSE(fs::exists(img + "/app/cache"));  // nothing came back from it: not made
  CHECK(src.match("secret/*", "Dockerfile:3") == std::vector<std::string>{"secret/public.pem"});
  // The digest follows what is copied: the excluded key does not count, the pem does.
  const std::string d = src.digest({""});
  put(ctx + "/secret/key", "changed");
  CHECK(src.digest({""}) == d);
  put(ctx + "/secret/public.pem", "new pem");
  CHECK(src.digest({""}) != d);
}
