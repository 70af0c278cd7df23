#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "image/openpgp.hpp"
#include "image/policy.hpp"
#include "image/signatures.hpp"
#include "image/sigstore.hpp"
#include "rt/error.hpp"
#include "store/ref.hpp"
#include "util/strings.hpp"
#include "temp_dir.hpp"

using namespace rt::image;
using rt::store::parse_reference;

namespace {

const std::string kDigest = "sha256:" + std::string(64, 'a');

Policy policy(const std::string& transports, const std::string& fallback = R"([{"type":"reject"}])") {
  return parse_policy(R"({"default":)" + fallback + R"(,"transports":{"docker":)" + transports + "}}", "p.json");
}

std::string scope_of(const Policy& p, const std::string& ref) {
  std::string scope;
  requirements_for(p, parse_reference(ref), &scope);
  return scope;
}

SignedIdentity identity(const std::string& json) {
  Policy p = policy(R"({"r.io":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k","signedIdentity":)" + json + "}]}");
  return p.docker.at("r.io")[0].identity;
}

std::string policy_refusal(const std::string& text) {
  try {
    parse_policy(text, "p.json");
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("policy scopes of a reference, most specific first", "[policy]") {
  CHECK(policy_scopes(parse_reference("reg.example.com:5000/ns/app:v1")) ==
        std::vector<std::string>{"reg.example.com:5000/ns/app:v1", "reg.example.com:5000/ns/app",
                                 "reg.example.com:5000/ns", "reg.example.com:5000", "*.example.com", "*.com"});
  CHECK(policy_scopes(parse_reference("busybox")) ==
        std::vector<std::string>{"docker.io/library/busybox:latest", "docker.io/library/busybox", "docker.io/library",
                                 "docker.io", "*.io"});
  CHECK(policy_scopes(parse_reference("r.io/a@" + kDigest))[0] == "r.io/a@" + kDigest);
}

TEST_CASE("the most specific docker scope wins, then the transport's, then default", "[policy]") {
  Policy p = policy(R"({"r.io/ns/app:v1":[{"type":"reject"}], "r.io/ns":[{"type":"insecureAcceptAnything"}],
                        "r.io":[{"type":"reject"}], "*.example.com":[{"type":"insecureAcceptAnything"}]})");
  CHECK(scope_of(p, "r.io/ns/app:v1") == "docker \"r.io/ns/app:v1\"");
  CHECK(scope_of(p, "r.io/ns/app:v2") == "docker \"r.io/ns\"");
  CHECK(scope_of(p, "r.io/ns/deeper/app") == "docker \"r.io/ns\"");
  CHECK(scope_of(p, "r.io/other/app") == "docker \"r.io\"");
  CHECK(scope_of(p, "a.b.example.com/x") == "docker \"*.example.com\"");
  CHECK(scope_of(p, "example.com/x") == "default");  // *.example.com is for subdomains
  CHECK(scope_of(p, "r.iox/ns/app") == "default");
  Policy q = policy(R"({"":[{"type":"insecureAcceptAnything"}]})");
  CHECK(scope_of(q, "r.io/a") == "docker \"\"");
  std::string s;
  CHECK(requirements_for(q, parse_reference("r.io/a"), &s)[0].type == Requirement::Type::InsecureAcceptAnything);
}

TEST_CASE("signedBy is read with its keys and identity", "[policy]") {
  Policy p = policy(R"({"r.io/a":[{"type":"signedBy","keyType":"GPGKeys","keyPaths":["/k1","/k2"]}],
                        "r.io/b":[{"type":"signedBy","keyType":"GPGKeys","keyData":"aGVsbG8=",
                                   "signedIdentity":{"type":"remapIdentity","prefix":"m.io/x","signedPrefix":"r.io/b"}}]})");
  const Requirement& a = p.docker.at("r.io/a")[0];
  CHECK(a.type == Requirement::Type::SignedBy);
  CHECK(a.key_paths == std::vector<std::string>{"/k1", "/k2"});
  CHECK(a.identity.kind == SignedIdentity::Kind::MatchRepoDigestOrExact);
  CHECK(a.str() == "signedBy (GPGKeys from `/k1`, `/k2`)");
  const Requirement& b = p.docker.at("r.io/b")[0];
  CHECK(b.key_data == "hello");
  CHECK(b.identity.kind == SignedIdentity::Kind::RemapIdentity);
  CHECK(b.identity.signed_prefix == "r.io/b");
}

TEST_CASE("an unknown requirement type is kept and refuses where it applies", "[policy]") {
  Policy p = policy(R"({"r.io":[{"type":"sigstoreSignedBy","keyPath":"/k"}]})",
                    R"([{"type":"insecureAcceptAnything"}])");
  const Requirement& r = p.docker.at("r.io")[0];
  CHECK(r.type == Requirement::Type::Unknown);
  PolicySubject s{parse_reference("r.io/a:1"), kDigest, {}, "none"};
  REQUIRE_THROWS_WITH(check_policy(p, s), Catch::Contains("`sigstoreSignedBy` is not supported by rt") &&
                                              Catch::Contains("r.io/a:1") && Catch::Contains("docker \"r.io\""));
  // Elsewhere the default applies.
  CHECK(check_policy(p, PolicySubject{parse_reference("q.io/a:1"), kDigest, {}, "none"}).scope == "default");
}

TEST_CASE("reject and an unreadable signature source refuse; insecureAcceptAnything admits", "[policy]") {
  Policy p = policy(R"({"r.io/ok":[{"type":"insecureAcceptAnything"}],
                        "r.io/signed":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k"}],
                        "r.io/x509":[{"type":"signedBy","keyType":"X509Certificates","keyPath":"/k"}]})");
  CHECK(check_policy(p, {parse_reference("r.io/ok:1"), kDigest, {}, ""}).requirement == "insecureAcceptAnything");
  REQUIRE_THROWS_WITH(check_policy(p, {parse_reference("r.io/no:1"), kDigest, {}, ""}),
                      Catch::Contains("rejected by policy") && Catch::Contains("requirement reject"));
  REQUIRE_THROWS_WITH(check_policy(p, {parse_reference("r.io/signed:1"), kDigest, {}, "not supported for oras://"}),
                      Catch::Contains("not supported for oras://"));
  REQUIRE_THROWS_WITH(check_policy(p, {parse_reference("r.io/x509:1"), kDigest, {}, ""}),
                      Catch::Contains("X509Certificates` is not supported"));
}

TEST_CASE("malformed policies are refused naming the key", "[policy]") {
  CHECK_THAT(policy_refusal("{"), Catch::Contains("not JSON"));
  CHECK_THAT(policy_refusal(R"({"transports":{}})"), Catch::Contains("`default` is missing"));
  CHECK_THAT(policy_refusal(R"({"default":[]})"), Catch::Contains("non-empty array"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"reject"}],"extra":1})"), Catch::Contains("unknown key `extra`"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"reject","keyPath":"/k"}]})"), Catch::Contains("unknown key `keyPath`"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"signedBy","keyType":"GPGKeys"}]})"),
             Catch::Contains("exactly one of keyPath, keyPaths and keyData"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/a","keyData":"aGk="}]})"),
             Catch::Contains("exactly one of"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"signedBy","keyType":"GPGKeys","keyData":"not base64!"}]})"),
             Catch::Contains("not base64"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k",
                        "signedIdentity":{"type":"exactReference","dockerReference":"r.io/a"}}]})"),
             Catch::Contains("not a tagged or digested reference"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k",
                        "signedIdentity":{"type":"matchSomething"}}]})"),
             Catch::Contains("unknown signedIdentity type `matchSomething`") && Catch::Contains("default[0].signedIdentity"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"reject"}],"transports":{"docker":{"https://r.io":[{"type":"reject"}]}}})"),
             Catch::Contains("not a docker scope"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"reject"}],"transports":{"docker":{"r.*.io":[{"type":"reject"}]}}})"),
             Catch::Contains("not a docker scope"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"reject"}],"transports":{"docker":{"R.io/A":[{"type":"reject"}]}}})"),
             Catch::Contains("not a docker scope"));
  // Other transports are checked, not used.
  CHECK(policy_refusal(R"({"default":[{"type":"reject"}],"transports":{"oci":{"":[{"type":"insecureAcceptAnything"}]}}})") ==
        "accepted");
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"reject"}],"transports":{"oci":{"":[{"type":"reject","x":1}]}}})"),
             Catch::Contains("transports.oci"));
}

TEST_CASE("signedIdentity decides which signed reference fits the image", "[policy]") {
  const auto tagged = parse_reference("r.io/ns/app:v1");
  const auto digested = parse_reference("r.io/ns/app@" + kDigest);
  const auto def = identity(R"({"type":"matchRepoDigestOrExact"})");
  CHECK(identity_matches(def, tagged, "r.io/ns/app:v1"));
  CHECK_FALSE(identity_matches(def, tagged, "r.io/ns/app:v2"));
  CHECK_FALSE(identity_matches(def, tagged, "r.io/ns/other:v1"));
  CHECK_FALSE(identity_matches(def, tagged, "r.io/ns/app"));  // name-only never matches
  CHECK(identity_matches(def, digested, "r.io/ns/app:anything"));
  CHECK_FALSE(identity_matches(def, digested, "r.io/ns/other:v1"));
  CHECK_FALSE(identity_matches(def, tagged, "not a reference"));
  CHECK_FALSE(identity_matches(def, tagged, "docker://r.io/ns/app:v1"));
  // Normalized as docker does: busybox is docker.io/library/busybox.
  CHECK(identity_matches(def, parse_reference("busybox:1"), "docker.io/library/busybox:1"));
  CHECK(identity_matches(def, parse_reference("docker.io/library/busybox:1"), "busybox:1"));

  const auto exact = identity(R"({"type":"matchExact"})");
  CHECK(identity_matches(exact, tagged, "r.io/ns/app:v1"));
  CHECK_FALSE(identity_matches(exact, digested, "r.io/ns/app:v1"));
  CHECK(identity_matches(exact, digested, "r.io/ns/app@" + kDigest));

  const auto repo = identity(R"({"type":"matchRepository"})");
  CHECK(identity_matches(repo, tagged, "r.io/ns/app:v9"));
  CHECK(identity_matches(repo, tagged, "r.io/ns/app"));
  CHECK_FALSE(identity_matches(repo, tagged, "r.io/ns/app2:v1"));

  const auto ref = identity(R"({"type":"exactReference","dockerReference":"r.io/golden/app:1"})");
  CHECK(identity_matches(ref, tagged, "r.io/golden/app:1"));
  CHECK_FALSE(identity_matches(ref, tagged, "r.io/ns/app:v1"));

  const auto exrepo = identity(R"({"type":"exactRepository","dockerRepository":"r.io/golden/app"})");
  CHECK(identity_matches(exrepo, tagged, "r.io/golden/app:7"));
  CHECK_FALSE(identity_matches(exrepo, tagged, "r.io/ns/app:v1"));

  const auto remap = identity(R"({"type":"remapIdentity","prefix":"mirror.io/ns","signedPrefix":"r.io/ns"})");
  CHECK(identity_matches(remap, parse_reference("mirror.io/ns/app:v1"), "r.io/ns/app:v1"));
  CHECK_FALSE(identity_matches(remap, parse_reference("mirror.io/ns/app:v1"), "mirror.io/ns/app:v1"));
  CHECK_FALSE(identity_matches(remap, parse_reference("mirror.io/nsx/app:v1"), "r.io/nsx/app:v1"));  // not at a boundary
  CHECK(identity_matches(remap, parse_reference("other.io/app:v1"), "other.io/app:v1"));          // no prefix: as the default
}

TEST_CASE("registries.d: the most specific namespace with a lookaside wins", "[policy]") {
  const RegistriesD d = parse_registries_d({
      {"a.yaml", "default-docker:\n  lookaside: file:///default\n"},
      {"b.yaml", "docker:\n  r.io:\n    sigstore: https://sigs.r.io/all\n"
                 "  r.io/ns:\n    lookaside: file:///ns\n    lookaside-staging: file:///staging\n"
                 "  r.io/ns/attached:\n    use-sigstore-attachments: true\n"
                 "  '*.example.com':\n    lookaside: file:///wild\n"},
  });
  CHECK(lookaside_for(d, parse_reference("r.io/ns/app:1")) == "file:///ns");
  CHECK(lookaside_for(d, parse_reference("r.io/ns/attached:1")) == "file:///ns");  // names no lookaside: the parent's
  CHECK(lookaside_for(d, parse_reference("r.io/other/app:1")) == "https://sigs.r.io/all");
  CHECK(lookaside_for(d, parse_reference("a.example.com/x:1")) == "file:///wild");
  CHECK(lookaside_for(d, parse_reference("q.io/x:1")) == "file:///default");
  const char* home = std::getenv("HOME");
  const std::string saved = home ? home : "";
  ::setenv("HOME", "/home/u", 1);
  if (::geteuid() != 0) CHECK(lookaside_for({}, parse_reference("q.io/x:1")) == "file:///home/u/.local/share/containers/sigstore");
  if (home) ::setenv("HOME", saved.c_str(), 1); else ::unsetenv("HOME");
  CHECK(signature_url("file:///ns/", parse_reference("r.io/ns/app:1"), kDigest, 2) ==
        "file:///ns/ns/app@sha256=" + std::string(64, 'a') + "/signature-2");
}

TEST_CASE("registries.d files that contradict or do not parse are refused", "[policy]") {
  auto refused = [](std::vector<std::pair<std::string, std::string>> files) {
    try {
      parse_registries_d(files);
    } catch (const rt::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refused({{"a.yaml", "default-docker: {lookaside: file:///a}\n"}, {"b.yaml", "default-docker: {lookaside: file:///b}\n"}}),
             Catch::Contains("also set in `a.yaml`") && Catch::Contains("b.yaml"));
  CHECK_THAT(refused({{"a.yaml", "docker: {r.io: {lookaside: file:///a}}\n"}, {"b.yaml", "docker: {r.io: {sigstore: file:///b}}\n"}}),
             Catch::Contains("namespace `r.io`"));
  CHECK_THAT(refused({{"a.yaml", "docker: {r.io: {lookasid: file:///a}}\n"}}), Catch::Contains("unknown key `lookasid`"));
  CHECK_THAT(refused({{"a.yaml", "docker: [\n"}}), Catch::Contains("not YAML") && Catch::Contains("a.yaml"));
  CHECK(refused({{"empty.yaml", ""}}) == "accepted");
}

TEST_CASE("a simple-signing payload is read strictly", "[policy]") {
  const std::string good = R"({"critical":{"identity":{"docker-reference":"r.io/a:1"},"image":{"docker-manifest-digest":")" +
                           kDigest + R"("},"type":"atomic container signature"},"optional":{"creator":"x","timestamp":1}})";
  const SignaturePayload p = parse_signature_payload(good);
  CHECK(p.docker_reference == "r.io/a:1");
  CHECK(p.manifest_digest == kDigest);
  CHECK_THROWS_WITH(parse_signature_payload(R"({"critical":{"identity":{"docker-reference":"r.io/a:1"},"image":{"docker-manifest-digest":"x"},"type":"atomic container signature","extra":1},"optional":{}})"),
                    Catch::Contains("exactly the keys"));
  CHECK_THROWS_WITH(parse_signature_payload(R"({"critical":{"identity":{"docker-reference":"r.io/a:1"},"image":{"docker-manifest-digest":"x"},"type":"cosign container image signature"},"optional":{}})"),
                    Catch::Contains("not a simple signing signature"));
  CHECK_THROWS_WITH(parse_signature_payload(R"({"critical":{}})"), Catch::Contains("top level"));
  CHECK_THROWS_WITH(parse_signature_payload("not json"), Catch::Contains("not JSON"));
}

TEST_CASE("a signed message from gpg --sign gives its payload and signer; a clear-signed one is refused", "[policy]") {
  TempDir dir;
  const std::string home = dir.path + "/gnupg", env = "GNUPGHOME='" + home + "' ";
  REQUIRE(::mkdir(home.c_str(), 0700) == 0);
  auto gpg = [&](const std::string& args) { return std::system((env + "gpg --batch --quiet " + args + " 2>/dev/null").c_str()); };
  REQUIRE(gpg("--passphrase '' --quick-gen-key 'unit <unit@rt.test>' rsa2048 sign never") == 0);
  const std::string payload = R"({"critical":{"identity":{"docker-reference":"r.io/a:1"},"image":{"docker-manifest-digest":")" +
                              kDigest + R"("},"type":"atomic container signature"},"optional":{}})";
  std::ofstream(dir.path + "/payload") << payload;
  REQUIRE(gpg("-o '" + dir.path + "/sig' --sign '" + dir.path + "/payload'") == 0);
  REQUIRE(gpg("-o '" + dir.path + "/sig.asc' --clearsign '" + dir.path + "/payload'") == 0);
  REQUIRE(gpg("-o '" + dir.path + "/key.gpg' --export unit@rt.test") == 0);
  std::system(("gpgconf --homedir '" + home + "' --kill all 2>/dev/null").c_str());
  auto bytes = [&](const std::string& name) {
    std::stringstream ss;
    ss << std::ifstream(dir.path + "/" + name).rdbuf();
    return ss.str();
  };
  OpenPgp pgp;
  const auto keys = pgp.import_file(dir.path + "/key.gpg");
  REQUIRE(keys.size() == 1);
  const OpenPgp::Verified v = pgp.verify_signed_message(bytes("sig"));
  CHECK(v.good);
  CHECK(v.fingerprint == keys[0]);
  CHECK(v.text == payload);
  CHECK(parse_signature_payload(v.text).manifest_digest == kDigest);
  const OpenPgp::Verified clear = pgp.verify_signed_message(bytes("sig.asc"));
  CHECK_FALSE(clear.good);
  CHECK_THAT(clear.problem, Catch::Contains("clear-signed"));
  OpenPgp empty;  // no key: the signer is unknown
  const OpenPgp::Verified unknown = empty.verify_signed_message(bytes("sig"));
  CHECK_FALSE(unknown.good);
  CHECK_THAT(unknown.problem, Catch::Contains("key not given"));
}

TEST_CASE("registries.d: signatures are written to the staging store when one is named", "[policy]") {
  const RegistriesD d = parse_registries_d({
      {"a.yaml", "default-docker:\n  lookaside: file:///default\n  sigstore-staging: file:///default-staging\n"},
      {"b.yaml", "docker:\n  r.io/ns:\n    lookaside: https://sigs.r.io\n    lookaside-staging: file:///staging\n"
                 "  r.io/old:\n    sigstore: https://old.r.io\n    sigstore-staging: file:///old-staging\n"
                 "  r.io/plain:\n    lookaside: file:///plain\n"
                 "  r.io/plain/attached:\n    use-sigstore-attachments: true\n"},
  });
  CHECK(lookaside_for_write(d, parse_reference("r.io/ns/app:1")) == "file:///staging");
  CHECK(lookaside_for(d, parse_reference("r.io/ns/app:1")) == "https://sigs.r.io");  // reads stay where they were
  CHECK(lookaside_for_write(d, parse_reference("r.io/old/app:1")) == "file:///old-staging");
  CHECK(lookaside_for_write(d, parse_reference("r.io/plain/app:1")) == "file:///plain");
  CHECK(lookaside_for_write(d, parse_reference("r.io/plain/attached:1")) == "file:///plain");
  CHECK(lookaside_for_write(d, parse_reference("q.io/x:1")) == "file:///default-staging");
}

TEST_CASE("the payload rt signs is one rt and containers/image read back", "[policy]") {
  const std::string text = make_signature_payload({"r.io/ns/app:1", kDigest}, "rt 1.0", 1700000000);
  CHECK(text == R"({"critical":{"identity":{"docker-reference":"r.io/ns/app:1"},"image":{"docker-manifest-digest":")" +
                    kDigest + R"("},"type":"atomic container signature"},"optional":{"creator":"rt 1.0","timestamp":1700000000}})");
  const SignaturePayload p = parse_signature_payload(text);
  CHECK(p.docker_reference == "r.io/ns/app:1");
  CHECK(p.manifest_digest == kDigest);
}

TEST_CASE("signatures are added to a file:// lookaside as the first free signature-N", "[policy]") {
  TempDir dir;
  const std::string base = "file://" + dir.path + "/sigs";
  const auto ref = parse_reference("r.io/ns/app:1");
  const std::string where = dir.path + "/sigs/ns/app@sha256=" + std::string(64, 'a');
  const mode_t mask = ::umask(022);
  CHECK(write_lookaside(base, ref, kDigest, "one") == std::make_pair(where + "/signature-1", 1));
  CHECK(write_lookaside(base, ref, kDigest, "two") == std::make_pair(where + "/signature-2", 2));
  ::unlink((where + "/signature-1").c_str());  // a gap is filled: readers stop at the first missing one
  CHECK(write_lookaside(base, ref, kDigest, "three").second == 1);
  CHECK(read_lookaside(base, ref, kDigest, {}) == std::vector<std::string>{"three", "two"});
  struct stat st;
  REQUIRE(::stat((where + "/signature-2").c_str(), &st) == 0);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == 0644);  // the store is meant to be published
}

TEST_CASE("a signed message made from the user's keyring, and from a key file, verifies", "[policy]") {
  TempDir dir;
  const std::string home = dir.path + "/gnupg", env = "GNUPGHOME='" + home + "' ";
  REQUIRE(::mkdir(home.c_str(), 0700) == 0);
  auto gpg = [&](const std::string& args) { return std::system((env + "gpg --batch --quiet " + args + " 2>/dev/null").c_str()); };
  REQUIRE(gpg("--passphrase '' --quick-gen-key 'unit <unit@rt.test>' rsa2048 sign never") == 0);
  REQUIRE(gpg("--pinentry-mode loopback --passphrase pw --quick-gen-key 'locked <locked@rt.test>' rsa2048 sign never") == 0);
  REQUIRE(gpg("-o '" + dir.path + "/key.gpg' --export unit@rt.test") == 0);
  REQUIRE(gpg("--pinentry-mode loopback --passphrase pw -o '" + dir.path + "/locked.sec' --export-secret-keys locked@rt.test") == 0);
  const std::string payload = make_signature_payload({"r.io/a:1", kDigest}, "rt test", 1);
  auto no_passphrase = [](const std::string&) -> std::string { throw rt::Error("asked for a passphrase"); };
  std::string sig;
  {
    OpenPgp user(OpenPgp::UserHome{home});
    CHECK_THROWS_WITH(user.secret_key("nobody@rt.test"), Catch::Contains("no usable secret key `nobody@rt.test`"));
    CHECK_THROWS_WITH(user.secret_key(""), Catch::Contains("2 secret keys"));
    const std::string fpr = user.secret_key("unit@rt.test");
    sig = user.sign_message(payload, fpr, no_passphrase);
    CHECK(sig.find("BEGIN PGP") == std::string::npos);  // binary, not armoured
  }
  std::system(("gpgconf --homedir '" + home + "' --kill all 2>/dev/null").c_str());
  {
    OpenPgp check;
    const auto keys = check.import_file(dir.path + "/key.gpg");
    const OpenPgp::Verified v = check.verify_signed_message(sig);
    CHECK(v.good);
    CHECK(v.fingerprint == keys.at(0));
    CHECK(v.text == payload);
  }
  OpenPgp file;
  file.import_file(dir.path + "/locked.sec");
  const std::string fpr = file.secret_key("");
  CHECK_THROWS_WITH(file.sign_message(payload, fpr, [](const std::string&) { return std::string("wrong"); }),
                    Catch::Contains("wrong passphrase"));
  const std::string made = file.sign_message(payload, fpr, [](const std::string&) { return std::string("pw"); });
  CHECK(file.verify_signed_message(made).good);
}

TEST_CASE("sigstoreSigned is read with its keys; what rt cannot check refuses where it applies", "[policy]") {
  Policy p = policy(R"({"r.io/a":[{"type":"sigstoreSigned","keyPath":"/k.pub","signedIdentity":{"type":"matchRepository"}}],
                        "r.io/b":[{"type":"sigstoreSigned","keyDatas":["YQ==","Yg=="]}],
                        "r.io/c":[{"type":"sigstoreSigned","fulcio":{"caPath":"/ca"},"rekorPublicKeyPath":"/r"}]})");
  const Requirement& a = p.docker.at("r.io/a")[0];
  CHECK(a.type == Requirement::Type::SigstoreSigned);
  CHECK(a.key_paths == std::vector<std::string>{"/k.pub"});
  CHECK(a.identity.kind == SignedIdentity::Kind::MatchRepository);
  CHECK(p.docker.at("r.io/b")[0].key_datas == std::vector<std::string>{"a", "b"});
  const Requirement& c = p.docker.at("r.io/c")[0];
  CHECK(c.unsupported == "fulcio");
  PolicySubject s{parse_reference("r.io/c:1"), kDigest, {}, {}, [] { return std::vector<SigstoreSignature>{}; }, {}};
  REQUIRE_THROWS_WITH(check_policy(p, s), Catch::Contains("`fulcio` is not supported by rt"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"sigstoreSigned","keyPath":"/a","keyData":"YQ=="}]})"),
             Catch::Contains("exactly one of keyPath"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"sigstoreSigned","keyPath":"/a","keyType":"GPGKeys"}]})"),
             Catch::Contains("unknown key `keyType`"));
  CHECK_THAT(policy_refusal(R"({"default":[{"type":"sigstoreSigned","keyDatas":[]}]})"), Catch::Contains("non-empty array"));
}

TEST_CASE("registries.d: use-sigstore-attachments of the most specific namespace, else default-docker", "[policy]") {
  const RegistriesD d = parse_registries_d({
      {"a.yaml", "default-docker:\n  use-sigstore-attachments: true\n"
                 "docker:\n  r.io:\n    use-sigstore-attachments: true\n"
                 "  r.io/ns:\n    lookaside: file:///ns\n"
                 "  q.io/off:\n    use-sigstore-attachments: false\n"},
  });
  CHECK(use_sigstore_attachments(d, parse_reference("r.io/x:1")));
  CHECK_FALSE(use_sigstore_attachments(d, parse_reference("r.io/ns/x:1")));  // its namespace does not set it
  CHECK_FALSE(use_sigstore_attachments(d, parse_reference("q.io/off/x:1")));
  CHECK(use_sigstore_attachments(d, parse_reference("z.io/x:1")));  // default-docker's
  CHECK_FALSE(use_sigstore_attachments({}, parse_reference("z.io/x:1")));
  CHECK_THROWS_WITH(parse_registries_d({{"b.yaml", "docker: {r.io: {use-sigstore-attachments: maybe}}\n"}}),
                    Catch::Contains("must be true or false"));
  CHECK(sigstore_attachment_tag(kDigest) == "sha256-" + std::string(64, 'a') + ".sig");
}

TEST_CASE("a sigstore key pair signs what its public key verifies, and nothing else", "[policy]") {
  const SigstoreKeyPair pair = generate_sigstore_key("pass phrase");
  CHECK(pair.private_pem.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"));
  const SigstoreSigner signer(pair.private_pem, "pass phrase", "k.private");
  CHECK(signer.public_pem() == pair.public_pem);
  const std::string payload = make_sigstore_payload({"r.io/a:1", kDigest}, "rt test", 1);
  const std::string sig = signer.sign(payload);
  const SigstoreKey key(pair.public_pem, "k.pub");
  CHECK(key.verifies(payload, sig));
  CHECK_FALSE(key.verifies(payload + " ", sig));
  CHECK_FALSE(key.verifies(payload, sig.substr(0, sig.size() / 2)));
  CHECK_FALSE(key.verifies(payload, "not base64!"));
  const SigstoreKey other(generate_sigstore_key("x").public_pem, "other.pub");
  CHECK_FALSE(other.verifies(payload, sig));
  CHECK_THROWS_WITH(SigstoreSigner(pair.private_pem, "wrong", "k.private"), Catch::Contains("wrong passphrase"));
  CHECK_THROWS_WITH(SigstoreSigner(pair.public_pem, "x", "k.pub"), Catch::Contains("not an encrypted sigstore private key"));
  CHECK_THROWS_WITH(SigstoreKey("junk", "j.pub"), Catch::Contains("not a PEM public key"));
  // A key file asking scrypt for 4 GiB is refused, not worked through.
  std::string body;
  std::string b64;
  for (const auto& line : rt::util::split(pair.private_pem, '\n'))
    if (!line.empty() && line[0] != '-') b64 += line;
  REQUIRE(rt::util::base64_decode(b64, &body));
  const std::string n = "\"N\":65536";
  const auto at = body.find(n);
  REQUIRE(at != std::string::npos);
  body.replace(at, n.size(), "\"N\":4194304");
  const std::string greedy = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n" + rt::util::base64_encode(body) +
                             "\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
  CHECK_THROWS_WITH(SigstoreSigner(greedy, "pass phrase", "greedy.private"), Catch::Contains("scrypt parameters out of range"));
  const SignaturePayload back = parse_sigstore_payload(payload);
  CHECK(back.docker_reference == "r.io/a:1");
  CHECK(back.manifest_digest == kDigest);
}

TEST_CASE("a sigstore payload is read strictly; cosign's null optional is accepted", "[policy]") {
  const std::string crit = R"({"identity":{"docker-reference":"r.io/a"},"image":{"docker-manifest-digest":")" + kDigest +
                           R"("},"type":"cosign container image signature"})";
  CHECK(parse_sigstore_payload(R"({"critical":)" + crit + R"(,"optional":null})").docker_reference == "r.io/a");
  CHECK_THROWS_WITH(parse_sigstore_payload(R"({"critical":{"identity":{"docker-reference":"r.io/a"},"image":{"docker-manifest-digest":"x"},"type":"atomic container signature"}})"),
                    Catch::Contains("not a sigstore signature"));
  CHECK_THROWS_WITH(parse_sigstore_payload(R"({"critical":)" + crit + R"(,"extra":1})"), Catch::Contains("unknown key `extra`"));
  CHECK_THROWS_WITH(parse_sigstore_payload(R"({"critical":{"type":"cosign container image signature"}})"),
                    Catch::Contains("exactly `type`, `image` and `identity`"));
}
