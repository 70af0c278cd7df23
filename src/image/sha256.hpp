// SHA-256 over a stream (OpenSSL EVP) and digest strings (pure).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "util/digest.hpp"

namespace rt::image {

class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  // "sha256:<64 hex>"; the object cannot be updated afterwards.
  std::string digest();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_digest(std::string_view data);

}  // namespace rt::image
