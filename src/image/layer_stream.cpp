// Layer blobs as tar streams (host).
#include "image/layer_stream.hpp"

#include <isa-l/igzip_lib.h>
#include <zstd.h>

#include <cstring>

#include "rt/error.hpp"

namespace rt::image {

struct LayerStream::Codec {
  inflate_state gz{};
  ZSTD_DStream* zs = nullptr;
  bool gz_member_open = false;
  size_t zstd_hint = 1;  // 0 once a frame is complete (ZSTD_decompressStream's return)
  ~Codec() {
    if (zs) ZSTD_freeDStream(zs);
  }
};

LayerStream::LayerStream(ReadFn raw, std::string name)
    : raw_(std::move(raw)), name_(std::move(name)), in_(1 << 20), codec_(std::make_unique<Codec>()) {}

LayerStream::~LayerStream() = default;

const char* LayerStream::compression() const {
  switch (kind_) {
    case Kind::Gzip:
      return "gzip";
    case Kind::Zstd:
      return "zstd";
    case Kind::None:
      return "none";
    default:
      return "unknown";
  }
}

// Refills in_ when it is empty; returns the bytes available.
size_t LayerStream::fill() {
  if (in_pos_ < in_len_ || in_eof_) return in_len_ - in_pos_;
  size_t n = raw_(in_.data(), in_.size());
  in_pos_ = 0;
  in_len_ = n;
  if (n == 0) in_eof_ = true;
  blob_hash_.update(in_.data(), n);
  raw_bytes_ += n;
  return n;
}

Magic magic_of(const void* head, size_t n) {
  const auto* p = static_cast<const unsigned char*>(head);
  if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b) return Magic::Gzip;
  if (n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd) return Magic::Zstd;
  return Magic::Other;
}

size_t LayerStream::read(void* buf, size_t size) {
  if (done_ || size == 0) return 0;
  if (kind_ == Kind::Unknown) {
    fill();
    const Magic m = magic_of(in_.data() + in_pos_, in_len_ - in_pos_);
    if (m == Magic::Gzip) {
      kind_ = Kind::Gzip;
      isal_inflate_init(&codec_->gz);
      codec_->gz.crc_flag = ISAL_GZIP;
      codec_->gz_member_open = true;
    } else if (m == Magic::Zstd) {
      kind_ = Kind::Zstd;
      codec_->zs = ZSTD_createDStream();
      ZSTD_initDStream(codec_->zs);
    } else {
      kind_ = Kind::None;
    }
  }
  size_t n = kind_ == Kind::Gzip   ? read_gzip(buf, size)
             : kind_ == Kind::Zstd ? read_zstd(buf, size)
                                   : read_plain(buf, size);
  if (n == 0) done_ = true;
  tar_hash_.update(buf, n);
  return n;
}

size_t LayerStream::read_plain(void* buf, size_t size) {
  if (fill() == 0) return 0;
  size_t n = std::min(size, in_len_ - in_pos_);
  std::memcpy(buf, in_.data() + in_pos_, n);
  in_pos_ += n;
  return n;
}

size_t LayerStream::read_gzip(void* buf, size_t size) {
  inflate_state& s = codec_->gz;
  for (;;) {
    size_t avail = fill();
    if (!codec_->gz_member_open) {
      if (avail == 0) return 0;  // clean end after the last member
      isal_inflate_reset(&s);    // concatenated gzip members
      s.crc_flag = ISAL_GZIP;
      codec_->gz_member_open = true;
    }
    if (avail == 0) throw Error("layer `" + name_ + "`: truncated gzip stream");
    s.next_in = in_.data() + in_pos_;
    s.avail_in = static_cast<uint32_t>(avail);
    s.next_out = static_cast<uint8_t*>(buf);
    s.avail_out = static_cast<uint32_t>(std::min<size_t>(size, UINT32_MAX));
    int r = isal_inflate(&s);
    in_pos_ = static_cast<size_t>(s.next_in - in_.data());
    if (r != ISAL_DECOMP_OK)
      throw Error("layer `" + name_ + "`: corrupt gzip stream (ISA-L error " + std::to_string(r) + ")");
    size_t produced = size - s.avail_out;
    if (s.block_state == ISAL_BLOCK_FINISH) codec_->gz_member_open = false;
    if (produced > 0) return produced;
  }
}

size_t LayerStream::read_zstd(void* buf, size_t size) {
  for (;;) {
    size_t avail = fill();
    ZSTD_inBuffer in{in_.data() + in_pos_, avail, 0};
    ZSTD_outBuffer out{buf, size, 0};
    if (avail == 0 && codec_->zstd_hint == 0) return 0;  // clean end after a whole frame
    size_t r = ZSTD_decompressStream(codec_->zs, &out, &in);
    in_pos_ += in.pos;
    if (ZSTD_isError(r)) throw Error("layer `" + name_ + "`: corrupt zstd stream: " + ZSTD_getErrorName(r));
    if (in.pos > 0 || out.pos > 0) codec_->zstd_hint = r;
    if (out.pos > 0) return out.pos;
    if (avail == 0) throw Error("layer `" + name_ + "`: truncated zstd stream");
  }
}

std::string LayerStream::blob_digest() { return blob_hash_.digest(); }
std::string LayerStream::diff_id() { return tar_hash_.digest(); }

}  // namespace rt::image
