// Applying image layers (tar streams) to a directory tree, rootless and
// hostile-proof (host). libarchive parses; every write goes through rt's
// own *at() code with in-root resolution, so nothing lands outside the root.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "image/merge.hpp"
#include "rt/error.hpp"
#include "util/fd.hpp"

struct archive;
struct archive_entry;

namespace rt::image {

// Supplies the next bytes of an uncompressed tar stream into buf; returns
// the count, 0 at the end. May throw rt::Error (truncated, digest, ...).
using ReadFn = std::function<size_t(void* buf, size_t size)>;

struct UnpackStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;  // file contents written
  uint64_t devices_skipped = 0;
  uint64_t whiteouts = 0;
};

class TreeWriter {
public:
  // root: an existing, empty directory. max_bytes: refuse an image whose
  // files add up to more (decompression bombs); 0 means no limit.
  TreeWriter(const std::string& root, std::string image_name, uint64_t max_bytes = 0);

  // Applies one layer as image/merge decides: later entries replace
  // earlier ones, OCI whiteouts remove what lower layers made, paths go
  // through the image's symlinks inside the image. Throws rt::Error naming
  // the image, the layer, the entry and the reason.
  void apply_layer(const ReadFn& read, const std::string& layer_name);

  // Gives directories their final modes (they stay owner-writable while
  // layers are applied, so a 0555 directory can still be filled).
  void finish();

  const UnpackStats& stats() const { return stats_; }

  // What the layers give the final tree's files that the disk does not
  // hold (set-id bits, extended attributes): a bundle's file-attrs.
  AttrMap attrs() const;

private:
  void apply_entry(::archive* a, ::archive_entry* e, uint64_t index, const std::string& layer);
  int parent_fd(const std::vector<std::string>& comps, const std::string& layer, const std::string& path);
  void invalidate_parent_cache();
  void remove_key(const std::string& key);
  std::string err_prefix(const std::string& layer, const std::string& path) const;

  std::string root_path_;
  util::UniqueFd root_;
  std::string image_;
  uint64_t max_bytes_;
  UnpackStats stats_;
  LayerMerge merge_;
  std::string cached_parent_;
  util::UniqueFd cached_parent_fd_;
  bool warned_devices_ = false;
};

// Walks the entries of the tar stream `read` supplies, calling
// fn(archive, entry, index) for each, then reads the stream to its end
// (digests cover all of it, padding included). Errors name the image and
// the layer.
void for_each_tar_entry(const ReadFn& read, const std::string& image, const std::string& layer,
                        const std::function<void(::archive*, ::archive_entry*, uint64_t)>& fn);

// libarchive's text for the last error of `a`; never null (libarchive
// gives none for some failures).
std::string archive_error(::archive* a);

// A tar entry as image/merge takes it.
MergeEntry merge_entry_of(::archive_entry* e);

// The refusal of an image whose files add up to more than `max` bytes,
// naming where the limit was passed.
Error too_large(uint64_t max, const std::string& image, const std::string& layer, const std::string& path);

}  // namespace rt::image
