// Trust policy applied to a pull (host); see signatures.hpp.
#include "image/signatures.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>

#include "hpc/site_config.hpp"
#include "image/manifest.hpp"
#include "image/openpgp.hpp"
#include "rt/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

// containers/image's limit on one signature (docker/docker_image_src.go).
constexpr size_t kMaxSignature = 4 << 20;
// More than any site signs one manifest with; a store that never ends
// (a server answering every name) is cut here.
constexpr int kMaxSignatures = 64;

struct SignatureBody {
  std::string data;
  bool too_big = false;
};

size_t on_signature_body(char* p, size_t size, size_t n, void* user) {
  auto* b = static_cast<SignatureBody*>(user);
  if (b->data.size() + size * n > kMaxSignature) {
    b->too_big = true;
    return 0;
  }
  b->data.append(p, size * n);
  return size * n;
}

// One signature over HTTP(S): its bytes, or nullopt on 404 (the end).
std::optional<std::string> http_get(const std::string& url, const RegistryOptions& tls) {
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  if (!h) throw Error("libcurl: cannot start a request for `" + url + "`");
  SignatureBody body;
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.get(), CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h.get(), CURLOPT_REDIR_PROTOCOLS_STR, url.starts_with("https:") ? "https" : "http,https");
  curl_easy_setopt(h.get(), CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h.get(), CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h.get(), CURLOPT_USERAGENT, "rt/" RT_VERSION);
  curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h.get(), CURLOPT_TIMEOUT, 120L);
  curl_easy_setopt(h.get(), CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, on_signature_body);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &body);
  if (!tls.ca_file.empty()) curl_easy_setopt(h.get(), CURLOPT_CAINFO, tls.ca_file.c_str());
  if (tls.insecure) {
    curl_easy_setopt(h.get(), CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h.get(), CURLOPT_SSL_VERIFYHOST, 0L);
  }
  const CURLcode rc = curl_easy_perform(h.get());
  if (body.too_big) throw Error("signature `" + url + "` is larger than 4 MiB");
  if (rc != CURLE_OK) throw Error("cannot read signature `" + url + "`: " + (*errbuf ? errbuf : curl_easy_strerror(rc)));
  long status = 0;
  curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status == 404) return std::nullopt;
  if (status != 200) throw Error("signature `" + url + "`: the server answered HTTP " + std::to_string(status));
  return body.data;
}

[[noreturn]] void refuse_image(const Policy& p, const PolicySubject& s, const std::string& scope, const Requirement& r,
                         const std::string& why) {
  throw Error("image `" + s.ref.str() + "` refused by policy `" + p.source + "` (" + scope + ", requirement " +
                  r.str() + "): " + why,
              "the trust policy is containers-policy.json(5), as podman and skopeo read it; rt-policy(5)");
}

// Why a signature's payload does not fit the image: unreadable, another
// manifest, or an identity the requirement does not accept; "" when it fits.
std::string payload_misfit(SignaturePayload (*parse)(std::string_view), std::string_view text, const PolicySubject& s,
                           const Requirement& r) {
  SignaturePayload payload;
  try {
    payload = parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  if (payload.manifest_digest != s.manifest_digest)
    return "digest mismatch: it signs " + payload.manifest_digest + ", the registry's manifest is " + s.manifest_digest;
  if (!identity_matches(r.identity, s.ref, payload.docker_reference))
    return "identity mismatch: it signs `" + payload.docker_reference + "`, which " + r.identity.str() +
           " does not accept for `" + s.ref.str() + "`";
  return "";
}

// signedBy: true with the signer once one signature holds; else throws.
std::string signed_by(const Policy& p, const PolicySubject& s, const std::string& scope, const Requirement& r,
                      std::optional<std::vector<std::string>>& sigs) {
  if (r.key_type != "GPGKeys") refuse_image(p, s, scope, r, "keyType `" + r.key_type + "` is not supported by rt (GPGKeys only)");
  if (!s.signatures) refuse_image(p, s, scope, r, s.no_signatures);
  OpenPgp pgp;
  std::vector<std::string> keys;
  try {
    for (const auto& path : r.key_paths)
      for (auto& f : pgp.import_file(path)) keys.push_back(std::move(f));
    if (!r.key_data.empty())
      for (auto& f : pgp.import_data(r.key_data, "keyData")) keys.push_back(std::move(f));
  } catch (const Error& e) {
    refuse_image(p, s, scope, r, std::string("its keys cannot be read: ") + e.what());
  }
  if (!sigs) sigs = s.signatures();
  if (sigs->empty()) refuse_image(p, s, scope, r, "no signature (the lookaside store has none for " + s.manifest_digest + ")");
  std::vector<std::string> why;
  for (size_t i = 0; i < sigs->size(); ++i) {
    const std::string n = "signature-" + std::to_string(i + 1) + ": ";
    OpenPgp::Verified v = pgp.verify_signed_message((*sigs)[i]);
    if (!v.good) {
      why.push_back(n + v.problem);
      continue;
    }
    // The home holds only the requirement's keys, so GnuPG knows no
    // other; checked again all the same.
    if (std::find(keys.begin(), keys.end(), v.fingerprint) == keys.end()) {
      why.push_back(n + "signed by a key not given (" + v.fingerprint + ")");
      continue;
    }
    if (std::string misfit = payload_misfit(parse_signature_payload, v.text, s, r); !misfit.empty()) {
      why.push_back(n + misfit);
      continue;
    }
    util::info("signature " + std::to_string(i + 1) + " of `" + s.ref.str() + "` by " + v.fingerprint + " holds");
    return v.fingerprint;
  }
  refuse_image(p, s, scope, r, util::join(why, "; "));
}

// sigstoreSigned: the signer's key (its name) once one signature holds;
// else throws.
std::string sigstore_signed(const Policy& p, const PolicySubject& s, const std::string& scope, const Requirement& r,
                            std::optional<std::vector<SigstoreSignature>>& sigs) {
  if (!r.unsupported.empty())
    refuse_image(p, s, scope, r, "`" + r.unsupported + "` is not supported by rt (public keys only)");
  if (!s.sigstore) refuse_image(p, s, scope, r, s.no_sigstore);
  std::vector<SigstoreKey> keys;
  try {
    for (const auto& path : r.key_paths) {
      auto text = util::read_regular_if_exists(path, 1 << 20);
      if (!text) throw Error("`" + path + "` does not exist");
      keys.emplace_back(*text, path);
    }
    for (size_t i = 0; i < r.key_datas.size(); ++i)
      keys.emplace_back(r.key_datas[i], r.key_datas.size() == 1 ? "keyData" : "keyDatas[" + std::to_string(i) + "]");
  } catch (const Error& e) {
    refuse_image(p, s, scope, r, std::string("its keys cannot be read: ") + e.what());
  }
  if (!sigs) sigs = s.sigstore();
  if (sigs->empty())
    refuse_image(p, s, scope, r, "no sigstore signature (the registry has no attachment `" +
                                     sigstore_attachment_tag(s.manifest_digest) + "`)");
  std::vector<std::string> why;
  for (size_t i = 0; i < sigs->size(); ++i) {
    const SigstoreSignature& sig = (*sigs)[i];
    const std::string n = "sigstore signature " + std::to_string(i + 1) + ": ";
    if (!sig.problem.empty()) {
      why.push_back(n + sig.problem);
      continue;
    }
    auto key = std::find_if(keys.begin(), keys.end(), [&](const SigstoreKey& k) {
      return k.verifies(sig.payload, sig.signature_b64);
    });
    if (key == keys.end()) {
      why.push_back(n + "not a valid signature by " + (keys.size() == 1 ? "the key" : "any of the keys"));
      continue;
    }
    if (std::string misfit = payload_misfit(parse_sigstore_payload, sig.payload, s, r); !misfit.empty()) {
      why.push_back(n + misfit);
      continue;
    }
    util::info("sigstore signature " + std::to_string(i + 1) + " of `" + s.ref.str() + "` by `" + key->name() +
               "` holds");
    return "sigstore key `" + key->name() + "`";
  }
  refuse_image(p, s, scope, r, util::join(why, "; "));
}

constexpr const char* kSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json";
constexpr const char* kSignatureAnnotation = "dev.cosignproject.cosign/signature";

// "attachment `HOST/REPO:sha256-HEX.sig`", for messages.
std::string attachment_name(const Registry& reg, const std::string& tag) {
  return "attachment `" + reg.ref().registry + "/" + reg.ref().repository + ":" + tag + "`";
}

}  // namespace

void require_sigstore_attachments(const store::Reference& ref, const std::string& what) {
  const std::string dir = find_registries_d();
  if (!use_sigstore_attachments(read_registries_d(dir), ref))
    throw Error(what + ", and registries.d `" + dir + "` does not set use-sigstore-attachments for it",
                "set `use-sigstore-attachments: true` for the registry in registries.d, as podman and skopeo need too");
}

std::vector<SigstoreSignature> read_sigstore_attachments(Registry& reg, const std::string& digest) {
  const std::string tag = sigstore_attachment_tag(digest);
  auto doc = reg.find_manifest(tag);
  if (!doc) return {};
  const std::string what = attachment_name(reg, tag);
  const nlohmann::json m = parse_json(doc->body, what);
  if (!m.is_object() || !m.contains("layers") || !m["layers"].is_array())
    throw Error(what + " is not an image manifest");
  std::vector<SigstoreSignature> out;
  for (const auto& l : m["layers"]) {
    if (out.size() >= static_cast<size_t>(kMaxSignatures)) break;
    if (!l.is_object() || !l.contains("mediaType") || l["mediaType"] != kSimpleSigning) continue;
    SigstoreSignature sig;
    auto a = l.find("annotations");
    const nlohmann::json* value = a != l.end() && a->is_object() && a->contains(kSignatureAnnotation)
                                      ? &(*a)[kSignatureAnnotation]
                                      : nullptr;
    if (!value || !value->is_string()) {
      sig.problem = "a layer of " + what + " has no signature annotation";
    } else {
      sig.signature_b64 = value->get<std::string>();
      try {
        const Descriptor d = parse_descriptor(l, what);  // the digest validated before it is in a URL
        if (d.size < 0 || d.size > static_cast<int64_t>(kMaxSignature))
          throw Error("its payload's size is not between 0 and 4 MiB");
        sig.payload = reg.get_blob(d);
      } catch (const Error& e) {
        sig.problem = "its payload cannot be read: " + std::string(e.what());
      }
    }
    out.push_back(std::move(sig));
  }
  return out;
}

std::string write_sigstore_attachment(Registry& reg, const std::string& digest, const SigstoreSignature& sig) {
  const std::string tag = sigstore_attachment_tag(digest);
  const std::string what = attachment_name(reg, tag);
  nlohmann::json layers = nlohmann::json::array();
  std::vector<std::string> digests;  // of the layers kept
  if (auto doc = reg.find_manifest(tag)) {
    const nlohmann::json m = parse_json(doc->body, what);
    if (!m.contains("layers") || !m["layers"].is_array())
      throw Error(what + " is not an image manifest: no signature is added to it");
    layers = m["layers"];
    for (const auto& l : layers) digests.push_back(parse_descriptor(l, what).digest);
  }
  const Descriptor payload = reg.put_small_blob(sig.payload, kSimpleSigning);
  for (const auto& l : layers)
    if (l["digest"] == payload.digest) {
      auto a = l.find("annotations");
      if (a != l.end() && a->is_object() && a->contains(kSignatureAnnotation) &&
          (*a)[kSignatureAnnotation] == sig.signature_b64)
        return tag;
    }
  layers.push_back({{"mediaType", kSimpleSigning},
                    {"digest", payload.digest},
                    {"size", payload.size},
                    {"annotations", {{kSignatureAnnotation, sig.signature_b64}}}});
  // The config as containers/image writes it: the layers' digests as diff_ids.
  digests.push_back(payload.digest);
  const nlohmann::json diff_ids = digests;
  const nlohmann::json config = {{"architecture", ""},
                                 {"os", ""},
                                 {"config", nlohmann::json::object()},
                                 {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  const Descriptor c = reg.put_small_blob(config.dump(), media::kOciConfig);
  const nlohmann::json manifest = {
      {"schemaVersion", 2},
      {"mediaType", media::kOciManifest},
      {"config", {{"mediaType", c.media_type}, {"digest", c.digest}, {"size", c.size}}},
      {"layers", layers}};
  reg.put_manifest(tag, manifest.dump(), media::kOciManifest);
  return tag;
}

Admission check_policy(const Policy& p, const PolicySubject& s) {
  Admission a;
  a.policy = p.source;
  const std::vector<Requirement>& reqs = requirements_for(p, s.ref, &a.scope);
  std::optional<std::vector<std::string>> sigs;  // read once, when needed
  std::optional<std::vector<SigstoreSignature>> sigstore;
  std::vector<std::string> names;
  for (const Requirement& r : reqs) {
    names.push_back(r.str());
    switch (r.type) {
    case Requirement::Type::InsecureAcceptAnything:
      break;
    case Requirement::Type::Reject:
      refuse_image(p, s, a.scope, r, "rejected by policy");
    case Requirement::Type::Unknown:
      refuse_image(p, s, a.scope, r, "requirement type `" + r.type_name + "` is not supported by rt, so nothing it covers is accepted");
    case Requirement::Type::SignedBy:
      a.signer = signed_by(p, s, a.scope, r, sigs);
      break;
    case Requirement::Type::SigstoreSigned:
      a.signer = sigstore_signed(p, s, a.scope, r, sigstore);
      break;
    }
  }
  a.requirement = util::join(names, ", ");
  return a;
}

std::vector<std::string> read_lookaside(const std::string& base, const store::Reference& ref,
                                        const std::string& digest, const RegistryOptions& tls) {
  const bool file = base.starts_with("file://");
  if (!file && !base.starts_with("http://") && !base.starts_with("https://"))
    throw Error("lookaside `" + base + "` is not a file://, http:// or https:// URL", "see containers-registries.d(5)");
  if (file && !base.starts_with("file:///"))
    throw Error("lookaside `" + base + "`: a file:// URL takes an absolute path (file:///DIR)");
  std::vector<std::string> out;
  for (int n = 1; n <= kMaxSignatures; ++n) {
    const std::string url = signature_url(base, ref, digest, n);
    std::optional<std::string> sig =
        file ? util::read_regular_if_exists(url.substr(7), kMaxSignature) : http_get(url, tls);
    if (!sig) break;
    util::debug("read `" + url + "`");
    out.push_back(std::move(*sig));
  }
  return out;
}

std::string lookaside_for_push(const store::Reference& ref, std::string* registries_d) {
  const std::string dir = find_registries_d();
  if (registries_d) *registries_d = dir;
  const std::string base = lookaside_for_write(read_registries_d(dir), ref);
  if (base.starts_with("http://") || base.starts_with("https://"))
    throw Error("signatures of `" + ref.str() + "` would go to `" + base + "` (registries.d `" + dir +
                    "`), and rt writes signatures only into a file:// lookaside",
                "set lookaside-staging: file:///DIR for it in registries.d, then publish DIR at that URL");
  if (!base.starts_with("file:///"))
    throw Error("lookaside `" + base + "` (registries.d `" + dir + "`) is not a file:///DIR URL",
                "see containers-registries.d(5)");
  return base;
}

std::pair<std::string, int> write_lookaside(const std::string& base, const store::Reference& ref,
                                            const std::string& digest, std::string_view signature) {
  const std::string first = signature_url(base, ref, digest, 1).substr(7);
  const std::string dir = first.substr(0, first.rfind('/'));
  // mkdir -p: each component, an existing one (or a link to one) kept.
  for (size_t at = 1; at != std::string::npos;) {
    at = dir.find('/', at + 1);
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", part};
  }
  util::UniqueFd d = util::open_fd(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int n = 1; n <= kMaxSignatures; ++n) {
    const std::string name = "signature-" + std::to_string(n);
    struct stat st;
    if (::fstatat(d.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) continue;
    const std::string tmp = "." + name + "." + std::to_string(::getpid()) + ".tmp";
    {
      util::UniqueFd f = util::open_fd_at(d.get(), tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      util::write_all(f.get(), signature, dir + "/" + tmp);
    }
    const int err = ::linkat(d.get(), tmp.c_str(), d.get(), name.c_str(), 0) == 0 ? 0 : errno;
    ::unlinkat(d.get(), tmp.c_str(), 0);
    if (err == EEXIST) continue;  // taken by another writer meanwhile
    if (err) throw SysError{err, "link", dir + "/" + name};
    return {dir + "/" + name, n};
  }
  throw Error("lookaside directory `" + dir + "` holds " + std::to_string(kMaxSignatures) +
              " signatures already: no more are added");
}

std::optional<Admission> admit_image(const std::string& given, const store::Reference& ref,
                                     const std::string& manifest_digest, const RegistryOptions& tls, bool oras) {
  auto site_policy = hpc::load_site_config().get("image.policy");
  const std::string file = find_policy_file(given, site_policy.empty() ? "" : site_policy.front());
  if (file.empty()) {
    util::info("no policy file (~/.config/containers/policy.json, /etc/containers/policy.json): `" + ref.str() +
               "` accepted");
    return std::nullopt;
  }
  const Policy p = read_policy(file);
  PolicySubject s{ref, manifest_digest, {}, {}, {}, {}};
  if (oras) {
    s.no_signatures = "signedBy is not supported for oras:// (rt reads no simple signatures of a SIF file; "
                      "check the file's own signatures with rt verify)";
    s.no_sigstore = "sigstoreSigned is not supported for oras:// (check the SIF file's own signatures with rt verify)";
  } else {
    s.sigstore = [&] {
      require_sigstore_attachments(ref, "image `" + ref.str() + "`: sigstore signatures are read from registry attachments");
      Registry reg(ref, tls);
      util::info("sigstore signatures of `" + ref.str() + "`: attachment `" + sigstore_attachment_tag(manifest_digest) +
                 "`");
      return read_sigstore_attachments(reg, manifest_digest);
    };
    s.signatures = [&] {
      const std::string dir = find_registries_d();
      const std::string base = lookaside_for(read_registries_d(dir), ref);
      util::info("signatures of `" + ref.str() + "`: lookaside `" + base + "` (registries.d `" + dir + "`)");
      return read_lookaside(base, ref, manifest_digest, tls);
    };
  }
  Admission a = check_policy(p, s);
  a.manifest_digest = manifest_digest;
  util::info("`" + ref.str() + "` admitted by policy `" + file + "` (" + a.scope + ": " + a.requirement +
             (a.signer.empty() ? "" : ", signed by " + a.signer) + ")");
  return a;
}

}  // namespace rt::image
