// A layer blob as a stream of tar bytes: decompresses gzip (ISA-L igzip),
// zstd or nothing, chosen by the magic bytes, and hashes both sides so the
// blob digest and the diff_id are checked without a second pass (host).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "image/sha256.hpp"
#include "image/unpack.hpp"

namespace rt::image {

// How a blob whose first `n` bytes are `head` is compressed, by its magic
// number (Other: plain, or too short to tell).
enum class Magic { Gzip, Zstd, Other };
Magic magic_of(const void* head, size_t n);

class LayerStream {
public:
  // `raw` supplies the blob's bytes; `name` is used in errors.
  LayerStream(ReadFn raw, std::string name);
  ~LayerStream();

  // Decompressed bytes; 0 at the end. Throws rt::Error on corrupt or
  // truncated compressed data.
  size_t read(void* buf, size_t size);

  // Valid once read() returned 0.
  std::string blob_digest();
  std::string diff_id();
  uint64_t blob_size() const { return raw_bytes_; }
  const char* compression() const;

private:
  enum class Kind { Unknown, None, Gzip, Zstd };
  size_t fill();
  size_t read_plain(void* buf, size_t size);
  size_t read_gzip(void* buf, size_t size);
  size_t read_zstd(void* buf, size_t size);

  ReadFn raw_;
  std::string name_;
  Kind kind_ = Kind::Unknown;
  std::vector<unsigned char> in_;
  size_t in_pos_ = 0, in_len_ = 0;
  bool in_eof_ = false;
  uint64_t raw_bytes_ = 0;
  image::Sha256 blob_hash_, tar_hash_;
  struct Codec;
  std::unique_ptr<Codec> codec_;
  bool done_ = false;
};

}  // namespace rt::image
