// Checks a SquashFS image's metadata before libsquashfuse reads any of it
// (host and namespace).
//
// libsquashfuse trusts the image: a block size of 0 divides by zero, a table
// index past its table reads freed or foreign memory, a directory entry
// whose offset lies past its metadata block overflows the heap. An image is
// any file a user names, so rt reads the superblock, every table index and
// the whole tree of inodes and directory listings with its own bounded
// reader first, and refuses the image naming what is wrong. What the
// library later reads is then within what was checked.
#pragma once
#include <cstdint>
#include <string>

namespace rt::squash {

// Where a SquashFS image lies in its file: from `offset`, `size` bytes
// (0: to the end of the file).
struct Span {
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct VerifyLimits {
  uint64_t max_entries = uint64_t{1} << 26;  // directory entries in the whole tree
};

// Throws rt::Error "image `PATH`: REASON" when the image at `fd` (its file
// named `path` in messages) is not a SquashFS 4.0 image whose metadata
// stays within the file and its own tables.
// `span`: where the image lies in the file (a SIF file's partition).
// `source`, when given, is asked for every range before it is read (a
// lazy file): all that the library will read of the metadata is then in
// the file.
class Source;
void verify_image(int fd, const std::string& path, const Span& span = {}, const VerifyLimits& limits = {},
                  Source* source = nullptr);

}  // namespace rt::squash
