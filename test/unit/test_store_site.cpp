#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rt/error.hpp"
#include "store/root.hpp"
#include "store/site.hpp"
#include "store/verified.hpp"
#include "temp_dir.hpp"
#include "util/fs.hpp"

using namespace rt::store;
using Catch::Matchers::Contains;

namespace {

using Json = nlohmann::json;
const std::string kSiteDigest = "sha256:" + std::string(64, 'a');

// One entry of an index, each field any JSON value.
Json site_entry(Json name, Json file, Json format = "sqfs", Json size = 4096, Json digest = kSiteDigest) {
  return {{"name", name}, {"file", file}, {"format", format}, {"size", size}, {"digest", digest}};
}

std::string site_index_of(std::vector<Json> entries) { return Json{{"version", 1}, {"images", entries}}.dump(); }

// The message parse_site_index gives for an index of these entries, ""
// when it takes them.
std::string site_refusal(std::vector<Json> entries) {
  try {
    parse_site_index(site_index_of(std::move(entries)), "/site");
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "";
}

void write_site_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("a site index lists images by name, file, format, size and digest") {
  auto images =
      parse_site_index(site_index_of({site_entry("app:1.0", "app-1.0.sqfs"), site_entry("tools/x", "sub/x.sif", "sif", 12)}), "/site");
  REQUIRE(images.size() == 2);
  CHECK(images[0].name == "app:1.0");
  CHECK(images[0].path() == "/site/app-1.0.sqfs");
  CHECK(images[0].index() == "/site/index.json");
  CHECK(images[0].format == "sqfs");
  CHECK(images[0].size == 4096);
  CHECK(images[0].digest == kSiteDigest);
  CHECK(images[1].name == "tools/x");
  CHECK(images[1].format == "sif");
  CHECK(images[1].size == 12);
  CHECK(images[1].path() == "/site/sub/x.sif");
  CHECK(parse_site_index(R"({"images": []})", "/site").empty());
}

TEST_CASE("a site index entry whose file leaves the directory is refused, naming it") {
  CHECK_THAT(site_refusal({site_entry("a", "../x")}),
             Contains("site store index `/site/index.json`, entry 1 (`a`): file `../x` leaves the directory"));
  CHECK_THAT(site_refusal({site_entry("a", "sub/../../x")}), Contains("leaves the directory"));
  CHECK_THAT(site_refusal({site_entry("a", "/etc/shadow")}), Contains("is an absolute path"));
  CHECK_THAT(site_refusal({site_entry("a", "./x")}), Contains("`.` component"));
  CHECK_THAT(site_refusal({site_entry("a", "a//x")}), Contains("empty or `.` component"));
  CHECK_THAT(site_refusal({site_entry("a", "x/")}), Contains("empty or `.` component"));
  CHECK_THAT(site_refusal({site_entry("a", "")}), Contains("is empty"));
  CHECK_THAT(site_refusal({site_entry("a", "x\ny")}), Contains("control character"));
  CHECK_THAT(site_refusal({site_entry("a", "index.json")}), Contains("the index itself"));
  CHECK_THAT(site_refusal({site_entry("a", 7)}), Contains("field `file` is not a string"));
  CHECK(site_refusal({site_entry("a", "sub/x..y.sqfs")}).empty());
}

TEST_CASE("a site index entry with a bad name, format, size or digest is refused") {
  for (const char* name : {"../etc", "/abs", ".hidden", "a+b", ""})
    CHECK_THAT(site_refusal({site_entry(name, "x.sqfs")}), Contains("bad image name"));
  CHECK_THAT(site_refusal({site_entry("a\x01", "x.sqfs")}), Contains("control character"));
  CHECK_THAT(site_refusal({site_entry("a", "x.sqfs", "tar")}), Contains("format `tar` is neither sqfs nor sif"));
  for (const Json& size : {Json(-1), Json("12"), Json(1.5), Json()})
    CHECK_THAT(site_refusal({site_entry("a", "x.sqfs", "sqfs", size)}), Contains("field `size` is not a number of bytes"));
  for (const Json& bad :
       {Json("sha256:abc"), Json("sha512:" + std::string(64, 'a')), Json("sha256:" + std::string(64, 'A')),
        Json("sha256:" + std::string(63, 'a') + "g"), Json(""), Json()})
    CHECK_THAT(site_refusal({site_entry("a", "x.sqfs", "sqfs", 1, bad)}), Contains("is not sha256: and 64 lowercase hex digits"));
  CHECK_THAT(site_refusal({site_entry("a", "x.sqfs"), site_entry("a", "y.sqfs")}),
             Contains("entry 2 (`a`): the index names `a` twice"));
  CHECK_THAT(site_refusal({7}), Contains("entry 1: not a JSON object"));
  CHECK_THROWS_WITH(parse_site_index(R"({"version": 2, "images": []})", "/site"), Contains("version 2"));
  CHECK_THROWS_WITH(parse_site_index("[]", "/site"), Contains("not a JSON object"));
  CHECK_THROWS_WITH(parse_site_index("{", "/site"),
                    Contains("site store index `/site/index.json` is not a JSON object"));
  CHECK_THROWS_WITH(parse_site_index(R"({"images": {}})", "/site"), Contains("`images`"));
}

TEST_CASE("a site store another user could change is not trusted") {
  TempDir t;
  const std::string site = t.path + "/site";
  ::mkdir(site.c_str(), 0755);
  ::mkdir((site + "/sub").c_str(), 0755);
  write_site_file(site + "/sub/app.sqfs", "x");
  ::chmod((site + "/sub/app.sqfs").c_str(), 0644);
  CHECK(site_distrust(site).empty());
  CHECK(site_distrust(site, "sub/app.sqfs").empty());
  CHECK(site_distrust(site, "sub/missing.sqfs").empty());
  // The file, a directory between it and the site directory, the site
  // directory (even sticky), a directory above it.
  ::chmod((site + "/sub/app.sqfs").c_str(), 0664);
  CHECK_THAT(site_distrust(site, "sub/app.sqfs"),
             Contains("`" + site + "/sub/app.sqfs` is writable by other users (mode 0664)"));
  ::chmod((site + "/sub/app.sqfs").c_str(), 0644);
  ::chmod((site + "/sub").c_str(), 0757);
  CHECK_THAT(site_distrust(site, "sub/app.sqfs"),
             Contains("`" + site + "/sub` is writable by other users (mode 0757)"));
  ::chmod((site + "/sub").c_str(), 0755);
  ::chmod(site.c_str(), 01777);
  CHECK_THAT(site_distrust(site), Contains("`" + site + "` is writable by other users (mode 1777)"));
  ::chmod(site.c_str(), 0755);
  ::chmod(t.path.c_str(), 0777);
  CHECK_THAT(site_distrust(site), Contains("lies in `" + t.path + "`, a directory other users can write"));
  ::chmod(t.path.c_str(), 0700);
  // A symbolic link below the directory, wherever it leads.
  ::symlink("sub", (site + "/link").c_str());
  CHECK_THAT(site_distrust(site, "link/app.sqfs"), Contains("`" + site + "/link` is a symbolic link"));
  ::symlink("app.sqfs", (site + "/sub/alias.sqfs").c_str());
  CHECK_THAT(site_distrust(site, "sub/alias.sqfs"), Contains("`" + site + "/sub/alias.sqfs` is a symbolic link"));
  // The site directory itself may be reached through one of the caller's.
  ::symlink(site.c_str(), (t.path + "/via").c_str());
  CHECK(site_distrust(t.path + "/via").empty());
}

TEST_CASE("a site image is found in the first directory that has it, by any form of its name") {
  TempDir t;
  for (const char* d : {"/one", "/two"}) ::mkdir((t.path + d).c_str(), 0755);
  write_site_file(t.path + "/one/index.json", site_index_of({site_entry("app:latest", "one.sqfs")}));
  write_site_file(t.path + "/two/index.json", site_index_of({site_entry("app:latest", "two.sqfs"), site_entry("other", "other.sqfs")}));
  const std::vector<std::string> dirs{t.path + "/missing", t.path + "/one", t.path + "/two"};
  CHECK(find_site_image(dirs, "app").value().path() == t.path + "/one/one.sqfs");
  CHECK(find_site_image(dirs, "docker.io/library/app:latest").value().file == "one.sqfs");
  CHECK(find_site_image(dirs, "other").value().file == "other.sqfs");
  CHECK(find_site_image({t.path + "/two"}, "app:latest").value().file == "two.sqfs");
  CHECK_FALSE(find_site_image(dirs, "absent").has_value());
  // One that cannot be trusted is refused, not passed over.
  ::chmod((t.path + "/two").c_str(), 0777);
  CHECK_THROWS_WITH(find_site_image(dirs, "absent"), Contains("site store `" + t.path + "/two` is not used: `" +
                                                              t.path + "/two` is writable by other users (mode 0777)"));
  ::chmod((t.path + "/two").c_str(), 0755);
  ::chmod((t.path + "/two/index.json").c_str(), 0646);
  CHECK_THROWS_WITH(find_site_image(dirs, "absent"),
                    Contains("/two/index.json` is writable by other users (mode 0646)"));
  ::chmod((t.path + "/two/index.json").c_str(), 0644);
  write_site_file(t.path + "/one/index.json", "{\"images\": [");
  CHECK_THROWS_WITH(find_site_image(dirs, "app"), Contains("`" + t.path + "/one/index.json` is not a JSON object"));
}

TEST_CASE("a site image is hashed once, and refused once its content differs from the index") {
  TempDir t;
  const std::string site = t.path + "/site";
  ::mkdir(site.c_str(), 0755);
  auto root = Root::open(t.path + "/store", true);
  REQUIRE(root);
  const std::string file = site + "/app.sqfs";
  write_site_file(file, std::string(8192, 'x'));
  rt::util::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  const std::string digest = file_sha256(fd.get(), file);
  CHECK(digest == "sha256:18f8d2eb4a387bbc1e37ec099a7326805739bc9c99ecf0f14b808a5bcb65bf49");  // sha256sum's
  SiteImage img{"app", "app.sqfs", "sqfs", 8192, digest, site};
  CHECK(verify_site_image(*root, img) == file);
  struct stat st;
  ::stat(file.c_str(), &st);
  CHECK(is_verified(*root, "site-image 1\n" + file + "\n" + digest + "\n" + file_identity(st)));
  // The same size, other bytes: the record no longer applies (the times of
  // change move, past the clock's tick), the digest differs.
  ::usleep(20000);
  write_site_file(file, std::string(8191, 'x') + "y");
  CHECK_THROWS_WITH(verify_site_image(*root, img), Contains(file) && Contains(site + "/index.json") &&
                                                       Contains(digest) && Contains("its content is sha256:"));
  write_site_file(file, std::string(10, 'x'));
  CHECK_THROWS_WITH(verify_site_image(*root, img), Contains("it has 10 bytes, the index says 8192"));
  // A symlink below the directory is never followed.
  write_site_file(t.path + "/elsewhere.sqfs", std::string(8192, 'x'));
  ::symlink((t.path + "/elsewhere.sqfs").c_str(), (site + "/link.sqfs").c_str());
  SiteImage linked{"link", "link.sqfs", "sqfs", 8192, digest, site};
  CHECK_THROWS_WITH(verify_site_image(*root, linked), Contains("is a symbolic link"));
}
