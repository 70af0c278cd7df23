// OpenPGP through GPGME (host): a private GnuPG home holding only the keys
// given, clear-signed messages checked and made there, and signed messages
// (simple-signing image signatures) checked and made; or the user's own
// GnuPG home, to sign with a key of the user's keyring. rt writes no
// OpenPGP of its own: packets, armour and signatures are GnuPG's.
//
// The home is a fresh mkdtemp(3) directory (mode 0700) under $TMPDIR or
// /tmp, so nothing another user of the machine can predict or plant is
// read; it is removed, with any gpg-agent started for it, when the
// OpenPgp object goes.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace rt::image {

class OpenPgp {
public:
  OpenPgp();  // throws rt::Error when GPGME or gpg is missing
  // The user's own GnuPG home `dir` ("" for GnuPG's default: $GNUPGHOME,
  // else ~/.gnupg), used in place, to sign with a secret key of the user's
  // keyring: nothing is written there by rt, nothing is removed, and the
  // secret key never leaves it (gpg-agent signs, as for gpg --sign).
  struct UserHome {
    std::string dir;
  };
  explicit OpenPgp(const UserHome& home);
  ~OpenPgp();
  OpenPgp(const OpenPgp&) = delete;
  OpenPgp& operator=(const OpenPgp&) = delete;

  // Imports the keys in `path` (armoured or binary; public or secret).
  // Returns the fingerprints of the primary keys it held (40 or 64 upper-
  // case hex digits); throws rt::Error naming the file when it holds none.
  std::vector<std::string> import_file(const std::string& path);
  // The same for keys held in memory; `what` names them in errors.
  std::vector<std::string> import_data(std::string_view bytes, const std::string& what);
  // Imports every public key of the GnuPG home `dir` (read, not changed).
  std::vector<std::string> import_home(const std::string& dir);

  struct Verified {
    bool good = false;        // a valid signature by a key imported here, hashed with SHA-2
    std::string fingerprint;  // the signing key's primary key (or, when unknown, what the signature names)
    std::string problem;      // why not good: "unknown key", "bad signature", ...
    std::string text;         // the signed text (when good)
  };
  // Checks `message`, one clear-signed message (nothing before or after
  // it, one signature).
  Verified verify_clearsigned(std::string_view message);
  // Checks `message`, one OpenPGP signed message (binary or armoured, the
  // payload inside it: what `gpg --sign` and skopeo --sign-by write), one
  // signature; `text` is then its payload.
  Verified verify_signed_message(std::string_view message);

  // `text` as a clear-signed message by the secret key `fingerprint`
  // (imported here), hashed with SHA-256. `passphrase` is asked (once)
  // when the key is protected; it returns the passphrase or throws.
  std::string clearsign(std::string_view text, const std::string& fingerprint,
                        const std::function<std::string(const std::string& key)>& passphrase);

  // `text` as an OpenPGP signed message (binary, the payload inside: what
  // skopeo --sign-by writes as a simple-signing signature) by the secret
  // key `fingerprint`, hashed with SHA-2 (refused otherwise), checked
  // once made. `passphrase` as for clearsign.
  std::string sign_message(std::string_view text, const std::string& fingerprint,
                           const std::function<std::string(const std::string& key)>& passphrase);
  // The primary fingerprint of the secret key `id` (a fingerprint, key ID
  // or user ID as gpg takes it; "": any) that can sign; throws rt::Error
  // naming the home when there is none, or more than one.
  std::string secret_key(const std::string& id);

  // The GnuPG home: the private one, or the user's ("" for GnuPG's default).
  const std::string& home() const { return home_; }

private:
  Verified verify_message(std::string_view message);  // either kind, once its form is checked
  std::string sign(std::string_view text, const std::string& fingerprint,
                   const std::function<std::string(const std::string& key)>& passphrase, bool clear);
  std::string where() const;  // the home, for messages

  void* ctx_ = nullptr;  // gpgme_ctx_t
  std::string home_;
  bool agent_ = false;  // a gpg-agent may run for the home
  bool own_ = true;     // the private home (made, and removed, here)
};

}  // namespace rt::image
