// Sigstore key signatures (host); see sigstore.hpp.
#include "image/sigstore.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sodium.h>

#include <nlohmann/json.hpp>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::image {
// Not in the anonymous namespace: the Impl classes below hold one.
struct SigstorePkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using SigstorePkey = std::unique_ptr<EVP_PKEY, SigstorePkeyFree>;

namespace {

using nlohmann::json;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

// Ed25519 signs the payload itself; the others its SHA-256.
const EVP_MD* digest_for(EVP_PKEY* k) { return EVP_PKEY_base_id(k) == EVP_PKEY_ED25519 ? nullptr : EVP_sha256(); }

// The body of the one PEM block of `text` whose label is one of `labels`,
// decoded; `label` gets it. False when there is none.
bool pem_block(std::string_view text, std::initializer_list<const char*> labels, std::string* body,
               std::string* label) {
  for (const char* l : labels) {
    const std::string begin = std::string("-----BEGIN ") + l + "-----", end = std::string("-----END ") + l + "-----";
    const size_t a = text.find(begin);
    if (a == std::string_view::npos) continue;
    const size_t b = text.find(end, a + begin.size());
    if (b == std::string_view::npos) return false;
    std::string b64;
    for (char c : text.substr(a + begin.size(), b - a - begin.size()))
      if (c != '\n' && c != '\r' && c != ' ' && c != '\t') b64 += c;
    *label = l;
    return util::base64_decode(b64, body);
  }
  return false;
}

std::string b64_field(const json& o, const char* key, const std::string& what) {
  auto it = o.find(key);
  std::string out;
  if (it == o.end() || !it->is_string() || !util::base64_decode(it->get<std::string>(), &out))
    throw Error("sigstore key `" + what + "`: `" + key + "` is missing or not base64");
  return out;
}

constexpr uint64_t kScryptN = 65536;
constexpr uint32_t kScryptR = 8, kScryptP = 1;

// scrypt of the passphrase into a secretbox key.
void derive(std::string_view passphrase, const std::string& salt, uint64_t n, uint32_t r, uint32_t p,
            unsigned char (&key)[crypto_secretbox_KEYBYTES], const std::string& what) {
  if (::sodium_init() < 0) throw Error("libsodium cannot start");
  if (crypto_pwhash_scryptsalsa208sha256_ll(reinterpret_cast<const uint8_t*>(passphrase.data()), passphrase.size(),
                                            reinterpret_cast<const uint8_t*>(salt.data()), salt.size(), n, r, p, key,
                                            sizeof key) != 0)
    throw Error("sigstore key `" + what + "`: scrypt failed (N=" + std::to_string(n) + ", r=" + std::to_string(r) +
                ", p=" + std::to_string(p) + ")");
}

}  // namespace

struct SigstoreKey::Impl {
  SigstorePkey key;
};

SigstoreKey::SigstoreKey(std::string_view pem, const std::string& what) : impl_(std::make_unique<Impl>()), what_(what) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  impl_->key.reset(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!impl_->key) throw Error("sigstore public key `" + what + "` is not a PEM public key");
  const int id = EVP_PKEY_base_id(impl_->key.get());
  if (id != EVP_PKEY_EC && id != EVP_PKEY_ED25519 && id != EVP_PKEY_RSA)
    throw Error("sigstore public key `" + what + "` is neither ECDSA, Ed25519 nor RSA");
}
SigstoreKey::~SigstoreKey() = default;
SigstoreKey::SigstoreKey(SigstoreKey&&) noexcept = default;
SigstoreKey& SigstoreKey::operator=(SigstoreKey&&) noexcept = default;

bool SigstoreKey::verifies(std::string_view payload, std::string_view signature_b64) const {
  std::string sig;
  if (!util::base64_decode(signature_b64, &sig) || sig.empty()) return false;
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  EVP_PKEY* k = impl_->key.get();
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, digest_for(k), nullptr, k) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                          reinterpret_cast<const unsigned char*>(payload.data()), payload.size()) == 1;
}

struct SigstoreSigner::Impl {
  SigstorePkey key;
};

SigstoreSigner::SigstoreSigner(std::string_view file_text, std::string_view passphrase, const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  std::string body, label;
  if (!pem_block(file_text, {"ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY"}, &body, &label))
    throw Error("sigstore key `" + what + "` is not an encrypted sigstore private key",
                "make one with rt key generate, skopeo generate-sigstore-key or cosign generate-key-pair");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception&) {
    throw Error("sigstore key `" + what + "`: its " + label + " block is not JSON");
  }
  if (!j.is_object() || !j["kdf"].is_object() || !j["cipher"].is_object() || j["kdf"]["name"] != "scrypt" ||
      j["cipher"]["name"] != "nacl/secretbox" || !j["kdf"]["params"].is_object())
    throw Error("sigstore key `" + what + "`: not scrypt and nacl/secretbox, the only key encryption cosign writes");
  const json& params = j["kdf"]["params"];
  auto param = [&](const char* k) -> uint64_t {
    if (!params.contains(k) || !params[k].is_number_unsigned()) throw Error("sigstore key `" + what + "`: scrypt's `" + k + "` is missing");
    return params[k].get<uint64_t>();
  };
  const uint64_t n = param("N"), r = param("r"), p = param("p");
  // What cosign writes is N=2^15 or 2^16, r=8 (32 or 64 MiB); a file
  // asking far more is refused rather than worked through (N * r * 128
  // bytes of memory, at most 256 MiB here).
  if (n < 2 || (n & (n - 1)) || r == 0 || r > 32 || p == 0 || p > 16 || n * r * 128 > (uint64_t{1} << 28))
    throw Error("sigstore key `" + what + "`: scrypt parameters out of range (N=" + std::to_string(n) +
                ", r=" + std::to_string(r) + ", p=" + std::to_string(p) + ")");
  const std::string salt = b64_field(j["kdf"], "salt", what), nonce = b64_field(j["cipher"], "nonce", what),
                    sealed = b64_field(j, "ciphertext", what);
  if (nonce.size() != crypto_secretbox_NONCEBYTES || sealed.size() < crypto_secretbox_MACBYTES)
    throw Error("sigstore key `" + what + "`: the nonce or the ciphertext is too short");
  unsigned char key[crypto_secretbox_KEYBYTES];
  derive(passphrase, salt, n, static_cast<uint32_t>(r), static_cast<uint32_t>(p), key, what);
  std::string der(sealed.size() - crypto_secretbox_MACBYTES, '\0');
  const int rc = crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(der.data()),
                                            reinterpret_cast<const unsigned char*>(sealed.data()), sealed.size(),
                                            reinterpret_cast<const unsigned char*>(nonce.data()), key);
  sodium_memzero(key, sizeof key);
  if (rc != 0) throw Error("sigstore key `" + what + "`: wrong passphrase (the key does not decrypt)");
  const unsigned char* in = reinterpret_cast<const unsigned char*>(der.data());
  impl_->key.reset(d2i_AutoPrivateKey(nullptr, &in, static_cast<long>(der.size())));
  sodium_memzero(der.data(), der.size());
  if (!impl_->key) throw Error("sigstore key `" + what + "`: the decrypted key is not a PKCS#8 private key");
}
SigstoreSigner::~SigstoreSigner() = default;

std::string SigstoreSigner::sign(std::string_view payload) const {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  EVP_PKEY* k = impl_->key.get();
  size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, digest_for(k), nullptr, k) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(payload.data()), payload.size()) != 1)
    throw Error("sigstore: cannot sign with this key");
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(payload.data()), payload.size()) != 1)
    throw Error("sigstore: signing failed");
  sig.resize(len);
  return util::base64_encode(sig);
}

std::string SigstoreSigner::public_pem() const {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), impl_->key.get()) != 1) throw Error("sigstore: cannot write the public key");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

SigstoreKeyPair generate_sigstore_key(std::string_view passphrase) {
  SigstorePkey key(EVP_EC_gen("P-256"));
  if (!key) throw Error("sigstore: cannot make an ECDSA P-256 key");
  unsigned char* der = nullptr;
  std::unique_ptr<PKCS8_PRIV_KEY_INFO, void (*)(PKCS8_PRIV_KEY_INFO*)> p8(EVP_PKEY2PKCS8(key.get()),
                                                                         PKCS8_PRIV_KEY_INFO_free);
  const int len = p8 ? i2d_PKCS8_PRIV_KEY_INFO(p8.get(), &der) : -1;
  if (len <= 0) throw Error("sigstore: cannot encode the private key");
  std::string plain(reinterpret_cast<char*>(der), static_cast<size_t>(len));
  OPENSSL_clear_free(der, static_cast<size_t>(len));
  std::string salt(32, '\0'), nonce(crypto_secretbox_NONCEBYTES, '\0');
  if (::sodium_init() < 0) throw Error("libsodium cannot start");
  randombytes_buf(salt.data(), salt.size());
  randombytes_buf(nonce.data(), nonce.size());
  unsigned char k[crypto_secretbox_KEYBYTES];
  derive(passphrase, salt, kScryptN, kScryptR, kScryptP, k, "new key");
  std::string sealed(plain.size() + crypto_secretbox_MACBYTES, '\0');
  crypto_secretbox_easy(reinterpret_cast<unsigned char*>(sealed.data()), reinterpret_cast<const unsigned char*>(plain.data()),
                        plain.size(), reinterpret_cast<const unsigned char*>(nonce.data()), k);
  sodium_memzero(k, sizeof k);
  sodium_memzero(plain.data(), plain.size());
  const json j = {{"kdf",
                   {{"name", "scrypt"},
                    {"params", {{"N", kScryptN}, {"r", kScryptR}, {"p", kScryptP}}},
                    {"salt", util::base64_encode(salt)}}},
                  {"cipher", {{"name", "nacl/secretbox"}, {"nonce", util::base64_encode(nonce)}}},
                  {"ciphertext", util::base64_encode(sealed)}};
  const std::string b64 = util::base64_encode(j.dump());
  // The label skopeo 1.18 and cosign 2 write, so that both read it.
  std::string pem = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
  for (size_t i = 0; i < b64.size(); i += 64) pem += b64.substr(i, 64) + "\n";
  pem += "-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
  SigstoreKeyPair out;
  out.private_pem = pem;
  out.public_pem = SigstoreSigner(pem, passphrase, "new key").public_pem();
  return out;
}

SignaturePayload parse_sigstore_payload(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    throw Error("the signed payload is not JSON");
  }
  if (!j.is_object() || !j.contains("critical")) throw Error("the signed payload has no `critical`");
  for (const auto& [k, v] : j.items())
    if (k != "critical" && k != "optional") throw Error("the signed payload has an unknown key `" + k + "`");
  if (j.contains("optional") && !j["optional"].is_object() && !j["optional"].is_null())
    throw Error("the signed payload's `optional` is neither an object nor null");
  const json& c = j["critical"];
  if (!c.is_object() || c.size() != 3 || !c.contains("type") || !c.contains("image") || !c.contains("identity"))
    throw Error("the signed payload's `critical` does not have exactly `type`, `image` and `identity`");
  if (c["type"] != "cosign container image signature")
    throw Error("the signed payload is not a sigstore signature (type " + c["type"].dump() + ")");
  const json &img = c["image"], &id = c["identity"];
  if (!img.is_object() || img.size() != 1 || !img.contains("docker-manifest-digest") ||
      !img["docker-manifest-digest"].is_string())
    throw Error("the signed payload's `critical.image` is not exactly a docker-manifest-digest");
  if (!id.is_object() || id.size() != 1 || !id.contains("docker-reference") || !id["docker-reference"].is_string())
    throw Error("the signed payload's `critical.identity` is not exactly a docker-reference");
  return {id["docker-reference"].get<std::string>(), img["docker-manifest-digest"].get<std::string>()};
}

std::string make_sigstore_payload(const SignaturePayload& p, const std::string& creator, int64_t timestamp) {
  return make_signature_payload(p, creator, timestamp, "cosign container image signature");
}

std::string sigstore_attachment_tag(const std::string& digest) {
  const size_t colon = digest.find(':');
  return digest.substr(0, colon) + "-" + digest.substr(colon + 1) + ".sig";
}

}  // namespace rt::image
