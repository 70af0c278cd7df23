// The user's image store (host): content-addressed blobs shared by images,
// images by name, writes atomic and locked (layout: store/layout.hpp).
// Work in progress under tmp/ holds a lock; what nobody holds is debris of
// a killed run.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/lock.hpp"
#include "store/root.hpp"

namespace rt::app {

using store::Root;

struct ImageInfo {
  std::string name;
  std::string dir;
  std::string ref;              // where it came from
  std::string manifest_digest;  // empty for imports without one
  std::string config_digest;
  uint64_t size = 0;      // bytes of the layers' files
  std::string created;    // when it was stored (UTC, ISO 8601)
  bool squashfs = false;  // kept as one SquashFS file (kSquashFile)
};

// A directory under ROOT/tmp that is removed unless committed. The lock
// beside it tells a later run that it is not debris.
class WorkDir {
public:
  WorkDir(const std::string& tmp_root, const std::string& what);
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }  // committed: nothing to remove

private:
  std::string path_;
  std::string lock_path_;
  std::optional<app::FileLock> lock_;
};

class Store {
public:
  // `storage`: --storage, empty for the default (store_path).
  // Opens and checks the store (store::Root), creates the layout (mode
  // 0700) if needed and clears debris of killed runs (a failure there is
  // a warning: it must not stop unrelated commands).
  explicit Store(const std::string& storage);
  // The store when it exists (checked the same way), without making it:
  // for the commands that only read or remove.
  static std::optional<Store> existing(const std::string& storage);

  const std::string& root() const { return root_.path(); }
  const Root& dir() const { return root_; }
  std::string tmp_dir() const { return root_.sub(store::kTmpDir); }
  std::string blob_path(const std::string& digest) const;  // validates the digest
  bool has_blob(const std::string& digest) const;
  std::string image_dir(const std::string& name) const;

  // Serialises writers of one image name (two pulls of one image: the
  // second waits, then finds it done).
  app::FileLock lock_name(const std::string& name) const;

  // Moves a finished bundle into place as `name`, atomically replacing an
  // existing image (renameat2 RENAME_EXCHANGE), then removes the old one.
  void commit_image(const std::string& name, WorkDir& staged);
  // Moves a verified blob file into the cache.
  void commit_blob(const std::string& digest, const std::string& file);

  std::optional<ImageInfo> info(const std::string& name) const;
  std::vector<ImageInfo> list() const;
  void remove(const std::string& name);
  // Removes blobs no image refers to and debris; returns bytes freed. Only
  // names of the store's own form are removed, and no symlink is followed.
  uint64_t prune(size_t* blobs_removed = nullptr, size_t* debris_removed = nullptr);

private:
  explicit Store(Root root);
  size_t clear_debris() const;  // how many pieces it removed
  Root root_;
};

// Removes the images staged for jobs that have ended (squeue --me; without
// squeue, those untouched for a day); returns how many jobs' (stage.cpp).
size_t prune_staged(Store& store);

}  // namespace rt::app
