// containers-policy.json(5), containers-registries.d(5) and the simple-
// signing payload (pure, but for the file lookups); see policy.hpp.
#include "image/policy.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "rt/error.hpp"
#include "util/fd.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

using nlohmann::json;

// A docker reference as containers/image's reference.Named holds it:
// normalized (docker.io/library/...), with the tag only when one was
// written (a name alone is "name-only" and matches no exact identity).
struct Named {
  std::string name;  // HOST/REPOSITORY
  std::string tag, digest;
  bool name_only() const { return tag.empty() && digest.empty(); }
  std::string str() const { return name + (tag.empty() ? "" : ":" + tag) + (digest.empty() ? "" : "@" + digest); }
};

bool parse_named(std::string_view text, Named* out) {
  if (text.empty() || text.find("://") != std::string_view::npos) return false;
  store::Reference r;
  try {
    r = store::parse_reference(text);
  } catch (const Error&) {
    return false;
  }
  std::string_view before = text.substr(0, text.find('@'));
  std::string_view last = before.substr(before.rfind('/') == std::string_view::npos ? 0 : before.rfind('/') + 1);
  const bool tagged = last.find(':') != std::string_view::npos;
  out->name = r.registry + "/" + r.repository;
  out->tag = tagged ? r.tag : "";
  out->digest = r.digest;
  return true;
}

// The image being pulled: by digest when it has one (what is fetched),
// else by its tag (rt's references always have one or the other).
Named intended(const store::Reference& ref) {
  Named n{ref.registry + "/" + ref.repository, ref.digest.empty() ? ref.tag : "", ref.digest};
  return n;
}

[[noreturn]] void policy_error(const std::string& source, const std::string& where, const std::string& why) {
  throw Error("policy `" + source + "`: " + where + ": " + why,
              "see containers-policy.json(5) and rt-policy(5)");
}

void only_keys(const json& o, std::initializer_list<const char*> keys, const std::string& source,
               const std::string& where) {
  for (const auto& [k, v] : o.items())
    if (std::none_of(keys.begin(), keys.end(), [&](const char* x) { return k == x; }))
      policy_error(source, where, "unknown key `" + k + "`");
}

std::string string_at(const json& o, const char* key, const std::string& source, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end()) policy_error(source, where, std::string("`") + key + "` is missing");
  if (!it->is_string() || it->get<std::string>().empty())
    policy_error(source, where, std::string("`") + key + "` must be a non-empty string");
  return it->get<std::string>();
}

// remapIdentity's prefixes: HOST[:PORT], HOST[:PORT]/NAMESPACE or a
// repository, never a tag or digest.
bool valid_prefix(const std::string& p) {
  if (p.empty() || p.find('@') != std::string::npos || p.find("://") != std::string::npos ||
      p.find('*') != std::string::npos || p.back() == '/' || p.front() == '/')
    return false;
  const size_t slash = p.find('/');
  const std::string rest = slash == std::string::npos ? "" : p.substr(slash + 1);
  return rest.find(':') == std::string::npos;
}

SignedIdentity parse_identity(const json& o, const std::string& source, const std::string& where) {
  if (!o.is_object()) policy_error(source, where, "must be an object");
  const std::string type = string_at(o, "type", source, where);
  SignedIdentity id;
  if (type == "matchExact" || type == "matchRepoDigestOrExact" || type == "matchRepository") {
    only_keys(o, {"type"}, source, where);
    id.kind = type == "matchExact"       ? SignedIdentity::Kind::MatchExact
              : type == "matchRepository" ? SignedIdentity::Kind::MatchRepository
                                          : SignedIdentity::Kind::MatchRepoDigestOrExact;
  } else if (type == "exactReference") {
    only_keys(o, {"type", "dockerReference"}, source, where);
    id.kind = SignedIdentity::Kind::ExactReference;
    id.reference = string_at(o, "dockerReference", source, where);
    Named n;
    if (!parse_named(id.reference, &n) || n.name_only())
      policy_error(source, where, "dockerReference `" + id.reference + "` is not a tagged or digested reference");
  } else if (type == "exactRepository") {
    only_keys(o, {"type", "dockerRepository"}, source, where);
    id.kind = SignedIdentity::Kind::ExactRepository;
    id.repository = string_at(o, "dockerRepository", source, where);
    Named n;
    if (!parse_named(id.repository, &n)) policy_error(source, where, "dockerRepository `" + id.repository + "` is no repository");
  } else if (type == "remapIdentity") {
    only_keys(o, {"type", "prefix", "signedPrefix"}, source, where);
    id.kind = SignedIdentity::Kind::RemapIdentity;
    id.prefix = string_at(o, "prefix", source, where);
    id.signed_prefix = string_at(o, "signedPrefix", source, where);
    for (const std::string* p : {&id.prefix, &id.signed_prefix})
      if (!valid_prefix(*p))
        policy_error(source, where, "prefix `" + *p + "` must be HOST[:PORT], HOST[:PORT]/NAMESPACE or a repository");
  } else {
    policy_error(source, where, "unknown signedIdentity type `" + type + "`");
  }
  return id;
}

// sigstoreSigned: public keys (keyPath, keyPaths, keyData, keyDatas: one of
// them), or what rt does not check (a Fulcio CA, a Rekor key, a PKI).
Requirement parse_sigstore_signed(const json& o, Requirement r, const std::string& source, const std::string& where) {
  r.type = Requirement::Type::SigstoreSigned;
  only_keys(o,
            {"type", "keyPath", "keyPaths", "keyData", "keyDatas", "fulcio", "rekorPublicKeyPath", "rekorPublicKeyPaths",
             "rekorPublicKeyData", "rekorPublicKeyDatas", "pki", "signedIdentity"},
            source, where);
  for (const char* k : {"fulcio", "pki", "rekorPublicKeyPath", "rekorPublicKeyPaths", "rekorPublicKeyData",
                        "rekorPublicKeyDatas"})
    if (o.contains(k) && r.unsupported.empty()) r.unsupported = k;
  const int given = int(o.contains("keyPath")) + int(o.contains("keyPaths")) + int(o.contains("keyData")) +
                    int(o.contains("keyDatas")) + int(o.contains("fulcio")) + int(o.contains("pki"));
  if (given != 1)
    policy_error(source, where, "sigstoreSigned needs exactly one of keyPath, keyPaths, keyData, keyDatas, fulcio and pki");
  auto strings = [&](const char* key) {
    std::vector<std::string> out;
    auto it = o.find(key);
    if (!it->is_array() || it->empty()) policy_error(source, where, std::string("`") + key + "` must be a non-empty array");
    for (const auto& v : *it) {
      if (!v.is_string() || v.get<std::string>().empty())
        policy_error(source, where, std::string("`") + key + "` must hold non-empty strings");
      out.push_back(v.get<std::string>());
    }
    return out;
  };
  if (o.contains("keyPath")) r.key_paths.push_back(string_at(o, "keyPath", source, where));
  if (o.contains("keyPaths")) r.key_paths = strings("keyPaths");
  std::vector<std::string> datas;
  if (o.contains("keyData")) datas.push_back(string_at(o, "keyData", source, where));
  if (o.contains("keyDatas")) datas = strings("keyDatas");
  for (const auto& d : datas) {
    std::string pem;
    if (!util::base64_decode(d, &pem)) policy_error(source, where, "a keyData is not base64");
    r.key_datas.push_back(std::move(pem));
  }
  if (auto it = o.find("signedIdentity"); it != o.end())
    r.identity = parse_identity(*it, source, where + ".signedIdentity");
  return r;
}

Requirement parse_requirement(const json& o, const std::string& source, const std::string& where) {
  if (!o.is_object()) policy_error(source, where, "a requirement must be an object");
  Requirement r;
  r.type_name = string_at(o, "type", source, where);
  if (r.type_name == "insecureAcceptAnything" || r.type_name == "reject") {
    only_keys(o, {"type"}, source, where);
    r.type = r.type_name == "reject" ? Requirement::Type::Reject : Requirement::Type::InsecureAcceptAnything;
    return r;
  }
  if (r.type_name == "sigstoreSigned") return parse_sigstore_signed(o, std::move(r), source, where);
  if (r.type_name != "signedBy") {
    r.type = Requirement::Type::Unknown;  // refuses where it applies
    return r;
  }
  r.type = Requirement::Type::SignedBy;
  only_keys(o, {"type", "keyType", "keyPath", "keyPaths", "keyData", "signedIdentity"}, source, where);
  r.key_type = string_at(o, "keyType", source, where);
  const int given = int(o.contains("keyPath")) + int(o.contains("keyPaths")) + int(o.contains("keyData"));
  if (given != 1) policy_error(source, where, "signedBy needs exactly one of keyPath, keyPaths and keyData");
  if (o.contains("keyPath")) r.key_paths.push_back(string_at(o, "keyPath", source, where));
  if (auto it = o.find("keyPaths"); it != o.end()) {
    if (!it->is_array() || it->empty()) policy_error(source, where, "`keyPaths` must be a non-empty array of paths");
    for (const auto& p : *it) {
      if (!p.is_string() || p.get<std::string>().empty()) policy_error(source, where, "`keyPaths` must hold paths");
      r.key_paths.push_back(p.get<std::string>());
    }
  }
  if (o.contains("keyData") && !util::base64_decode(string_at(o, "keyData", source, where), &r.key_data))
    policy_error(source, where, "`keyData` is not base64");
  if (auto it = o.find("signedIdentity"); it != o.end())
    r.identity = parse_identity(*it, source, where + ".signedIdentity");
  return r;
}

std::vector<Requirement> parse_requirements(const json& a, const std::string& source, const std::string& where) {
  if (!a.is_array() || a.empty()) policy_error(source, where, "must be a non-empty array of requirements");
  std::vector<Requirement> out;
  for (size_t i = 0; i < a.size(); ++i) out.push_back(parse_requirement(a[i], source, where + "[" + std::to_string(i) + "]"));
  return out;
}

bool hex_digest(std::string_view d) {
  if (!d.starts_with("sha256:") || d.size() != 71) return false;
  return std::all_of(d.begin() + 7, d.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A docker scope: HOST[:PORT][/REPO[:TAG|@DIGEST]] in lowercase, or
// *.DOMAIN (containers-policy.json(5), "docker").
bool valid_scope(const std::string& s) {
  if (s.starts_with("*.")) {
    const std::string d = s.substr(2);
    return !d.empty() && d.find_first_of("/:*@") == std::string::npos && d.front() != '.' && d.back() != '.';
  }
  if (s.empty() || s.find('*') != std::string::npos || s.find("://") != std::string::npos || s.front() == '/' ||
      s.back() == '/' || s.find("//") != std::string::npos)
    return false;
  if (const size_t at = s.find('@'); at != std::string::npos && !hex_digest(std::string_view(s).substr(at + 1)))
    return false;
  return std::none_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

}  // namespace

std::string SignedIdentity::str() const {
  switch (kind) {
  case Kind::MatchExact: return "matchExact";
  case Kind::MatchRepoDigestOrExact: return "matchRepoDigestOrExact";
  case Kind::MatchRepository: return "matchRepository";
  case Kind::ExactReference: return "exactReference `" + reference + "`";
  case Kind::ExactRepository: return "exactRepository `" + repository + "`";
  case Kind::RemapIdentity: return "remapIdentity `" + prefix + "` -> `" + signed_prefix + "`";
  }
  return "";
}

std::string Requirement::str() const {
  switch (type) {
  case Type::InsecureAcceptAnything: return "insecureAcceptAnything";
  case Type::Reject: return "reject";
  case Type::Unknown: return type_name;
  case Type::SignedBy:
  case Type::SigstoreSigned: break;
  }
  std::string keys;
  for (const auto& p : key_paths) keys += (keys.empty() ? "`" : ", `") + p + "`";
  if (type == Type::SigstoreSigned)
    return "sigstoreSigned (" +
           (!unsupported.empty() ? unsupported : "keys from " + (keys.empty() ? std::string("keyData") : keys)) + ")";
  return "signedBy (" + key_type + " from " + (keys.empty() ? std::string("keyData") : keys) + ")";
}

Policy parse_policy(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("policy `" + source + "`: not JSON: " + e.what(), "see containers-policy.json(5)");
  }
  if (!j.is_object()) policy_error(source, "the document", "must be a JSON object");
  only_keys(j, {"default", "transports"}, source, "the document");
  Policy p;
  p.source = source;
  if (!j.contains("default")) policy_error(source, "the document", "`default` is missing");
  p.fallback = parse_requirements(j["default"], source, "default");
  if (auto t = j.find("transports"); t != j.end()) {
    if (!t->is_object()) policy_error(source, "transports", "must be an object");
    for (const auto& [transport, scopes] : t->items()) {
      const std::string where = "transports." + transport;
      if (!scopes.is_object()) policy_error(source, where, "must be an object of scopes");
      for (const auto& [scope, reqs] : scopes.items()) {
        auto parsed = parse_requirements(reqs, source, where + ".\"" + scope + "\"");
        if (transport != "docker") continue;  // checked, but rt reads only from registries
        if (!scope.empty() && !valid_scope(scope))
          policy_error(source, where + ".\"" + scope + "\"",
              "not a docker scope (HOST[:PORT][/REPOSITORY[:TAG|@DIGEST]] or *.DOMAIN)");
        p.docker[scope] = std::move(parsed);
      }
    }
  }
  return p;
}

Policy read_policy(const std::string& path) {
  auto text = util::read_regular_if_exists(path, 4 << 20);
  if (!text) throw Error("policy `" + path + "` does not exist");
  return parse_policy(*text, path);
}

std::string find_policy_file(const std::string& given, const std::string& site) {
  if (!given.empty()) {
    if (!util::path_exists(given)) throw Error("policy `" + given + "` does not exist", "give a containers-policy.json(5) file");
    return given;
  }
  const char* home = std::getenv("HOME");
  if (home && *home == '/') {
    const std::string user = std::string(home) + "/.config/containers/policy.json";
    if (util::path_exists(user)) return user;
  }
  if (!site.empty()) {
    // A site that names a policy and lost it must not accept everything.
    if (!util::path_exists(site))
      throw Error("policy `" + site + "` (the site configuration's image.policy) does not exist");
    return site;
  }
  return util::path_exists("/etc/containers/policy.json") ? "/etc/containers/policy.json" : "";
}

std::vector<std::string> policy_scopes(const store::Reference& ref) {
  const Named n = intended(ref);
  std::vector<std::string> out{n.str()};
  std::string name = n.name;
  for (;;) {
    out.push_back(name);
    const size_t slash = name.rfind('/');
    if (slash == std::string::npos) break;
    name.resize(slash);
  }
  name = name.substr(0, name.find(':'));  // wildcards match the host without its port
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.')) {
    name = name.substr(dot + 1);
    out.push_back("*." + name);
  }
  return out;
}

const std::vector<Requirement>& requirements_for(const Policy& p, const store::Reference& ref, std::string* scope) {
  for (const auto& s : policy_scopes(ref))
    if (auto it = p.docker.find(s); it != p.docker.end()) {
      if (scope) *scope = "docker \"" + s + "\"";
      return it->second;
    }
  if (auto it = p.docker.find(""); it != p.docker.end()) {
    if (scope) *scope = "docker \"\"";
    return it->second;
  }
  if (scope) *scope = "default";
  return p.fallback;
}

bool identity_matches(const SignedIdentity& id, const store::Reference& ref, std::string_view signed_reference) {
  Named sig;
  if (!parse_named(signed_reference, &sig)) return false;
  Named want = intended(ref);
  // matchRepoDigestOrExact's rule, for `want`: a digest needs the same
  // repository (the digest itself is checked against the manifest), a tag
  // the same reference.
  auto repo_digest_or_exact = [&](const Named& w) {
    if (sig.name_only()) return false;
    if (!w.digest.empty()) return sig.name == w.name;
    return !w.tag.empty() && sig.str() == w.str();
  };
  switch (id.kind) {
  case SignedIdentity::Kind::MatchExact:
    return !sig.name_only() && !want.name_only() && sig.str() == want.str();
  case SignedIdentity::Kind::MatchRepoDigestOrExact:
    return repo_digest_or_exact(want);
  case SignedIdentity::Kind::MatchRepository:
    return sig.name == want.name;
  case SignedIdentity::Kind::ExactReference: {
    Named r;
    return parse_named(id.reference, &r) && !sig.name_only() && sig.str() == r.str();
  }
  case SignedIdentity::Kind::ExactRepository: {
    Named r;
    return parse_named(id.repository, &r) && sig.name == r.name;
  }
  case SignedIdentity::Kind::RemapIdentity: {
    // The pulled reference with `prefix` replaced by `signedPrefix`, where
    // the prefix ends at a component boundary; then matchRepoDigestOrExact.
    const std::string s = want.str();
    const std::string& pre = id.prefix;
    if (s.starts_with(pre) && (s.size() == pre.size() || s[pre.size()] == '/' || s[pre.size()] == ':' ||
                               s[pre.size()] == '@')) {
      Named remapped;
      if (!parse_named(id.signed_prefix + s.substr(pre.size()), &remapped)) return false;
      return repo_digest_or_exact(remapped);
    }
    return repo_digest_or_exact(want);
  }
  }
  return false;
}

RegistriesD parse_registries_d(const std::vector<std::pair<std::string, std::string>>& files) {
  RegistriesD out;
  std::map<std::string, std::string> seen;  // namespace -> file
  std::string default_file;                 // where default-docker was set
  auto bad_file = [](const std::string& file, const std::string& why) {
    return Error("registries.d file `" + file + "`: " + why, "see containers-registries.d(5)");
  };
  // A namespace's signature storage for reading: lookaside, else the older
  // name sigstore; "" when it names neither (then a less specific one
  // applies, as in containers/image).
  auto first_url = [](const YAML::Node& ns, std::initializer_list<const char*> keys) {
    for (const char* key : keys)
      if (ns[key] && ns[key].IsScalar() && !ns[key].as<std::string>().empty()) return ns[key].as<std::string>();
    return std::string();
  };
  auto lookaside = [&](const YAML::Node& ns, const std::string& file, const std::string& where) {
    if (!ns.IsMap()) throw bad_file(file, where + " must be a mapping");
    for (const auto& kv : ns) {
      const std::string k = kv.first.as<std::string>();
      if (k != "lookaside" && k != "lookaside-staging" && k != "sigstore" && k != "sigstore-staging" &&
          k != "use-sigstore-attachments")
        throw bad_file(file, where + ": unknown key `" + k + "`");
    }
    return first_url(ns, {"lookaside", "sigstore"});
  };
  // use-sigstore-attachments: -1 when not set.
  auto attachments = [&](const YAML::Node& ns, const std::string& file, const std::string& where) {
    const YAML::Node v = ns["use-sigstore-attachments"];
    if (!v) return -1;
    try {
      return v.as<bool>() ? 1 : 0;
    } catch (const YAML::Exception&) {
      throw bad_file(file, where + ": use-sigstore-attachments must be true or false");
    }
  };
  // For writing: the staging stores first (containers-registries.d(5):
  // lookaside-staging, or the older sigstore-staging, "for writing only"),
  // else the one read from.
  auto staging = [&](const YAML::Node& ns) {
    return first_url(ns, {"lookaside-staging", "sigstore-staging", "lookaside", "sigstore"});
  };
  for (const auto& [file, text] : files) {
    YAML::Node doc;
    try {
      doc = YAML::Load(text);
      if (doc.IsNull()) continue;
      if (!doc.IsMap()) throw bad_file(file, "not a mapping");
      for (const auto& kv : doc) {
        const std::string k = kv.first.as<std::string>();
        if (k == "default-docker") {
          if (!default_file.empty()) throw bad_file(file, "default-docker is also set in `" + default_file + "`");
          default_file = file;
          out.default_docker = lookaside(kv.second, file, "default-docker");
          out.default_docker_write = staging(kv.second);
          out.default_attachments = attachments(kv.second, file, "default-docker") == 1;
        } else if (k == "docker") {
          if (kv.second.IsNull()) continue;
          if (!kv.second.IsMap()) throw bad_file(file, "docker must be a mapping of namespaces");
          for (const auto& ns : kv.second) {
            const std::string name = ns.first.as<std::string>();
            if (seen.count(name)) throw bad_file(file, "namespace `" + name + "` is also set in `" + seen[name] + "`");
            seen[name] = file;
            out.docker[name] = lookaside(ns.second, file, "docker `" + name + "`");
            out.docker_write[name] = staging(ns.second);
            if (int a = attachments(ns.second, file, "docker `" + name + "`"); a >= 0) out.attachments[name] = a == 1;
          }
        } else {
          throw bad_file(file, "unknown key `" + k + "`");
        }
      }
    } catch (const YAML::Exception& e) {
      throw bad_file(file, std::string("not YAML: ") + e.what());
    }
  }
  return out;
}

RegistriesD read_registries_d(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  if (dir.empty() || !util::is_directory(dir)) return {};
  util::UniqueFd fd = util::open_fd(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  auto names = util::list_names(fd.get(), dir);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (!n.ends_with(".yaml")) continue;
    const std::string path = dir + "/" + n;
    if (auto text = util::read_regular_if_exists(path, 1 << 20)) files.emplace_back(path, *text);
  }
  return parse_registries_d(files);
}

std::string find_registries_d() {
  const char* home = std::getenv("HOME");
  if (home && *home == '/') {
    const std::string user = std::string(home) + "/.config/containers/registries.d";
    if (util::is_directory(user)) return user;
  }
  return "/etc/containers/registries.d";
}

namespace {

std::string lookaside_in(const std::map<std::string, std::string>& docker, const std::string& default_docker,
                         const store::Reference& ref) {
  for (const auto& s : policy_scopes(ref))
    if (auto it = docker.find(s); it != docker.end() && !it->second.empty()) return it->second;
  if (!default_docker.empty()) return default_docker;
  // containers/image's built-in default (docker/registries_d.go).
  const char* home = std::getenv("HOME");
  if (::geteuid() == 0 || !home || *home != '/') return "file:///var/lib/containers/sigstore";
  return std::string("file://") + home + "/.local/share/containers/sigstore";
}

}  // namespace

std::string lookaside_for(const RegistriesD& d, const store::Reference& ref) {
  return lookaside_in(d.docker, d.default_docker, ref);
}

std::string lookaside_for_write(const RegistriesD& d, const store::Reference& ref) {
  return lookaside_in(d.docker_write, d.default_docker_write, ref);
}

bool use_sigstore_attachments(const RegistriesD& d, const store::Reference& ref) {
  for (const auto& s : policy_scopes(ref))
    if (d.docker.count(s)) {
      auto it = d.attachments.find(s);
      return it != d.attachments.end() && it->second;
    }
  return d.default_attachments;
}

std::string signature_url(const std::string& base, const store::Reference& ref, const std::string& digest, int n) {
  std::string b = base;
  while (b.size() > 1 && b.back() == '/') b.pop_back();
  const size_t colon = digest.find(':');
  return b + "/" + ref.repository + "@" + digest.substr(0, colon) + "=" + digest.substr(colon + 1) + "/signature-" +
         std::to_string(n);
}

std::string make_signature_payload(const SignaturePayload& p, const std::string& creator, int64_t timestamp,
                                   const char* type) {
  // nlohmann's objects keep their keys sorted, as containers/image's
  // encoder writes them; the verifier reads JSON, not bytes, anyway.
  json j = {{"critical",
             {{"identity", {{"docker-reference", p.docker_reference}}},
              {"image", {{"docker-manifest-digest", p.manifest_digest}}},
              {"type", type}}},
            {"optional", {{"creator", creator}, {"timestamp", timestamp}}}};
  return j.dump();
}

SignaturePayload parse_signature_payload(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    throw Error("the signed payload is not JSON");
  }
  auto exact = [](const json& o, std::initializer_list<const char*> keys, const char* what) {
    if (!o.is_object()) throw Error(std::string("the signed payload's ") + what + " is not an object");
    if (o.size() != keys.size())
      throw Error(std::string("the signed payload's ") + what + " does not have exactly the keys of a simple signature");
    for (const char* k : keys)
      if (!o.contains(k)) throw Error(std::string("the signed payload's ") + what + " lacks `" + k + "`");
  };
  exact(j, {"critical", "optional"}, "top level");
  if (!j["optional"].is_object()) throw Error("the signed payload's `optional` is not an object");
  const json& c = j["critical"];
  exact(c, {"type", "image", "identity"}, "`critical`");
  if (c["type"] != "atomic container signature")
    throw Error("the signed payload is not a simple signing signature (type " + c["type"].dump() + ")");
  exact(c["image"], {"docker-manifest-digest"}, "`critical.image`");
  exact(c["identity"], {"docker-reference"}, "`critical.identity`");
  const json& d = c["image"]["docker-manifest-digest"];
  const json& r = c["identity"]["docker-reference"];
  if (!d.is_string() || !r.is_string()) throw Error("the signed payload's digest and reference must be strings");
  return {r.get<std::string>(), d.get<std::string>()};
}

}  // namespace rt::image
