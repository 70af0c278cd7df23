// rt site-store index: the index of a site image store, written by its
// administrators (host). What it writes is read by store/site.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "rt/error.hpp"
#include "rt/image.hpp"
#include "squash/sqfs.hpp"
#include "store/lookup.hpp"
#include "store/site.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

// The name a new file is listed under: its name without the extension
// (app-1.0.sqfs -> app-1.0).
std::string site_default_name(const std::string& file) {
  std::string base = util::base_name(file);
  for (const char* ext : {".sqfs", ".squashfs", ".sqsh", ".sif"})
    if (base.size() > std::string_view(ext).size() && base.ends_with(ext)) {
      base.resize(base.size() - std::string_view(ext).size());
      break;
    }
  return base;
}

// index.json written whole or not at all, readable by every user: a
// private temporary made with O_EXCL|O_NOFOLLOW, made 0644, synced, renamed.
void write_site_index(int dirfd, const std::string& dir, const std::string& text) {
  const std::string tmp = std::string(".") + store::kSiteIndexFile + "." + std::to_string(::getpid()) + ".tmp";
  const std::string shown = dir + "/" + tmp;
  util::UniqueFd fd(::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw SysError{errno, "open", shown};
  try {
    if (::fchmod(fd.get(), 0644) != 0) throw SysError{errno, "chmod", shown};
    util::write_all(fd.get(), text, shown);
    if (::fsync(fd.get()) != 0) throw SysError{errno, "fsync", shown};
    if (::renameat(dirfd, tmp.c_str(), dirfd, store::kSiteIndexFile) != 0)
      throw SysError{errno, "rename", shown, dir + "/" + store::kSiteIndexFile};
  } catch (...) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    throw;
  }
}

}  // namespace

std::vector<std::string> index_site_store(const std::string& given, const StoreOptions& o) {
  util::log_init(o.verbosity);
  const std::string dir = util::normalize_path(given, util::current_dir());
  const std::string index = dir + "/" + store::kSiteIndexFile;
  // What every user's rt would refuse is refused here first.
  if (std::string why = store::site_distrust(dir); !why.empty())
    throw Error("site store `" + dir + "`: " + why + "; every user's rt would refuse it",
                "make it and every directory above it writable by root alone");
  util::UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd) throw SysError{errno, "open", dir};
  // The names (and files in subdirectories) an earlier index gave are kept,
  // from an index users would read.
  std::map<std::string, std::string> named;  // file -> name
  try {
    if (auto old = store::read_site_index(dir))
      for (const auto& img : *old) named[img.file] = img.name;
  } catch (const Error& e) {
    util::warn(std::string(e.what()) + ": written anew, with names from the files' names");
  }
  std::vector<std::string> files;
  for (const auto& n : util::list_names(dfd.get(), dir)) {
    if (n == store::kSiteIndexFile || n.starts_with(".")) continue;
    struct stat st;
    if (::fstatat(dfd.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw SysError{errno, "stat", dir + "/" + n};
    if (S_ISLNK(st.st_mode)) {
      util::warn("`" + dir + "/" + n + "` is a symbolic link: not indexed (rt runs only files reached without one)");
      continue;
    }
    if (S_ISREG(st.st_mode)) files.push_back(n);
  }
  for (const auto& [file, name] : named)
    if (file.find('/') != std::string::npos) files.push_back(file);
  std::sort(files.begin(), files.end());

  nlohmann::json images = nlohmann::json::array();
  std::map<std::string, std::string> taken;  // name -> file
  std::vector<std::string> lines;
  for (const auto& file : files) {
    const std::string path = dir + "/" + file;
    if (std::string why = store::site_file_problem(file); !why.empty()) throw Error("`" + path + "`: its name " + why);
    util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) {
      if (errno == ENOENT && named.count(file)) {
        util::warn("`" + path + "`, listed by the old index, is gone: dropped");
        continue;
      }
      throw SysError{errno, "open", path};
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) throw SysError{errno, "stat", path};
    const squash::FileKind kind = S_ISREG(st.st_mode) ? squash::file_kind(path) : squash::FileKind::Other;
    if (kind == squash::FileKind::Other) {
      util::info("`" + path + "` is neither a SquashFS nor a SIF file: not indexed");
      continue;
    }
    if (std::string why = store::site_distrust(dir, file); !why.empty())
      throw Error(why + "; every user's rt would refuse it", "make it writable by root alone");
    const std::string name = named.count(file) ? named[file] : site_default_name(file);
    try {
      store::escape_name(name);
    } catch (const Error& e) {
      throw Error("`" + path + "`: " + e.what(), "rename the file, or give it a name in `" + index + "`");
    }
    if (auto [it, fresh] = taken.emplace(name, file); !fresh)
      throw Error("`" + dir + "/" + it->second + "` and `" + path + "` would both be named `" + name + "`",
                  "rename one of the files, or give it another name in `" + index + "`");
    const std::string digest = store::file_sha256(fd.get(), path);
    const char* format = kind == squash::FileKind::Sif ? "sif" : "sqfs";
    images.push_back({{"name", name},
                      {"file", file},
                      {"format", format},
                      {"size", static_cast<uint64_t>(st.st_size)},
                      {"digest", digest}});
    lines.push_back(name + "  " + file + "  " + format + "  " + util::human_bytes(static_cast<uint64_t>(st.st_size)) +
                    "  " + digest);
  }
  std::sort(images.begin(), images.end(),
            [](const nlohmann::json& a, const nlohmann::json& b) { return a["name"] < b["name"]; });
  const std::string text = nlohmann::json{{"version", 1}, {"images", images}}.dump(2) + "\n";
  store::parse_site_index(text, dir);  // what users read back
  write_site_index(dfd.get(), dir, text);
  lines.push_back("wrote `" + index + "`: " + std::to_string(images.size()) +
                  (images.size() == 1 ? " image" : " images"));
  return lines;
}

}  // namespace rt
