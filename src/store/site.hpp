// The site's image store (host): directories the administrators fill with
// SquashFS and SIF files and an index, read by every user after their own
// store, never written by them (store.site in the site configuration).
// Light: the per-rank path reads it, but only for a name the user's store
// lacks.
//
//   DIR/index.json   {"version": 1, "images": [{"name": "app:1.0",
//                    "file": "app-1.0.sqfs", "format": "sqfs" | "sif",
//                    "size": BYTES, "digest": "sha256:HEX"}, ...]}
//                    written by rt site-store index DIR (app/site_store)
//   DIR/FILE         the images, below DIR, reached without a symlink
//
// Trusted only when nobody but root and the caller can change the
// directory (nor any directory above it), the index or the file (nor any
// directory between them and DIR). An image's file is hashed once per
// version of it and user (the record in the user's store,
// store/verified.hpp), not at every start.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/root.hpp"

namespace rt::store {

inline constexpr const char* kSiteIndexFile = "index.json";

struct SiteImage {
  std::string name;    // as the index names it (escape_name's rules)
  std::string file;    // relative to dir
  std::string format;  // "sqfs" or "sif"
  uint64_t size = 0;
  std::string digest;  // "sha256:HEX" of the file
  std::string dir;     // the site directory, as configured
  std::string path() const { return dir + "/" + file; }
  std::string index() const { return dir + "/" + kSiteIndexFile; }
};

// Why `file` may not name an image of an index: absolute, a `..`, `.` or
// empty component, a control character, the index itself. "" when it may.
std::string site_file_problem(std::string_view file);

// The entries of index `text` of directory `dir` (pure). Throws rt::Error
// naming the index, the entry and the reason: a bad name, a file outside
// the directory, an unknown format, a bad size or digest, a name twice.
std::vector<SiteImage> parse_site_index(std::string_view text, const std::string& dir);

// Why a site store cannot be trusted, naming the file and the reason; ""
// when it can. With `rel` empty: the directory `dir` (absolute) is
// writable by its group or others, or it or a directory above it could be
// changed by another user than root and the caller (store::foreign_path).
// Otherwise each component of `rel` (site_file_problem's rules) below the
// checked `dir`: a symbolic link, another user's, or writable by its group
// or others. A missing component is no reason (opening it says so).
std::string site_distrust(const std::string& dir, std::string_view rel = {});

// DIR's index, after the directory and the index are checked; nullopt when
// DIR has no index (a file system not mounted on this node). Throws
// rt::Error naming the file and the reason.
std::optional<std::vector<SiteImage>> read_site_index(const std::string& dir);

// The image named `name` (or a form of it, name_forms) in the first of
// `dirs` whose index has it; nullopt when none has.
std::optional<SiteImage> find_site_image(const std::vector<std::string>& dirs, const std::string& name);

// The file of `image` (as read_site_index gave it), checked: trusted as
// above, a regular file of the index's size and digest. The digest is
// computed once per version of the file (device, inode, size, times) and
// index digest, then remembered in `root`; ranks of a node take turns, so
// one of them reads the file. Returns its path; throws rt::Error naming
// the image, the file, the index and, for a file changed since it was
// indexed, both digests.
std::string verify_site_image(const Root& root, const SiteImage& image);

// "sha256:HEX" of what `fd` reads to its end (libsodium); `name` for errors.
std::string file_sha256(int fd, const std::string& name);

}  // namespace rt::store
