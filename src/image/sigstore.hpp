// Sigstore key signatures (host) as cosign and containers/image make and
// check them: a public key (PEM "PUBLIC KEY": ECDSA, Ed25519 or RSA), the
// private key file cosign and skopeo generate-sigstore-key write (PEM
// "ENCRYPTED SIGSTORE PRIVATE KEY" or "ENCRYPTED COSIGN PRIVATE KEY": JSON
// naming scrypt and NaCl secretbox, holding a PKCS#8 key), the
// signature (base64 of the key's signature over the SHA-256 of the
// payload), and the payload (containers-signature(5)'s, typed "cosign
// container image signature"). Scrypt and secretbox are libsodium's, the
// keys and signatures OpenSSL's.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "image/policy.hpp"

namespace rt::image {

// A public key of a sigstoreSigned requirement.
class SigstoreKey {
public:
  // Parses PEM text holding one public key; throws rt::Error naming `what`.
  SigstoreKey(std::string_view pem, const std::string& what);
  ~SigstoreKey();
  SigstoreKey(SigstoreKey&&) noexcept;
  SigstoreKey& operator=(SigstoreKey&&) noexcept;
  // Whether `signature_b64` is this key's signature of `payload`.
  bool verifies(std::string_view payload, std::string_view signature_b64) const;
  const std::string& name() const { return what_; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string what_;
};

// A private key opened from its encrypted file.
class SigstoreSigner {
public:
  // Decrypts `file_text` (the key file `what`) with `passphrase`; throws
  // rt::Error saying what is wrong (a wrong passphrase included).
  SigstoreSigner(std::string_view file_text, std::string_view passphrase, const std::string& what);
  ~SigstoreSigner();
  // The base64 signature of `payload`.
  std::string sign(std::string_view payload) const;
  // The public key, PEM.
  std::string public_pem() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A new ECDSA P-256 key pair: the private key encrypted with `passphrase`
// (scrypt N=65536, r=8, p=1, as cosign and skopeo write it), and the public
// key, both PEM.
struct SigstoreKeyPair {
  std::string private_pem, public_pem;
};
SigstoreKeyPair generate_sigstore_key(std::string_view passphrase);

// The payload of a sigstore signature: containers/image's and cosign's
// {"critical": {"identity": {"docker-reference": R}, "image":
// {"docker-manifest-digest": D}, "type": "cosign container image
// signature"}, "optional": {...} or null}. Throws rt::Error saying what is
// wrong.
SignaturePayload parse_sigstore_payload(std::string_view json);
std::string make_sigstore_payload(const SignaturePayload& p, const std::string& creator, int64_t timestamp);

// What an attachment holds of one signature: the payload (the layer's
// blob) and the signature (its annotation).
struct SigstoreSignature {
  std::string payload;
  std::string signature_b64;
  std::string problem;  // why it could not be read whole ("": it was)
};

// The attachment manifest's tag for a manifest digest: "sha256-HEX.sig".
std::string sigstore_attachment_tag(const std::string& digest);

}  // namespace rt::image
