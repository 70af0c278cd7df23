// The site's image store (host); see site.hpp.
#include "store/site.hpp"

#include <fcntl.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "rt/error.hpp"
#include "store/layout.hpp"
#include "store/lookup.hpp"
#include "store/verified.hpp"
#include "util/digest.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::store {
namespace {

constexpr const char* kSiteTrustHint =
    "the site's administrators keep the directory, its index and its images writable by root alone, in "
    "directories nobody else can change, reached without a symbolic link; or remove the directory from "
    "store.site in the site configuration";

std::string changed_hint(const std::string& dir) {
  const std::string again = "rt site-store index " + dir;
  return "the file changed after it was indexed: the site's administrators restore it, or run " + again;
}

// Why one entry of a site store (lstat `st`) cannot be trusted, or "".
std::string entry_distrust(const std::string& path, const struct stat& st, uid_t me) {
  if (S_ISLNK(st.st_mode)) return "`" + path + "` is a symbolic link (nothing below the directory is reached by one)";
  if (st.st_uid != 0 && st.st_uid != me) return "`" + path + "` belongs to uid " + std::to_string(st.st_uid);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "`" + path + "` is writable by other users (mode " + mode_of(st.st_mode) + ")";
  return "";
}

}  // namespace

std::string site_file_problem(std::string_view file) {
  if (file.empty()) return "is empty";
  if (file.size() > 4096) return "is longer than 4096 bytes";
  if (file.front() == '/') return "is an absolute path";
  for (char c : file)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "has a control character";
  for (std::string_view part : util::split(file, '/')) {
    if (part == "..") return "leaves the directory (`..`)";
    if (part.empty() || part == ".") return "has an empty or `.` component";
  }
  if (file == kSiteIndexFile) return "is the index itself";
  return "";
}

std::vector<SiteImage> parse_site_index(std::string_view text, const std::string& dir) {
  const std::string index = dir + "/" + kSiteIndexFile;
  const std::string what = "site store index `" + index + "`";
  const nlohmann::json doc = util::parse_json_object(text, what);
  if (auto v = doc.find("version"); v != doc.end() && !(v->is_number_unsigned() && v->get<uint64_t>() == 1))
    throw Error(what + ": version " + v->dump() + " is not one this rt reads (1)", "a newer rt wrote it: re-index it");
  std::vector<SiteImage> out;
  std::set<std::string> names;
  size_t n = 0;
  for (const auto& e : util::json_array(doc, "images", what)) {
    ++n;
    const std::string entry = what + ", entry " + std::to_string(n);
    if (!e.is_object()) throw Error(entry + ": not a JSON object");
    SiteImage img;
    img.dir = dir;
    img.name = util::json_string(e, "name", entry);
    const std::string named = entry + " (`" + util::utf8_escaped(img.name) + "`)";
    try {
      escape_name(img.name);
    } catch (const Error& bad) {
      throw Error(named + ": " + bad.what());
    }
    img.file = util::json_string(e, "file", named);
    if (std::string why = site_file_problem(img.file); !why.empty())
      throw Error(named + ": file `" + util::utf8_escaped(img.file) + "` " + why);
    img.format = util::json_string(e, "format", named);
    if (img.format != "sqfs" && img.format != "sif")
      throw Error(named + ": format `" + util::utf8_escaped(img.format) + "` is neither sqfs nor sif");
    auto size = e.find("size");
    if (size == e.end() || !size->is_number_unsigned()) throw Error(named + ": field `size` is not a number of bytes");
    img.size = size->get<uint64_t>();
    img.digest = util::json_string(e, "digest", named);
    if (!util::is_valid_digest(img.digest))
      throw Error(named + ": digest `" + util::utf8_escaped(img.digest) +
                  "` is not sha256: and 64 lowercase hex digits");
    if (!names.insert(img.name).second) throw Error(named + ": the index names `" + img.name + "` twice");
    out.push_back(std::move(img));
  }
  return out;
}

std::string site_distrust(const std::string& dir, std::string_view rel) {
  const uid_t me = ::getuid();
  struct stat st;
  if (rel.empty()) {
    // The directory itself: not even a sticky one others may add to.
    if (::lstat(dir.c_str(), &st) == 0 && !S_ISLNK(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)))
      return "`" + dir + "` is writable by other users (mode " + mode_of(st.st_mode) + ")";
    return foreign_path(dir);
  }
  std::string at = dir;
  for (std::string_view part : util::split(rel, '/')) {
    at += "/" + std::string(part);
    if (::lstat(at.c_str(), &st) != 0) return "";
    if (std::string why = entry_distrust(at, st, me); !why.empty()) return why;
  }
  return "";
}

std::optional<std::vector<SiteImage>> read_site_index(const std::string& dir) {
  const std::string index = dir + "/" + kSiteIndexFile;
  auto refuse = [&](const std::string& why) {
    return Error("site store `" + dir + "` is not used: " + why, kSiteTrustHint);
  };
  if (std::string why = site_distrust(dir); !why.empty()) throw refuse(why);
  struct stat st;
  if (::lstat(index.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      util::info("site store `" + dir + "` has no " + kSiteIndexFile + ": passed over");
      return std::nullopt;
    }
    throw SysError{errno, "stat", index};
  }
  if (std::string why = entry_distrust(index, st, ::getuid()); !why.empty()) throw refuse(why);
  if (!S_ISREG(st.st_mode))
    throw Error("site store index `" + index + "` is not a regular file", "rt site-store index " + dir + " writes it");
  auto text = util::read_regular_if_exists(index, 4 << 20);
  if (!text) return std::nullopt;
  return parse_site_index(*text, dir);
}

std::optional<SiteImage> find_site_image(const std::vector<std::string>& dirs, const std::string& name) {
  const std::vector<std::string> forms = name_forms(name);
  for (const auto& dir : dirs) {
    auto images = read_site_index(dir);
    if (!images) continue;
    for (const auto& form : forms)
      for (const auto& img : *images)
        if (img.name == form) return img;
  }
  return std::nullopt;
}

std::string file_sha256(int fd, const std::string& name) {
  if (::sodium_init() < 0) throw Error("libsodium cannot start");
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::string buf(1 << 20, '\0');
  for (;;) {
    const size_t n = util::read_some(fd, buf.data(), buf.size(), name);
    if (n == 0) break;
    crypto_hash_sha256_update(&state, reinterpret_cast<const unsigned char*>(buf.data()), n);
  }
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state, out);
  return "sha256:" + util::hex(out, sizeof out);
}

std::string verify_site_image(const Root& root, const SiteImage& image) {
  const std::string path = image.path();
  const std::string what = "site image `" + image.name + "`";
  if (std::string why = site_distrust(image.dir, image.file); !why.empty())
    throw Error(what + " is not used: " + why, kSiteTrustHint);
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) throw SysError{errno, "open", path};
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw SysError{errno, "stat", path};
  if (!S_ISREG(st.st_mode)) throw Error(what + ": `" + path + "` is not a regular file");
  const std::string differs = what + ": `" + path + "` does not match the index `" + image.index() + "`: ";
  if (static_cast<uint64_t>(st.st_size) != image.size)
    throw Error(
        differs + "it has " + std::to_string(st.st_size) + " bytes, the index says " + std::to_string(image.size),
        changed_hint(image.dir));
  const std::string identity = "site-image 1\n" + path + "\n" + image.digest + "\n" + file_identity(st);
  if (is_verified(root, identity)) return path;
  // The node's ranks take turns: the first reads the file, the others then
  // find its record.
  util::UniqueFd dir = root.dir(kVerifiedDir, true);
  util::UniqueFd lock(::openat(dir.get(), "site.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!lock) throw SysError{errno, "open", root.sub(kVerifiedDir) + "/site.lock"};
  while (::flock(lock.get(), LOCK_EX) != 0)
    if (errno != EINTR) throw SysError{errno, "flock", root.sub(kVerifiedDir) + "/site.lock"};
  if (is_verified(root, identity)) return path;
  util::info(what + ": computing the digest of `" + path + "` (" + util::human_bytes(image.size) +
             "), once per version of the file");
  const std::string digest = file_sha256(fd.get(), path);
  if (digest != image.digest)
    throw Error(differs + "its content is " + digest + ", the index says " + image.digest, changed_hint(image.dir));
  remember_verified(root, identity, path + "\n" + image.digest + "\n");
  util::info(what + ": `" + path + "` matches " + image.digest + " of `" + image.index() + "`");
  return path;
}

}  // namespace rt::store
