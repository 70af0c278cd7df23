// rt push --sign-by (host); see push_sign.hpp.
#include "app/push_sign.hpp"

#include <ctime>

#include "app/passphrase.hpp"
#include "image/policy.hpp"
#include "image/signatures.hpp"
#include "rt/error.hpp"
#include "util/log.hpp"

namespace rt::app {

PushSigner::PushSigner(const store::Reference& ref, const PushSigning& how) : ref_(ref), how_(how) {
  std::string dir;
  base_ = image::lookaside_for_push(ref_, &dir);
  util::info("signatures of `" + ref_.str() + "` go to the lookaside `" + base_ + "` (registries.d `" + dir + "`)");
  if (!how_.by_key.empty()) {
    // A key file: imported into a private home (image/openpgp), removed
    // with it. --sign-by, when also given, chooses among its keys.
    pgp_ = std::make_unique<image::OpenPgp>();
    pgp_->import_file(how_.by_key);
    try {
      key_ = pgp_->secret_key(how_.by);
    } catch (const Error& e) {
      throw Error("key file `" + how_.by_key + "`: " + e.what(),
                  how_.by.empty() ? "choose its key with --sign-by FINGERPRINT" : "");
    }
  } else {
    // The user's keyring, used in place (OpenPgp::UserHome says why).
    pgp_ = std::make_unique<image::OpenPgp>(image::OpenPgp::UserHome{});
    key_ = pgp_->secret_key(how_.by);
  }
  util::info("signing with key " + key_);
}

std::string PushSigner::sign(const std::string& digest) {
  const std::string payload =
      image::make_signature_payload({ref_.str(), digest}, "rt " RT_VERSION, static_cast<int64_t>(::time(nullptr)));
  return pgp_->sign_message(payload, key_, passphrase_from(how_.passphrase_file));
}

std::string PushSigner::store(const std::string& digest, const std::string& signature) {
  return image::write_lookaside(base_, ref_, digest, signature).first;
}

}  // namespace rt::app
