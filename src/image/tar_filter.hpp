// Tar streams through libarchive (host): without some top-level names
// (rt's own /.rt of a SquashFS image stays out of a layer made from its
// tree), with the set-id bits and extended attributes a tree keeps beside
// it, and decompressed whatever the filter.
#pragma once
#include <string>
#include <vector>

#include "image/file_attrs.hpp"
#include "image/unpack.hpp"

namespace rt::image {

// `in` (a tar stream) as a tar stream (pax) without the entries named by
// `drop` or lying below them ("./" in front or not).
ReadFn without_names(ReadFn in, std::vector<std::string> drop);
// The same, and entries named in `attrs` (by attr_key) given theirs: a
// directory image's tree made into a layer.
ReadFn filtered(ReadFn in, std::vector<std::string> drop, AttrMap attrs);

// `in` decompressed by libarchive's filters (xz, bzip2, lzma, lz4, gzip,
// zstd; plain bytes as they are): ADD's archives beyond what layers use.
ReadFn decompressed(ReadFn in, std::string name);

}  // namespace rt::image
