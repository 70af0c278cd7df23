// rt push --sign-by and --sign-by-sigstore-private-key (host), as skopeo
// copy makes them: a simple-signing signature of the manifest pushed,
// written into the file:// lookaside store registries.d names
// (image/signatures), the OpenPGP GnuPG's (image/openpgp); a sigstore
// signature (image/sigstore) attached in the registry.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "image/openpgp.hpp"
#include "image/registry.hpp"
#include "image/sigstore.hpp"
#include "rt/image.hpp"
#include "store/ref.hpp"

namespace rt::app {

class PushSigner {
public:
  // Everything that can be refused before a blob is sent: the lookaside
  // store (a file:// one), the key (in the user's keyring, or the key
  // file). Throws rt::Error.
  PushSigner(const store::Reference& ref, const PushSigning& how);

  struct Signatures {
    std::string pgp;                     // a simple signature ("": none asked)
    image::SigstoreSignature sigstore;   // payload "": none asked
  };
  // The signatures of the manifest `digest` under the reference's identity
  // (a GnuPG passphrase is asked here). Writes nothing.
  Signatures sign(const std::string& digest);
  // Adds the signatures: a simple one to the lookaside store as the first
  // free signature-N, a sigstore one to the registry's attachment. Returns
  // what was written, for the user: "`PATH`", "attachment `TAG`".
  std::vector<std::string> store(image::Registry& reg, const std::string& digest, const Signatures& s);

  // Who signs: "FINGERPRINT", "sigstore key `FILE`", or both.
  std::string signer() const;

private:
  store::Reference ref_;
  PushSigning how_;
  std::string base_;  // the lookaside store's URL
  std::unique_ptr<image::OpenPgp> pgp_;
  std::string key_;  // the signing key's primary fingerprint
  std::unique_ptr<image::SigstoreSigner> sigstore_;
};

}  // namespace rt::app
