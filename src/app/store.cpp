// The user's image store (host).
#include "app/store.hpp"

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
#include "util/digest.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::app {

// The store's layout and names (store/): this is their writer.
using namespace rt::store;
namespace {

void make_dir(const std::string& p) {
  if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", p};
}

// The names in the store's directory `rel`, sorted (opened by Root::dir:
// no symlink followed, the caller's own).
std::vector<std::string> list_dir(const Root& root, const char* rel) {
  util::UniqueFd dir = root.dir(rel, false);
  if (!dir) return {};
  auto out = util::list_names(dir.get(), root.sub(rel));
  std::sort(out.begin(), out.end());
  return out;
}

// A work piece's lock under tmp/: WHAT.HEX16.lock (WorkDir).
bool is_work_lock(const std::string& n) {
  constexpr size_t kSuffix = 1 + 16 + 5;  // ".HEX16.lock"
  if (n.size() <= kSuffix || !n.ends_with(".lock") || n[n.size() - kSuffix] != '.') return false;
  std::string what = n.substr(0, n.size() - kSuffix);
  return util::is_hex(n.substr(n.size() - kSuffix + 1, 16)) &&
         what.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}

std::string random_suffix() {
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(::getpid()));
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

}  // namespace

WorkDir::WorkDir(const std::string& tmp_root, const std::string& what) {
  std::string base = tmp_root + "/" + what + "." + random_suffix();
  lock_path_ = base + ".lock";
  lock_.emplace(lock_path_, app::FileLock::Mode::Exclusive);
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

Store::Store(const std::string& storage) : Store(*Root::open(store_path(storage), true)) {}

std::optional<Store> Store::existing(const std::string& storage) {
  auto root = Root::open(store_path(storage), false);
  if (!root) return std::nullopt;
  return Store(std::move(*root));
}

Store::Store(Root root) : root_(std::move(root)) {
  for (const char* d : {kBlobsDir, kImagesDir, kTmpDir, kLocksDir}) root_.dir(d, true);
  clear_debris();
}

size_t Store::clear_debris() const {
  // A work directory whose lock nobody holds belongs to a run that died.
  size_t removed = 0;
  try {
    util::UniqueFd tmp = root_.dir(kTmpDir, false);
    if (!tmp) return 0;
    for (const auto& n : util::list_names(tmp.get(), tmp_dir())) {
      if (!is_work_lock(n)) continue;
      std::string lock = tmp_dir() + "/" + n;
      auto l = app::FileLock::try_lock(lock, app::FileLock::Mode::Exclusive);
      if (!l.locked()) continue;
      std::string base = n.substr(0, n.size() - 5);
      util::remove_tree_at(tmp.get(), base + ".d", tmp_dir() + "/" + base + ".d");
      util::remove_tree_at(tmp.get(), base + ".blob", tmp_dir() + "/" + base + ".blob");
      ::unlinkat(tmp.get(), n.c_str(), 0);
      ++removed;
    }
  } catch (const Error& e) {
    util::warn(std::string("cannot clear what killed runs left in the store: ") + e.what());
  }
  return removed;
}

std::string Store::blob_path(const std::string& digest) const {
  return root_.sub(kBlobsDir) + "/" + util::digest_hex(digest, "blob");
}

bool Store::has_blob(const std::string& digest) const { return util::path_exists(blob_path(digest)); }

std::string Store::image_dir(const std::string& name) const { return root_.sub(kImagesDir) + "/" + escape_name(name); }

app::FileLock Store::lock_name(const std::string& name) const {
  return app::FileLock(root_.sub(kLocksDir) + "/" + escape_name(name) + ".lock", app::FileLock::Mode::Exclusive);
}

void Store::commit_image(const std::string& name, WorkDir& staged) {
  std::string dst = image_dir(name);
  if (::rename(staged.path().c_str(), dst.c_str()) == 0) {
    staged.release();
    return;
  }
  if (errno != EEXIST && errno != ENOTEMPTY) throw SysError{errno, "rename", staged.path(), dst};
  // Swap atomically: readers see the old image or the new one, never none.
  if (::syscall(SYS_renameat2, AT_FDCWD, staged.path().c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) != 0)
    throw SysError{errno, "renameat2(RENAME_EXCHANGE)", staged.path(), dst};
  // The work directory now holds the old image; its destructor removes it.
}

void Store::commit_blob(const std::string& digest, const std::string& file) {
  std::string dst = blob_path(digest);
  if (::rename(file.c_str(), dst.c_str()) != 0) throw SysError{errno, "rename", file, dst};
}

std::optional<ImageInfo> Store::info(const std::string& name) const {
  std::string dir = image_dir(name);
  auto text = util::read_regular_if_exists(dir + "/" + kMetaFile);
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
  for (const auto& d : list_dir(root_, kImagesDir)) {
    try {
      if (auto i = info(unescape_name(d))) out.push_back(std::move(*i));
    } catch (const Error& e) {  // one broken image (a FIFO for its metadata) hides no other
      util::warn(std::string(e.what()) + "; image `" + unescape_name(d) + "` left out");
    }
  }
  return out;
}

void Store::remove(const std::string& name) {
  auto lock = lock_name(name);
  std::string dir = image_dir(name);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error("no image `" + name + "` in store `" + root() + "`");
  // Move it out of sight first so that a half-removed image is never found.
  WorkDir trash(tmp_dir(), "rm");
  std::string target = trash.path() + "/image";
  if (::rename(dir.c_str(), target.c_str()) != 0) throw SysError{errno, "rename", dir, target};
}

uint64_t Store::prune(size_t* blobs_removed, size_t* debris_removed) {
  size_t blobs_count = 0;
  std::set<std::string> used;
  // Every image's blobs, read strictly: one that cannot be read stops the
  // prune rather than lose its layers.
  for (const auto& d : list_dir(root_, kImagesDir)) {
    auto text = util::read_regular_if_exists(image_dir(unescape_name(d)) + "/" + kMetaFile);
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
  util::UniqueFd blobs = root_.dir(kBlobsDir, false);
  for (const auto& hex : list_dir(root_, kBlobsDir)) {
    if (hex.size() != 64 || !util::is_hex(hex) || used.count("sha256:" + hex)) continue;
    struct stat st;
    if (::fstatat(blobs.get(), hex.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) freed += static_cast<uint64_t>(st.st_size);
    util::remove_tree_at(blobs.get(), hex, root_.sub(kBlobsDir) + "/" + hex);
    ++blobs_count;
  }
  size_t debris = clear_debris();
  if (blobs_removed) *blobs_removed = blobs_count;
  if (debris_removed) *debris_removed = debris;
  return freed;
}

}  // namespace rt::app
