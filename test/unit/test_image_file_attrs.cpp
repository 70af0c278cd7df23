// Set-id bits and extended attributes a rootless tree cannot hold on disk:
// recorded by the unpacker, kept in a bundle, given back to layers made
// from the tree, moved to and from the disk of a build's tree.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "image/file_attrs.hpp"
#include "image/tar_filter.hpp"
#include "image/tree_diff.hpp"
#include "image/unpack.hpp"
#include "rt/error.hpp"
#include "temp_dir.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"

using namespace rt;
using image::AttrMap;
using image::FileAttrs;

namespace {

struct Entry {
  std::string path;
  unsigned type;  // AE_IF*
  unsigned perm;
  image::Xattrs xattrs;
};

// A tar stream of `entries` (files hold "x").
std::string tar_of(const std::vector<Entry>& entries) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open(
      a, &out, nullptr,
      [](archive*, void* o, const void* b, size_t n) -> la_ssize_t {
        static_cast<std::string*>(o)->append(static_cast<const char*>(b), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  for (const auto& x : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, x.path.c_str());
    archive_entry_set_filetype(e, x.type);
    archive_entry_set_perm(e, x.perm);
    archive_entry_set_size(e, x.type == AE_IFREG ? 1 : 0);
    for (const auto& [n, v] : x.xattrs) archive_entry_xattr_add_entry(e, n.c_str(), v.data(), v.size());
    archive_write_header(a, e);
    if (x.type == AE_IFREG) archive_write_data(a, "x", 1);
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

image::ReadFn reader_of(std::string bytes) {
  auto s = std::make_shared<std::string>(std::move(bytes));
  auto at = std::make_shared<size_t>(0);
  return [s, at](void* buf, size_t n) {
    n = std::min(n, s->size() - *at);
    std::memcpy(buf, s->data() + *at, n);
    *at += n;
    return n;
  };
}

// path -> attributes of the entries of a tar stream that have any.
AttrMap attrs_in(image::ReadFn read) {
  AttrMap out;
  image::for_each_tar_entry(read, "test", "layer", [&](archive*, archive_entry* e, uint64_t) {
    FileAttrs a = image::attrs_of(e);
    if (!a.empty()) out[image::attr_key(archive_entry_pathname(e))] = a;
  });
  return out;
}

// The attributes in the layer write_tree_layer makes of the tree at
// `rootfd` since `before`, written to `file`.
AttrMap layer_attrs(int rootfd, const std::string& root, image::TreeSnapshot& before, AttrMap& kept,
                    const std::string& file) {
  {
    util::UniqueFd out = util::open_fd(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    image::write_tree_layer(rootfd, root, before, out.get(), &kept);
  }
  util::UniqueFd in = util::open_fd(file, O_RDONLY);
  return attrs_in([&](void* b, size_t n) { return util::read_some(in.get(), b, n, file); });
}

// A map as text, for comparisons Catch can show.
std::string shown(const AttrMap& m) {
  std::string out;
  for (char c : image::encode_attrs(m)) out += c ? std::string(1, c) : std::string(" | ");
  return out;
}

unsigned mode_of(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

const std::string kCapV2 = std::string("\x01\x00\x00\x02\x00\x20\x00\x00", 8) + std::string(12, '\0');

}  // namespace

TEST_CASE("kept attributes round-trip any name and value") {
  AttrMap m;
  m["usr/bin/passwd"] = {S_ISUID, {}};
  m[std::string("odd\nname \xff")] = {S_ISGID, {{"user.a", std::string("v\0w", 3)}, {"security.capability", kCapV2}}};
  m["nothing"] = {};  // empty records are not written
  const std::string bytes = image::encode_attrs(m);
  m.erase("nothing");
  CHECK(shown(image::decode_attrs(bytes, "f")) == shown(m));
  CHECK(image::decode_attrs("", "f").empty());
  CHECK_THROWS_WITH(image::decode_attrs(bytes.substr(0, bytes.size() - 3), "BUNDLE/file-attrs"),
                    Catch::Contains("BUNDLE/file-attrs") && Catch::Contains("damaged"));
  CHECK_THROWS_WITH(image::decode_attrs(std::string("a\0x9\0", 5) + "0" + std::string(1, '\0'), "f"),
                    Catch::Contains("not a number"));
}

TEST_CASE("a capability written in a user namespace is kept as the image's root's") {
  std::string v3 =
      std::string("\x01\x00\x00\x03\x00\x20\x00\x00", 8) + std::string(12, '\0') + std::string("\xe9\x03\x00\x00", 4);
  CHECK(image::portable_capability(v3) == kCapV2);
  CHECK(image::portable_capability(kCapV2) == kCapV2);
  CHECK(image::portable_capability("short") == "short");
}

TEST_CASE("the unpacker keeps set-id bits and attributes beside the tree, never on disk") {
  TempDir t;
  const std::string root = t.path + "/rootfs";
  std::filesystem::create_directories(root);
  image::TreeWriter w(root, "test");
  w.apply_layer(reader_of(tar_of({{"bin/", AE_IFDIR, 0755, {}},
                                  {"bin/su", AE_IFREG, 04755, {}},
                                  {"bin/ping", AE_IFREG, 0755, {{"security.capability", kCapV2}}},
                                  {"bin/old", AE_IFREG, 06755, {}},
                                  {"mail/", AE_IFDIR, 02775, {{"user.dir", "d"}}}})),
                "one");
  w.apply_layer(reader_of(tar_of({{"bin/.wh.old", AE_IFREG, 0644, {}},  // removed
                                  {"bin/su", AE_IFREG, 0755, {}}})),    // replaced without the bit
                "two");
  w.finish();
  CHECK(shown(w.attrs()) ==
        shown(AttrMap{{"bin/ping", {0, {{"security.capability", kCapV2}}}}, {"mail", {S_ISGID, {{"user.dir", "d"}}}}}));
  CHECK(mode_of(root + "/mail") == 0775);
  CHECK(mode_of(root + "/bin/su") == 0755);

  image::write_attrs(t.path, w.attrs());
  CHECK(shown(image::read_attrs(t.path)) == shown(w.attrs()));
  image::write_attrs(t.path, {});
  CHECK_FALSE(std::filesystem::exists(t.path + "/" + image::kAttrsFile));

  SECTION("a tar of the tree gets them back through the filter") {
    AttrMap kept = w.attrs();
    kept["bin/su"] = {S_ISUID, {}};
    std::string tree = tar_of({{"./bin/", AE_IFDIR, 0755, {}},
                               {"./bin/su", AE_IFREG, 0755, {}},
                               {"./bin/ping", AE_IFREG, 0755, {}},
                               {"./mail/", AE_IFDIR, 0775, {}}});
    CHECK(shown(attrs_in(image::filtered(reader_of(tree), {}, kept))) == shown(kept));
  }
}

TEST_CASE("a build's tree: set-id bits on its disk, attributes kept for what no step changed") {
  TempDir t;
  const std::string root = t.path + "/rootfs";
  std::filesystem::create_directories(root + "/bin");
  for (const char* f : {"su", "ping", "tool"}) std::ofstream(root + "/bin/" + f) << "x";
  util::UniqueFd rootfd = util::open_fd(root, O_PATH | O_DIRECTORY);
  AttrMap attrs{{"bin/su", {S_ISUID, {}}}, {"bin/ping", {0, {{"user.cap", "c"}}}}};

  image::setid_to_disk(rootfd.get(), root, attrs);
  CHECK(mode_of(root + "/bin/su") == (04000 | mode_of(root + "/bin/tool")));
  CHECK(shown(attrs) == shown(AttrMap{{"bin/ping", {0, {{"user.cap", "c"}}}}}));

  image::TreeSnapshot before = image::TreeSnapshot::take(rootfd.get(), root);
  // A step: a new set-id file, one taken away, the attributed file removed.
  std::ofstream(root + "/bin/new") << "n";
  REQUIRE(::chmod((root + "/bin/new").c_str(), 02755) == 0);
  REQUIRE(::chmod((root + "/bin/su").c_str(), 0755) == 0);
  std::filesystem::remove(root + "/bin/ping");
  CHECK(shown(layer_attrs(rootfd.get(), root, before, attrs, t.path + "/l.tar")) ==
        shown(AttrMap{{"bin/new", {S_ISGID, {}}}}));
  CHECK(shown(attrs) == shown(AttrMap{{"bin/new", {S_ISGID, {}}}}));  // ping's went with it

  // Becoming a store image: the bits leave the disk for the records.
  image::setid_from_disk(rootfd.get(), root, {"bin/new", "bin/su"}, attrs);
  CHECK(mode_of(root + "/bin/new") == 0755);
  CHECK(shown(attrs) == shown(AttrMap{{"bin/new", {S_ISGID, {}}}}));

  SECTION("a whole tree as one layer takes the records for every entry") {
    image::TreeSnapshot none;
    CHECK(shown(layer_attrs(rootfd.get(), root, none, attrs, t.path + "/w.tar")) ==
          shown(AttrMap{{"bin/new", {S_ISGID, {}}}}));
  }
}
