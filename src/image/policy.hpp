// Image trust policy as podman and skopeo read it (pure, but for the file
// lookups): containers-policy.json(5) for the docker transport, and
// containers-registries.d(5) for where simple-signing signatures are kept
// (a "lookaside" store), and the signed payload of containers-signature(5).
// The checks against signatures are image/signatures.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "store/ref.hpp"

namespace rt::image {

// signedBy's signedIdentity: which docker-reference in a signature is
// accepted for the image being pulled.
struct SignedIdentity {
  enum class Kind { MatchExact, MatchRepoDigestOrExact, MatchRepository, ExactReference, ExactRepository, RemapIdentity };
  Kind kind = Kind::MatchRepoDigestOrExact;  // the default
  std::string reference;                     // exactReference: a tagged or digested reference
  std::string repository;                    // exactRepository
  std::string prefix, signed_prefix;         // remapIdentity
  std::string str() const;                   // "matchRepoDigestOrExact", "exactReference REF", ...
};

struct Requirement {
  enum class Type { InsecureAcceptAnything, Reject, SignedBy, SigstoreSigned, Unknown };
  Type type = Type::Reject;
  std::string type_name;               // as written (what an Unknown one says)
  std::string key_type;                // signedBy: "GPGKeys" (the only one rt checks)
  std::vector<std::string> key_paths;  // keyPath or keyPaths
  std::string key_data;                // signedBy's keyData, decoded from base64
  std::vector<std::string> key_datas;  // sigstoreSigned's keyData or keyDatas, decoded (PEM public keys)
  // sigstoreSigned with what rt does not check (fulcio, rekorPublicKey*,
  // pki): named here, and it refuses wherever it applies.
  std::string unsupported;
  SignedIdentity identity;
  // For messages: "signedBy (GPGKeys from `/etc/pki/a.gpg`)", "reject".
  std::string str() const;
};

struct Policy {
  std::string source;                                       // the file, for messages
  std::vector<Requirement> fallback;                        // "default"
  std::map<std::string, std::vector<Requirement>> docker;   // transports.docker: scope -> requirements
};

// Parses a containers-policy.json(5) document; throws rt::Error naming
// `source` and the key on anything malformed (unknown keys included, as
// containers/image does). A requirement of a type rt does not know is
// kept as Unknown: it refuses wherever it applies.
Policy parse_policy(std::string_view text, const std::string& source);
Policy read_policy(const std::string& path);
// The policy file the containers tools would read: `given` (which must
// exist), else $HOME/.config/containers/policy.json, else `site` (the
// site configuration's image.policy, which must exist when set), else
// /etc/containers/policy.json; "" when there is none.
std::string find_policy_file(const std::string& given, const std::string& site = "");

// The docker transport's scopes for `ref`, most specific first: its
// identity (HOST/REPO:TAG, or HOST/REPO@DIGEST when it has a digest),
// then HOST/REPO, each parent namespace, HOST, and the wildcards *.DOMAIN
// of HOST without its port.
std::vector<std::string> policy_scopes(const store::Reference& ref);
// The requirements that apply to `ref`: the most specific docker scope,
// else the transport's "" scope, else "default". `scope` gets the scope
// ("default" for the global one).
const std::vector<Requirement>& requirements_for(const Policy& p, const store::Reference& ref, std::string* scope);

// Whether a signature claiming `signed_reference` (its docker-reference)
// is one for `ref` under `id`. A reference that does not parse matches
// nothing.
bool identity_matches(const SignedIdentity& id, const store::Reference& ref, std::string_view signed_reference);

// containers-registries.d(5): where each registry keeps its signatures.
struct RegistriesD {
  std::string default_docker;                // default-docker: lookaside
  std::map<std::string, std::string> docker;  // docker: NAMESPACE: lookaside
  // Where signatures are written: lookaside-staging (or sigstore-staging),
  // else the lookaside read from.
  std::string default_docker_write;
  std::map<std::string, std::string> docker_write;
  // use-sigstore-attachments: of default-docker, and of each namespace
  // (absent where a namespace does not set it).
  bool default_attachments = false;
  std::map<std::string, bool> attachments;
};
// Parses the YAML files `files` (name, text) of one registries.d
// directory; a namespace (or default-docker) given twice, unknown keys or
// malformed YAML throw rt::Error naming the file.
RegistriesD parse_registries_d(const std::vector<std::pair<std::string, std::string>>& files);
// Reads `dir`'s *.yaml files (sorted); nothing when it is "" or absent.
RegistriesD read_registries_d(const std::string& dir);
// $HOME/.config/containers/registries.d if it exists, else
// /etc/containers/registries.d.
std::string find_registries_d();
// The lookaside base URL for `ref`: the most specific namespace that names
// one (lookaside, or the older key sigstore), else default-docker, else
// containers/image's built-in default for a user who is not root,
// file://$HOME/.local/share/containers/sigstore.
std::string lookaside_for(const RegistriesD& d, const store::Reference& ref);
// The same for writing a signature (rt push --sign-by): the most specific
// namespace's lookaside-staging, sigstore-staging, lookaside or sigstore,
// as containers/image looks them up for a write.
std::string lookaside_for_write(const RegistriesD& d, const store::Reference& ref);
// Whether sigstore signatures of `ref` are registry attachments: the
// use-sigstore-attachments of the most specific namespace registries.d
// names (set or not), else of default-docker (containers/image's rule).
bool use_sigstore_attachments(const RegistriesD& d, const store::Reference& ref);
// The URL of signature `n` (1, 2, ...) of the manifest `digest`:
// BASE/REPOSITORY@ALG=HEX/signature-N (containers/image,
// docs/signature-protocols.md).
std::string signature_url(const std::string& base, const store::Reference& ref, const std::string& digest, int n);

// The payload of a simple-signing signature (containers-signature(5)):
// {"critical": {"identity": {"docker-reference": R}, "image":
// {"docker-manifest-digest": D}, "type": "atomic container signature"},
// "optional": {...}}. Unknown keys in "critical" are refused.
struct SignaturePayload {
  std::string docker_reference;
  std::string manifest_digest;
};
// Throws rt::Error saying what is wrong.
SignaturePayload parse_signature_payload(std::string_view json);
// The payload rt signs for `p` (containers-signature(5)), with "creator"
// and "timestamp" (seconds since the epoch) in "optional".
// `type`: critical.type (a sigstore payload's is another: image/sigstore).
std::string make_signature_payload(const SignaturePayload& p, const std::string& creator, int64_t timestamp,
                                   const char* type = "atomic container signature");

}  // namespace rt::image
