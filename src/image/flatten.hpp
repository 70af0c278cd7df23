// Merging an image's layers into the tar stream of its final tree, in
// memory, so that a SquashFS file can be written from the layer streams
// with no unpacked tree on disk (host).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "image/merge.hpp"
#include "image/unpack.hpp"

struct archive;

namespace rt::image {

class Flattener {
public:
  // max_bytes: refuse an image whose files add up to more, counted by
  // their apparent sizes (a sparse file's holes count); 0 means no limit.
  explicit Flattener(std::string image_name, uint64_t max_bytes = 0)
      : image_(image_name), max_bytes_(max_bytes), merge_(std::move(image_name)) {}

  // Pass 1, layer by layer in order: reads the headers into the merge
  // (image/merge), the same rules as unpacking to a directory.
  void scan_layer(const image::ReadFn& read, const std::string& layer);

  // Pass 2: `out` (a libarchive writer) receives every directory, then each
  // layer's surviving entries as emit_layer is called in order, then the
  // hard links and any extra files at finish().
  void begin(archive* out);
  void emit_layer(const image::ReadFn& read, const std::string& layer, archive* out);
  void finish(archive* out, const std::map<std::string, std::string>& extra_files);

  size_t entries() const { return merge_.nodes().size(); }

private:
  using Node = LayerMerge::Node;
  void write_header(archive* out, const std::string& key, const Node& n, int64_t size);

  std::string image_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  LayerMerge merge_;
  int emitted_ = 0;
  std::map<std::pair<int, uint64_t>, std::string> keep_;  // (layer, index) -> key, for pass 2
  bool warned_devices_ = false;
};

}  // namespace rt::image
