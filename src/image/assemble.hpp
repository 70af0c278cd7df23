// Building a stored image from a config and its layers: the pipeline
// verify -> decompress -> unpack -> commit shared by pull and import (host).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "image/unpack.hpp"
#include "store/store.hpp"

namespace rt::image {

struct LayerInput {
  std::string name;              // for messages: a digest or a file name
  std::string expected_blob;     // digest of the (compressed) blob; empty: unchecked
  int64_t expected_size = -1;    // size of the blob; -1: unchecked
  std::string expected_diff_id;  // digest of the uncompressed tar; empty: unchecked
  std::function<ReadFn()> open;  // a fresh reader of the blob's bytes
};

struct AssembleOptions {
  uint64_t max_bytes = 0;  // unpacked size limit, 0: none
  bool quiet = false;
};

struct ImageSource {
  std::string name;             // store name
  std::string ref;              // where it came from, for rt images
  std::string config_text;      // the OCI image config, stored verbatim
  std::string config_digest;
  std::string manifest_digest;  // may be empty
  std::vector<LayerInput> layers;
  std::vector<std::string> drop;  // top-level names removed from the tree at the end
};

// Unpacks every layer in order into a work directory of the store, checks
// each layer's digest, size and diff_id, and commits the bundle atomically
// under src.name. Nothing is visible under that name until it is complete.
void assemble_image(store::Store& store, const ImageSource& src, const AssembleOptions& opts);
// The same into `dir` (existing, empty): rootfs/, image-config.json and
// rt-image.json, a bundle `rt exec` runs. The caller commits or removes it.
void assemble_bundle(const std::string& dir, const ImageSource& src, const AssembleOptions& opts);
// image-config.json and rt-image.json (`size`: bytes of the image's files).
void write_image_files(const std::string& dir, const ImageSource& src, uint64_t size);

// Human-readable byte counts: "12.3 MB".
std::string human_bytes(uint64_t n);

} // namespace rt::image
