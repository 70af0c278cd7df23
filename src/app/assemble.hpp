// Building a stored image from a config and its layers: the pipeline
// verify -> decompress -> unpack -> commit shared by pull and import (host).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "app/store.hpp"
#include "image/from_layers.hpp"
#include "image/source.hpp"

namespace rt::app {

using image::ImageSource;
using image::LayerInput;

struct AssembleOptions {
  uint64_t max_bytes = 0;  // unpacked size limit, 0: none
  bool quiet = false;
};

// Unpacks every layer in order into a work directory of the store, checks
// each layer's digest, size and diff_id, and commits the bundle atomically
// under src.name. Nothing is visible under that name until it is complete.
void assemble_image(app::Store& store, const ImageSource& src, const AssembleOptions& opts);
// The same into `dir` (existing, empty): rootfs/, image-config.json and
// rt-image.json, a bundle `rt exec` runs. The caller commits or removes it.
void assemble_bundle(const std::string& dir, const ImageSource& src, const AssembleOptions& opts);
// image-config.json and rt-image.json (`size`: bytes of the image's files).
void write_image_files(const std::string& dir, const ImageSource& src, uint64_t size);

// Stores the image as one SquashFS file (store::kSquashFile) beside its
// image-config.json and rt-image.json, written straight from the layers.
void store_from_layers(app::Store& store, const ImageSource& src, const image::SquashOptions& options);

}  // namespace rt::app
