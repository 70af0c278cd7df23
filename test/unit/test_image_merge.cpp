// image/merge: the layer rules, once for the tree writer and the flattener.
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "image/merge.hpp"
#include "rt/error.hpp"

using rt::image::LayerMerge;
using rt::image::MergeEntry;
using rt::image::MergeStep;
using V = std::vector<std::string>;

namespace {

MergeEntry dir(const std::string& p, unsigned perm = 0755) { return {p, S_IFDIR, "", "", perm, 0, {}}; }
MergeEntry file(const std::string& p) { return {p, S_IFREG, "", "", 0644, 0, {}}; }
MergeEntry sym(const std::string& p, const std::string& target) { return {p, S_IFLNK, target, "", 0777, 0, {}}; }
MergeEntry hard(const std::string& p, const std::string& target) { return {p, S_IFREG, "", target, 0644, 0, {}}; }

// A merge fed layer by layer; keys() is the final tree.
struct Merge {
  LayerMerge m{"test"};
  uint64_t index = 0;
  void layer(const std::vector<MergeEntry>& entries) {
    m.begin_layer("l" + std::to_string(m.layer() + 1));
    for (const auto& e : entries) m.apply(e, index++);
  }
  MergeStep step(const MergeEntry& e) { return m.apply(e, index++); }
  V keys() const {
    V out;
    for (const auto& [k, n] : m.nodes()) out.push_back(k);
    return out;
  }
  unsigned type(const std::string& k) const { return m.nodes().at(k).type; }
};

std::string refusal(Merge& t, const MergeEntry& e) {
  try {
    t.m.apply(e, 0);
  } catch (const rt::Error& err) {
    return err.what();
  }
  return "";
}

}  // namespace

TEST_CASE("merge: later entries replace earlier ones of any type; directories merge") {
  Merge t;
  t.layer({dir("a"), file("a/f"), file("b"), dir("c"), file("c/x"), sym("d", "a")});
  t.layer({dir("b"), file("c"), file("d"), dir("a", 0700)});
  CHECK(t.keys() == V{"a", "a/f", "b", "c", "d"});
  CHECK(t.type("b") == S_IFDIR);
  CHECK(t.type("c") == S_IFREG);  // c/x went with the directory
  CHECK(t.type("d") == S_IFREG);
  CHECK(t.m.nodes().at("a").perm == 0700);  // merged, with the new mode
  t.layer({});
  MergeStep s = t.step(file("a"));
  CHECK(s.kind == MergeStep::Kind::Make);
  CHECK(s.remove == V{"a"});
  CHECK(t.step(dir("b")).kind == MergeStep::Kind::MergeDir);
}

TEST_CASE("merge: whiteouts remove what lower layers made, a directory whole") {
  Merge t;
  t.layer({dir("a"), file("a/gone"), file("a/keep"), dir("d"), dir("d/e"), file("d/e/f")});
  t.layer({});
  MergeStep s = t.step(file("a/.wh.gone"));
  CHECK(s.whiteout);
  CHECK(s.kind == MergeStep::Kind::None);
  CHECK(s.remove == V{"a/gone"});
  CHECK(t.step(file(".wh.d")).remove == V{"d"});
  CHECK(t.keys() == V{"a", "a/keep"});
  CHECK(t.step(file("a/.wh.none")).remove.empty());
  CHECK(t.step(file("nowhere/.wh.x")).remove.empty());  // no parent: nothing made
  CHECK(t.keys() == V{"a", "a/keep"});
  CHECK_THROWS_WITH(t.step(file("a/.wh.")), Catch::Contains("malformed whiteout"));
}

TEST_CASE("merge: a whiteout in the same layer as the entry it names leaves that entry") {
  Merge before, after;
  before.layer({dir("a"), file("a/x")});
  before.layer({file("a/x"), file("a/.wh.x")});  // the entry first
  CHECK(before.keys() == V{"a", "a/x"});
  CHECK(before.m.nodes().at("a/x").layer == 1);
  after.layer({dir("a"), file("a/x")});
  after.layer({file("a/.wh.x"), file("a/x")});  // the whiteout first
  CHECK(after.keys() == V{"a", "a/x"});
  CHECK(after.m.nodes().at("a/x").layer == 1);
  // A directory of this layer stays, but not what lower layers had in it.
  Merge d;
  d.layer({dir("d"), file("d/old"), dir("d/sub"), file("d/sub/old")});
  d.layer({file("d/sub/new"), file(".wh.d")});
  CHECK(d.keys() == V{"d", "d/sub", "d/sub/new"});
}

TEST_CASE("merge: an opaque directory keeps only this layer's entries, whichever comes first") {
  Merge t;
  t.layer({dir("x"), file("x/old"), dir("x/olddir"), file("x/olddir/f")});
  t.layer({file("x/new1"), file("x/.wh..wh..opq"), file("x/new2")});
  CHECK(t.keys() == V{"x", "x/new1", "x/new2"});
  Merge root;
  root.layer({file("a"), dir("b")});
  root.layer({file(".wh..wh..opq"), file("c")});
  CHECK(root.keys() == V{"c"});
}

TEST_CASE("merge: paths go through the image's symlinks, resolved inside the image") {
  Merge t;
  t.layer({dir("usr"), dir("usr/lib"), sym("lib", "usr/lib"), sym("abs", "/usr/lib"), sym("up", "../../usr")});
  t.layer({});
  CHECK(t.step(file("lib/a")).key == "usr/lib/a");
  CHECK(t.step(file("abs/b")).key == "usr/lib/b");
  CHECK(t.step(file("up/lib/c")).key == "usr/lib/c");  // ".." stops at the root
  t.layer({});
  CHECK(t.step(file("lib/.wh.a")).remove == V{"usr/lib/a"});
  t.step(sym("dangling", "missing"));
  CHECK(refusal(t, file("dangling/x")).find("`dangling` is not a directory (a symlink to a path the image lacks)") !=
        std::string::npos);
  t.step(file("plain"));
  CHECK(refusal(t, file("plain/x")).find("`plain` is not a directory") != std::string::npos);
  t.step(sym("loop", "loop"));
  CHECK(refusal(t, file("loop/x")).find("too many levels of symbolic links") != std::string::npos);
}

TEST_CASE("merge: missing parents are made, absolute and .. paths refused") {
  Merge t;
  t.layer({file("a/b/c")});
  CHECK(t.keys() == V{"a", "a/b", "a/b/c"});
  CHECK(t.m.nodes().at("a").perm == 0755);
  CHECK(t.m.nodes().at("a").layer == -1);
  CHECK(t.step(file("./x/./y")).key == "x/y");
  CHECK(refusal(t, file("/etc/passwd")).find("absolute or `..` paths are not allowed") != std::string::npos);
  CHECK(refusal(t, file("a/../../x")).find("absolute or `..` paths are not allowed") != std::string::npos);
  CHECK(t.step(dir(".")).kind == MergeStep::Kind::None);
}

TEST_CASE("merge: hard links lead to a file the image has, by its first name") {
  Merge t;
  t.layer({dir("usr"), sym("lib", "usr"), file("usr/f"), dir("d")});
  t.layer({});
  MergeStep s = t.step(hard("h1", "lib/f"));
  CHECK(s.key == "h1");
  CHECK(s.hardlink == "usr/f");
  CHECK(t.step(hard("h2", "h1")).hardlink == "usr/f");  // a link to a link: to the file
  CHECK(refusal(t, hard("h3", "missing")).find("does not exist or is a directory") != std::string::npos);
  CHECK(refusal(t, hard("h3", "d")).find("does not exist or is a directory") != std::string::npos);
  CHECK(refusal(t, hard("h3", "../x")).find("is outside the image") != std::string::npos);
  CHECK(refusal(t, hard("usr", "usr/f")).find("is what the entry replaces") != std::string::npos);
}

TEST_CASE("merge: device nodes and sockets are skipped") {
  Merge t;
  t.layer({});
  CHECK(t.step({"dev/null", S_IFCHR, "", "", 0666, 0}).kind == MergeStep::Kind::Skipped);
  CHECK(t.step({"dev/sda", S_IFBLK, "", "", 0660, 0}).kind == MergeStep::Kind::Skipped);
  CHECK(t.step({"run/sock", S_IFSOCK, "", "", 0777, 0}).kind == MergeStep::Kind::Skipped);
  CHECK(t.step({"pipe", S_IFIFO, "", "", 0644, 0}).kind == MergeStep::Kind::Make);
  CHECK(t.keys() == V{"pipe"});
}

TEST_CASE("merge: a subtree is removed whole, whatever siblings sort beside it") {
  // "a-x" and "a.d" sort between "a" and "a/..." in the tree's order.
  Merge t;
  t.layer({dir("a"), file("a/b"), dir("a/c"), file("a/c/d"), file("a-x"), dir("a.d"), file("a.d/f")});
  t.layer({file("a")});  // a file replaces the directory and all below it
  CHECK(t.keys() == V{"a", "a-x", "a.d", "a.d/f"});
  Merge w;
  w.layer({dir("a"), file("a/b"), file("a-x"), dir("a.d"), file("a.d/f"), file("z")});
  w.layer({file(".wh.a")});
  CHECK(w.keys() == V{"a-x", "a.d", "a.d/f", "z"});
  Merge o;
  o.layer({dir("a"), file("a/b"), dir("a/c"), file("a/c/d"), file("a-x")});
  o.layer({file("a/c/new"), file("a/.wh..wh..opq")});
  CHECK(o.keys() == V{"a", "a-x", "a/c", "a/c/new"});
}

TEST_CASE("symlinks followed in one lookup are counted in all, not per nesting level") {
  // l_k -> l_{k-1}/l_{k-1}: each level doubles the links a lookup follows
  // (2^39 for l39); 40 in all end it at once, as the kernel would.
  Merge t;
  std::vector<MergeEntry> links{sym("l0", ".")};
  for (int k = 1; k < 40; ++k)
    links.push_back(sym("l" + std::to_string(k), "l" + std::to_string(k - 1) + "/l" + std::to_string(k - 1)));
  t.layer(links);
  CHECK_THAT(refusal(t, file("l39/f")), Catch::Contains("more than 40 followed"));
  CHECK_THAT(refusal(t, file("l6/f")), Catch::Contains("more than 40 followed"));  // 63 links
  t.layer({file("l4/f")});  // 31 links: fine, and lands at the top
  CHECK(t.type("f") == S_IFREG);
}
