// SHA-256 (OpenSSL EVP) and digest strings.
#include "image/sha256.hpp"

#include <openssl/evp.h>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::image {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    throw Error("OpenSSL: cannot initialise SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, size_t size) { EVP_DigestUpdate(impl_->ctx, data, size); }

std::string Sha256::digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  return "sha256:" + util::hex(md, len);
}

std::string sha256_digest(std::string_view data) {
  Sha256 h;
  h.update(data.data(), data.size());
  return h.digest();
}

}  // namespace rt::image
