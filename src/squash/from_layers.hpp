// A SquashFS file straight from layer streams (host).
#pragma once
#include <string>

#include "image/assemble.hpp"
#include "store/store.hpp"

namespace rt::squash {

struct SquashOptions {
  std::string compression = "zstd";
  int level = 0;
  int jobs = 0;
};

// Throws rt::Error unless `name` is a SquashFS compressor rt offers.
void check_compression(const std::string& name);

// Verifies the layers and writes `out` (beside it, then renamed), with the
// image config inside at /.rt/image-config.json. Throws rt::Error.
void write_from_layers(const image::ImageSource& src, const std::string& out, const SquashOptions& options);

// Stores the image as one SquashFS file (store::kSquashFile) beside its
// image-config.json and rt-image.json, written straight from the layers.
void store_from_layers(store::Store& store, const image::ImageSource& src, const SquashOptions& options);

} // namespace rt::squash
