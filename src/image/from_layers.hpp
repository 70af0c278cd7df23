// A SquashFS file straight from layer streams (host).
#pragma once
#include <cstdint>
#include <string>

#include "image/source.hpp"

namespace rt::image {

struct SquashOptions {
  std::string compression = "zstd";
  int level = 0;
  int jobs = 0;
  uint64_t max_bytes = 0;  // refuse an image whose files add up to more (apparent sizes); 0: no limit
};

// Throws rt::Error unless `name` is a SquashFS compressor rt offers.
void check_compression(const std::string& name);

// Verifies the layers and writes `out` (beside it, then renamed), with the
// image config inside at /.rt/image-config.json; returns that config (with
// the layers' diff_ids when the source's listed none). Throws rt::Error.
std::string write_from_layers(const ImageSource& src, const std::string& out, const SquashOptions& options);

}  // namespace rt::image
