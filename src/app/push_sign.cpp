// rt push --sign-by, --sign-by-sigstore-private-key (host); see
// push_sign.hpp.
#include "app/push_sign.hpp"

#include <ctime>

#include "app/passphrase.hpp"
#include "image/policy.hpp"
#include "image/signatures.hpp"
#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace rt::app {

PushSigner::PushSigner(const store::Reference& ref, const PushSigning& how) : ref_(ref), how_(how) {
  if (!how_.by_sigstore_key.empty()) {
    // Attachments only, as containers/image writes sigstore signatures:
    // refused here, before anything is sent, unless registries.d says so.
    image::require_sigstore_attachments(ref_, "a sigstore signature of `" + ref_.str() + "` goes into a registry attachment");
    auto text = util::read_regular_if_exists(how_.by_sigstore_key, 1 << 20);
    if (!text) throw Error("sigstore key `" + how_.by_sigstore_key + "` does not exist");
    // Opened now: a wrong passphrase is refused before a blob is sent.
    sigstore_ = std::make_unique<image::SigstoreSigner>(
        *text, sign_passphrase(how_.by_sigstore_key, how_.passphrase_file), how_.by_sigstore_key);
    util::info("signing with sigstore key `" + how_.by_sigstore_key + "` (a registry attachment)");
  }
  if (!how_.gpg()) return;
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

PushSigner::Signatures PushSigner::sign(const std::string& digest) {
  Signatures out;
  const auto now = static_cast<int64_t>(::time(nullptr));
  if (sigstore_) {
    out.sigstore.payload = image::make_sigstore_payload({ref_.str(), digest}, "rt " RT_VERSION, now);
    out.sigstore.signature_b64 = sigstore_->sign(out.sigstore.payload);
  }
  if (pgp_)
    out.pgp = pgp_->sign_message(image::make_signature_payload({ref_.str(), digest}, "rt " RT_VERSION, now), key_,
                                 passphrase_from(how_.passphrase_file));
  return out;
}

std::vector<std::string> PushSigner::store(image::Registry& reg, const std::string& digest, const Signatures& s) {
  std::vector<std::string> out;
  if (!s.pgp.empty()) out.push_back("`" + image::write_lookaside(base_, ref_, digest, s.pgp).first + "`");
  if (!s.sigstore.payload.empty()) out.push_back("attachment `" + image::write_sigstore_attachment(reg, digest, s.sigstore) + "`");
  return out;
}

std::string PushSigner::signer() const {
  std::string out = key_;
  if (sigstore_) out += (out.empty() ? "" : " and ") + std::string("sigstore key `") + how_.by_sigstore_key + "`";
  return out;
}

}  // namespace rt::app
