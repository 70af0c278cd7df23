// Merging an image's layers into the tar stream of its final tree, in
// memory, so that a SquashFS file can be written from the layer streams
// with no unpacked tree on disk (host).
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "image/unpack.hpp"

struct archive;

namespace rt::image {

class Flattener {
public:
  explicit Flattener(std::string image_name) : image_(std::move(image_name)) {}

  // Pass 1, layer by layer in order: reads the headers and applies the
  // same rules as unpacking to a directory (whiteouts, replacements, paths
  // through symlinks resolved inside the image, .. and absolute paths and
  // hard links out of the image refused, device nodes skipped).
  void scan_layer(const image::ReadFn& read, const std::string& layer);

  // Pass 2: `out` (a libarchive writer) receives every directory, then each
  // layer's surviving entries as emit_layer is called in order, then the
  // hard links and any extra files at finish().
  void begin(archive* out);
  void emit_layer(const image::ReadFn& read, const std::string& layer, archive* out);
  void finish(archive* out, const std::map<std::string, std::string>& extra_files);

  size_t entries() const { return nodes_.size(); }

private:
  struct Node {
    int layer = -1;  // -1: a directory made implicitly
    uint64_t index = 0;
    unsigned type = 0;  // AE_IF*
    unsigned perm = 0755;
    int64_t mtime = 0;
    std::string link;  // symlink target, or hard link target (a key)
  };
  std::string resolve(const std::vector<std::string>& comps, size_t upto, const std::string& where, int depth = 0);
  void erase_tree(const std::string& key);
  void ensure_parents(const std::string& key, const std::string& where);
  void write_header(archive* out, const std::string& key, const Node& n, int64_t size);

  std::string image_;
  std::map<std::string, Node> nodes_;  // key: path inside the image, no leading '/'
  std::set<std::string> this_layer_;
  int layer_no_ = -1;
  int emitted_ = 0;
  std::map<std::pair<int, uint64_t>, std::string> keep_;  // (layer, index) -> key, for pass 2
  bool warned_devices_ = false;
};

} // namespace rt::image
