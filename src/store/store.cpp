// The user's image store (host).
#include "store/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "rt/error.hpp"
#include "store/lookup.hpp"
#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace rt::store {
namespace {

void make_dir(const std::string& p) {
  if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) throw SysError("mkdir", p);
}

std::vector<std::string> list_dir(const std::string& p) {
  int fd = ::open(p.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    throw SysError("open", p);
  }
  util::UniqueFd dir(fd);
  auto out = util::list_names(fd, p);
  std::sort(out.begin(), out.end());
  return out;
}

std::string random_suffix() {
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(::getpid()));
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

} // namespace

WorkDir::WorkDir(const std::string& tmp_root, const std::string& what) {
  std::string base = tmp_root + "/" + what + "." + random_suffix();
  lock_path_ = base + ".lock";
  lock_.emplace(lock_path_, util::FileLock::Mode::Exclusive);
  path_ = base + ".d";
  make_dir(path_);
}

WorkDir::~WorkDir() {
  try {
    if (!path_.empty()) util::remove_tree(path_);
    ::unlink(lock_path_.c_str());
  } catch (...) {
  }
}

Store::Store(std::string root) : root_(util::normalize_path(root, "/")) {
  make_dir(root_);
  for (const char* d : {"/blobs", "/blobs/sha256", "/images", "/tmp", "/locks"}) make_dir(root_ + d);
  clear_debris();
}

void Store::clear_debris() const {
  // A work directory whose lock nobody holds belongs to a run that died.
  for (const auto& n : list_dir(tmp_dir())) {
    if (!n.ends_with(".lock")) continue;
    std::string lock = tmp_dir() + "/" + n;
    auto l = util::FileLock::try_lock(lock, util::FileLock::Mode::Exclusive);
    if (!l.locked()) continue;
    std::string base = lock.substr(0, lock.size() - 5);
    util::remove_tree(base + ".d");
    util::remove_tree(base + ".blob");
    ::unlink(lock.c_str());
  }
}

std::string Store::blob_path(const std::string& digest) const {
  return root_ + "/blobs/sha256/" + util::digest_hex(digest, "blob");
}

bool Store::has_blob(const std::string& digest) const { return util::path_exists(blob_path(digest)); }

std::string Store::image_dir(const std::string& name) const {
  return root_ + "/" + kImagesDir + "/" + escape_name(name);
}

util::FileLock Store::lock_name(const std::string& name) const {
  return util::FileLock(root_ + "/locks/" + escape_name(name) + ".lock", util::FileLock::Mode::Exclusive);
}

void Store::commit_image(const std::string& name, WorkDir& staged) {
  std::string dst = image_dir(name);
  if (::rename(staged.path().c_str(), dst.c_str()) == 0) {
    staged.release();
    return;
  }
  if (errno != EEXIST && errno != ENOTEMPTY) throw SysError("rename", staged.path(), dst);
  // Swap atomically: readers see the old image or the new one, never none.
  if (::syscall(SYS_renameat2, AT_FDCWD, staged.path().c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) != 0)
    throw SysError("renameat2(RENAME_EXCHANGE)", staged.path(), dst);
  // The work directory now holds the old image; its destructor removes it.
}

void Store::commit_blob(const std::string& digest, const std::string& file) {
  std::string dst = blob_path(digest);
  if (::rename(file.c_str(), dst.c_str()) != 0) throw SysError("rename", file, dst);
}

std::optional<ImageInfo> Store::info(const std::string& name) const {
  std::string dir = image_dir(name);
  auto text = util::read_file_if_exists(dir + "/" + kMetaFile);
  if (!text) return std::nullopt;
  ImageInfo i;
  i.name = name;
  i.dir = dir;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_object()) {
    i.ref = j.value("ref", "");
    i.manifest_digest = j.value("manifest_digest", "");
    i.config_digest = j.value("config_digest", "");
    i.size = j.value("size", uint64_t{0});
    i.created = j.value("created", "");
  }
  i.squashfs = util::path_exists(dir + "/" + kSquashFile);
  return i;
}

std::vector<ImageInfo> Store::list() const {
  std::vector<ImageInfo> out;
  for (const auto& d : list_dir(root_ + "/" + kImagesDir))
    if (auto i = info(unescape_name(d))) out.push_back(std::move(*i));
  return out;
}

void Store::remove(const std::string& name) {
  auto lock = lock_name(name);
  std::string dir = image_dir(name);
  if (!util::is_directory(dir)) throw Error("no image `" + name + "` in store `" + root_ + "`");
  // Move it out of sight first so that a half-removed image is never found.
  WorkDir trash(tmp_dir(), "rm");
  std::string target = trash.path() + "/image";
  if (::rename(dir.c_str(), target.c_str()) != 0) throw SysError("rename", dir, target);
}

uint64_t Store::prune() {
  std::set<std::string> used;
  for (const auto& i : list()) {
    auto text = util::read_file_if_exists(i.dir + "/" + kMetaFile);
    if (!text) continue;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) continue;
    for (const char* k : {"manifest_digest", "config_digest"})
      if (j.contains(k) && j[k].is_string()) used.insert(j[k].get<std::string>());
    if (j.contains("layers") && j["layers"].is_array())
      for (const auto& l : j["layers"])
        if (l.is_string()) used.insert(l.get<std::string>());
  }
  uint64_t freed = 0;
  std::string dir = root_ + "/blobs/sha256";
  for (const auto& hex : list_dir(dir)) {
    if (used.count("sha256:" + hex)) continue;
    struct stat st;
    std::string p = dir + "/" + hex;
    if (::lstat(p.c_str(), &st) == 0) freed += static_cast<uint64_t>(st.st_size);
    util::remove_tree(p);
  }
  clear_debris();
  return freed;
}

} // namespace rt::store
