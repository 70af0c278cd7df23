// A tar stream without some of its top-level names (host): rt's own /.rt
// of a SquashFS image stays out of the layer made from its tree.
#pragma once
#include <string>
#include <vector>

#include "image/unpack.hpp"

namespace rt::image {

// `in` (a tar stream) as a tar stream (pax) without the entries named by
// `drop` or lying below them ("./" in front or not).
ReadFn without_names(ReadFn in, std::vector<std::string> drop);

}  // namespace rt::image
