// rt verify and rt sign: SIF signatures as Apptainer writes and checks
// them (host). The format is image/sif_sign's, OpenPGP image/openpgp's.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <map>

#include "app/passphrase.hpp"
#include "image/openpgp.hpp"
#include "image/sif_sign.hpp"
#include "image/sigstore.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "squash/le.hpp"
#include "squash/sif.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

constexpr size_t kSignatureLimit = 1 << 20;  // a signature object is some hundred bytes

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string object_name(const squash::SifObject& o) {
  return "object " + std::to_string(o.id) + " (" + squash::sif_type_name(o.type) + ")";
}

std::string id_list(const std::vector<const squash::SifObject*>& objects) {
  std::string s;
  for (const auto* o : objects) s += (s.empty() ? "" : ", ") + std::to_string(o->id);
  return s;
}

bool is_signature(const squash::SifObject& o) { return o.type == static_cast<int32_t>(squash::SifData::Signature); }

// What one signature object says, checked once.
struct Checked {
  image::OpenPgp::Verified pgp;
  std::string problem;  // pgp's, or the descriptor's fingerprint not the signer's
};

}  // namespace

std::vector<std::string> verify_sif(const std::string& path, const VerifyOptions& options) {
  if (options.keys.empty() && options.gpg_homes.empty())
    throw Error("rt verify needs the public keys to trust: --key FILE (or --gpg-home DIR)",
                "export one with gpg --export --armor KEYID > key.asc");
  util::UniqueFd fd = util::open_fd(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (!squash::is_sif(fd.get())) throw Error("`" + path + "` is not a SIF file");
  const squash::SifFile sif = squash::read_sif(fd.get(), path);
  const std::string where = "`" + path + "`";

  image::OpenPgp pgp;
  for (const auto& k : options.keys) pgp.import_file(k);
  for (const auto& h : options.gpg_homes) pgp.import_home(h);

  std::vector<std::string> failures, report;
  // pkg/integrity (Verifier.Verify): an object in no group is covered by
  // no signature; only signatures may be.
  for (const auto& o : sif.objects)
    if (image::sif_group(o) == 0 && !is_signature(o))
      failures.push_back(object_name(o) + " is in no object group, so no signature covers it");
  const std::vector<uint32_t> groups = image::sif_groups(sif);
  if (groups.empty() && failures.empty()) failures.push_back("it holds no object groups, so nothing is signed");

  std::map<uint32_t, Checked> checked;  // by signature id
  auto check = [&](const squash::SifObject& sig) -> const Checked& {
    if (auto c = checked.find(sig.id); c != checked.end()) return c->second;
    Checked c;
    const std::string data = util::read_at(fd.get(), sig.offset, std::min<uint64_t>(sig.size, kSignatureLimit), path);
    c.pgp = pgp.verify_clearsigned(data);
    c.problem = c.pgp.problem;
    const std::string recorded = upper(image::sif_signature_fingerprint(sig));
    if (c.pgp.good && !recorded.empty() && recorded != upper(c.pgp.fingerprint)) {
      c.pgp.good = false;
      c.problem = "its descriptor names key " + recorded + ", but key " + c.pgp.fingerprint + " signed it";
    }
    return checked.emplace(sig.id, std::move(c)).first->second;
  };
  auto signature_name = [](const squash::SifObject& sig, const Checked& c) {
    return "signature object " + std::to_string(sig.id) +
           (c.pgp.fingerprint.empty() ? std::string() : " (key " + c.pgp.fingerprint + ")");
  };

  for (const uint32_t g : groups) {
    const auto objects = image::sif_group_objects(sif, g);
    const std::string group = "object group " + std::to_string(g) + " (objects " + id_list(objects) + ")";
    std::vector<std::string> good_by, problems;
    bool legacy_seen = false;
    for (const auto& sig : sif.objects) {
      if (!is_signature(sig) || image::sif_linked_group(sig) != g) continue;
      const Checked& c = check(sig);
      const std::string name = signature_name(sig, c);
      if (!c.pgp.good) {
        problems.push_back(name + ": " + c.problem);
        continue;
      }
      std::string why;
      try {
        if (image::is_sif_legacy_text(c.pgp.text)) {
          legacy_seen = true;
          if (!options.legacy) continue;
          const std::string digest = image::parse_sif_legacy_text(c.pgp.text, sig.hash);
          if (image::sif_digest_objects(image::sif_digest_alg(digest), fd.get(), objects, path) != digest)
            why = "the data of objects " + id_list(objects) + " differs from what was signed (digest mismatch)";
        } else {
          why = image::sif_check_metadata(fd.get(), sif, g, image::parse_sif_metadata(c.pgp.text), path);
        }
      } catch (const Error& e) {
        why = e.what();
      }
      if (why.empty())
        good_by.push_back(c.pgp.fingerprint);
      else
        problems.push_back(name + ": " + why);
    }
    // Legacy signatures of single objects (linked to the object, kept in
    // its group): the group is covered when each of its other objects is.
    if (good_by.empty() && options.legacy) {
      std::vector<std::string> by, gaps;
      for (const auto* o : objects) {
        if (is_signature(*o)) continue;
        bool covered = false;
        for (const auto& sig : sif.objects) {
          if (!is_signature(sig) || image::sif_linked_group(sig) != 0 || sig.link != o->id) continue;
          const Checked& c = check(sig);
          std::string why = c.problem;
          if (c.pgp.good && !image::is_sif_legacy_text(c.pgp.text)) why = "not a legacy signature of one object";
          if (why.empty()) try {
              const std::string digest = image::parse_sif_legacy_text(c.pgp.text, sig.hash);
              if (image::sif_digest_at(image::sif_digest_alg(digest), fd.get(), o->offset, o->size, path) != digest)
                why = object_name(*o) + ": its data differs from what was signed (digest mismatch)";
            } catch (const Error& e) {
              why = e.what();
            }
          if (why.empty()) {
            covered = true;
            if (std::find(by.begin(), by.end(), c.pgp.fingerprint) == by.end()) by.push_back(c.pgp.fingerprint);
          } else {
            problems.push_back(signature_name(sig, c) + ": " + why);
          }
        }
        if (!covered) gaps.push_back(object_name(*o));
      }
      if (gaps.empty() && !by.empty())
        good_by = by;
      else if (!by.empty())
        for (const auto& gap : gaps) problems.push_back(gap + " is signed by no legacy signature");
    }
    // A signature that fails with a key given is a failure even beside a
    // good one: the file was changed after one of its signers signed it.
    bool tampered = false;
    for (const auto& p : problems) tampered = tampered || p.find("signed by a key not given") == std::string::npos;
    if (!good_by.empty() && !tampered) {
      std::string by;
      for (const auto& f : good_by)
        if (by.find(f) == std::string::npos) by += (by.empty() ? "" : ", ") + f;
      report.push_back(group + ": signed by " + by + (legacy_seen && options.legacy ? " (legacy signature)" : ""));
      continue;
    }
    if (problems.empty())
      problems.push_back(legacy_seen ? "signed in the legacy format only, which covers neither header nor descriptors"
                                     : "no signature");
    for (const auto& p : problems) failures.push_back(group + ": " + p);
  }
  if (!failures.empty()) {
    std::string msg = where + ": the signatures do not verify:";
    for (const auto& f : failures) msg += "\n  " + f;
    bool only_legacy = false;
    for (const auto& f : failures) only_legacy = only_legacy || f.find("legacy format only") != std::string::npos;
    // Exit status 1: the file does not verify (125: rt could not tell).
    throw Error(msg,
                only_legacy ? "rt verify --legacy-insecure accepts legacy signatures (they cover the data only)" : "",
                1);
  }
  return report;
}


std::vector<std::string> sign_sif(const std::string& path, const SignOptions& options) {
  if (options.key.empty())
    throw Error("rt sign needs the secret key to sign with: --key FILE",
                "export one with gpg --export-secret-keys --armor KEYID > key.asc");
  util::UniqueFd fd = util::open_fd(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (!squash::is_sif(fd.get())) throw Error("`" + path + "` is not a SIF file");
  squash::SifFile sif = squash::read_sif(fd.get(), path);
  const std::vector<uint32_t> groups = image::sif_groups(sif);
  if (groups.empty()) throw Error("`" + path + "` holds no object groups: nothing to sign");

  image::OpenPgp pgp;
  const std::vector<std::string> keys = pgp.import_file(options.key);
  std::string key;
  if (!options.fingerprint.empty()) {
    for (const auto& k : keys)
      if (upper(k).ends_with(upper(options.fingerprint))) key = k;
    if (key.empty()) throw Error("key file `" + options.key + "` holds no key " + options.fingerprint);
  } else if (keys.size() == 1) {
    key = keys.front();
  } else {
    std::string all;
    for (const auto& k : keys) all += " " + k;
    throw Error("key file `" + options.key + "` holds " + std::to_string(keys.size()) + " keys:" + all,
                "choose one with --fingerprint FPR");
  }

  // Every group's signature first (they cover no signature object, and
  // the header fields they cover do not change), then written.
  std::vector<std::pair<uint32_t, std::string>> signatures;
  for (const uint32_t g : groups) {
    const std::string text = image::sif_metadata_json(image::sif_group_metadata(fd.get(), sif, g, path));
    signatures.emplace_back(g, pgp.clearsign(text, key, app::passphrase_from("")));
  }
  const std::string extra = image::sif_signature_extra(key);

  const int64_t now = ::time(nullptr);
  std::vector<std::string> report;
  for (const auto& [g, text] : signatures) {
    const uint32_t id = squash::sif_append(fd.get(), sif, path, squash::SifData::Signature, 0xf0000000u,
                                           g | 0xf0000000u, text.size(), 1, now, extra,
                                           [&](uint64_t at) { util::pwrite_all(fd.get(), text, at, path); });
    report.push_back("object group " + std::to_string(g) + ": signed by " + key + " (signature object " +
                     std::to_string(id) + ")");
  }
  return report;
}

std::pair<std::string, std::string> generate_key(const KeyGenerateOptions& o) {
  if (o.output_prefix.empty()) throw Error("rt key generate: --output-prefix is empty");
  const std::string priv = o.output_prefix + ".private", pub = o.output_prefix + ".pub";
  for (const auto& f : {priv, pub})
    if (util::path_exists(f)) throw Error("`" + f + "` exists: rt key generate replaces no key", "choose another --output-prefix");
  const image::SigstoreKeyPair pair = image::generate_sigstore_key(app::sign_passphrase(priv, o.passphrase_file));
  // Both made new (O_EXCL, no link followed); the private key is the user's alone.
  auto write_new = [](const std::string& path, const std::string& data, mode_t mode) {
    util::UniqueFd fd = util::open_fd(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    util::write_all(fd.get(), data, path);
  };
  write_new(priv, pair.private_pem, 0600);
  try {
    write_new(pub, pair.public_pem, 0644);
  } catch (...) {
    ::unlink(priv.c_str());
    throw;
  }
  return {priv, pub};
}

}  // namespace rt
