// An image's trust policy applied (host): the requirements of
// image/policy for a reference, simple-signing signatures read from the
// lookaside store registries.d names (file:// or http(s)://) and checked
// through GPGME against only the keys a signedBy requirement names,
// sigstore signatures read from registry attachments and checked against
// a sigstoreSigned requirement's public keys (image/sigstore); and the
// signatures rt push makes, written into a file:// lookaside store or
// attached in the registry.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "image/policy.hpp"
#include "image/registry.hpp"
#include "image/sigstore.hpp"
#include "store/ref.hpp"

namespace rt::image {

// What admitted an image.
struct Admission {
  std::string policy;       // the policy file
  std::string scope;        // `docker "HOST/REPO"`, `docker ""` or `default`
  std::string requirement;  // the requirements, as Requirement::str, joined by ", "
  std::string signer;       // the fingerprint whose signature admitted it ("" when none was needed)
  std::string manifest_digest;  // what was judged: the manifest or index the reference names
};

struct PolicySubject {
  store::Reference ref;         // what is pulled
  std::string manifest_digest;  // the digest of the manifest (or index) the reference names
  // The signatures of `manifest_digest`, read when a signedBy requirement
  // applies; empty function: signatures cannot be had for this kind of
  // pull, and `no_signatures` says so.
  std::function<std::vector<std::string>()> signatures;
  std::string no_signatures;
  // The same for sigstore signatures (registry attachments), read when a
  // sigstoreSigned requirement applies.
  std::function<std::vector<SigstoreSignature>()> sigstore;
  std::string no_sigstore;
};

// Applies `p` to `s`: every requirement of the most specific scope must
// hold. Throws rt::Error naming the image, the policy, the scope, the
// requirement and why it refused.
Admission check_policy(const Policy& p, const PolicySubject& s);

// The signatures of `digest` in the lookaside store `base`, signature-1,
// signature-2, ... up to the first missing (4 MiB each at most). `tls`:
// the registry's CA file and --insecure, for an https:// store.
std::vector<std::string> read_lookaside(const std::string& base, const store::Reference& ref,
                                        const std::string& digest, const RegistryOptions& tls);

// Throws rt::Error (`what`, then why) unless registries.d sets
// use-sigstore-attachments for `ref`: sigstore signatures are read and
// written only there, as containers/image does.
void require_sigstore_attachments(const store::Reference& ref, const std::string& what);
// The sigstore signatures of `digest` attached in `reg`'s repository: the
// layers of its manifest tagged sigstore_attachment_tag(digest), each a
// payload blob with its signature in an annotation (as cosign and
// containers/image write them). None when there is no such manifest; a
// layer that cannot be read whole is returned with its problem.
std::vector<SigstoreSignature> read_sigstore_attachments(Registry& reg, const std::string& digest);
// Adds `sig` to `digest`'s attachment manifest in `reg`'s repository (made
// when there is none; a signature it holds already is not added twice).
// Returns the attachment's tag.
std::string write_sigstore_attachment(Registry& reg, const std::string& digest, const SigstoreSignature& sig);

// rt push --sign-by's store: the lookaside registries.d (find_registries_d)
// names for writing `ref`'s signatures (lookaside_for_write), which must be
// a file:///DIR URL: containers/image writes no http(s) store either
// (docs/signature-protocols.md: publish a file:// staging store with a web
// server). Throws rt::Error otherwise. `registries_d` gets the directory read.
std::string lookaside_for_push(const store::Reference& ref, std::string* registries_d);
// Adds `signature` to the file:// store `base` as the first free
// signature-N of `digest` (signature_url), its directories made (0755, as
// the files: the store is meant to be published): written whole under a
// temporary name, then linked, so a reader never sees half of it and two
// writers never take the same N. Returns the file's path and N.
std::pair<std::string, int> write_lookaside(const std::string& base, const store::Reference& ref,
                                            const std::string& digest, std::string_view signature);

// rt pull's step: the policy file (`given`, else the user's, else the
// system's: find_policy_file) applied to `ref` and its manifest's digest,
// signatures read as registries.d says. nullopt when there is no policy
// file at all (everything is accepted then, as before rt read one).
// `oras`: a SIF file pulled (oras://), for which rt reads no simple
// signatures: signedBy refuses.
std::optional<Admission> admit_image(const std::string& given, const store::Reference& ref,
                                     const std::string& manifest_digest, const RegistryOptions& tls, bool oras);

}  // namespace rt::image
