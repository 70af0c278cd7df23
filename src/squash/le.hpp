// Little-endian integers in a byte string (SquashFS and SIF headers).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace rt::squash {

// The T at byte `at` of `s`, little-endian; the caller checks the bounds.
template <class T>
T le(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
  return static_cast<T>(v);
}

}  // namespace rt::squash
