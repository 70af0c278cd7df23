// Layers compressed for a registry or an OCI layout (host): gzip in
// blocks compressed on several threads by ISA-L's igzip (one stream any
// gunzip reads, as pigz writes it), or zstd with libzstd's own workers.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "image/unpack.hpp"

namespace rt::image {

enum class Compression { Gzip, Zstd };

// "gzip" or "zstd"; throws rt::Error for anything else.
Compression parse_compression(const std::string& name);
const char* compression_name(Compression c);
// The OCI media type of a layer so compressed.
const char* layer_media_type(Compression c);

struct CompressedLayer {
  std::string digest;   // of the compressed bytes
  uint64_t size = 0;    // compressed
  std::string diff_id;  // of the uncompressed tar
};

// Compresses the tar stream `in` into the new file `out` (mode 0600) with
// `threads` threads (0: the processors), hashing both sides. `progress`
// gets uncompressed byte counts.
CompressedLayer compress_layer(const ReadFn& in, const std::string& out, Compression c, unsigned threads,
                               const std::function<void(uint64_t)>& progress = {});

}  // namespace rt::image
