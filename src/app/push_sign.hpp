// rt push --sign-by (host): a simple-signing signature of the manifest
// pushed, as skopeo copy --sign-by makes one, written into the file://
// lookaside store registries.d names (image/signatures), the OpenPGP
// GnuPG's (image/openpgp).
#pragma once
#include <memory>
#include <string>

#include "image/openpgp.hpp"
#include "rt/image.hpp"
#include "store/ref.hpp"

namespace rt::app {

class PushSigner {
public:
  // Everything that can be refused before a blob is sent: the lookaside
  // store (a file:// one), the key (in the user's keyring, or the key
  // file). Throws rt::Error.
  PushSigner(const store::Reference& ref, const PushSigning& how);

  // The signature of the manifest `digest` under the reference's identity
  // (the passphrase is asked here). Writes nothing.
  std::string sign(const std::string& digest);
  // Adds `signature` to the lookaside store as the first free
  // signature-N; returns its path.
  std::string store(const std::string& digest, const std::string& signature);

  const std::string& key() const { return key_; }

private:
  store::Reference ref_;
  PushSigning how_;
  std::string base_;  // the lookaside store's URL
  std::unique_ptr<image::OpenPgp> pgp_;
  std::string key_;  // the signing key's primary fingerprint
};

}  // namespace rt::app
