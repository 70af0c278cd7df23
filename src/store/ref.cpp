// Image references (pure).
#include "store/ref.hpp"

#include <algorithm>

#include "rt/error.hpp"
#include "util/digest.hpp"

namespace rt::store {
namespace {

bool valid_repo_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '/';
}

bool valid_tag(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  if (!(std::isalnum(static_cast<unsigned char>(t[0])) || t[0] == '_')) return false;
  return std::all_of(t.begin(), t.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

}  // namespace

std::string Reference::str() const {
  std::string s = registry + "/" + repository;
  if (!tag.empty()) s += ":" + tag;
  if (!digest.empty()) s += "@" + digest;
  return s;
}

std::string Reference::api_host() const { return registry == "docker.io" ? "registry-1.docker.io" : registry; }

Reference parse_reference(std::string_view text) {
  const std::string orig(text);
  auto bad = [&](const std::string& why) { return Error("bad image reference `" + orig + "`: " + why); };
  if (text.starts_with("docker://")) text.remove_prefix(9);
  if (text.empty()) throw bad("empty");
  Reference r;
  if (size_t at = text.find('@'); at != std::string_view::npos) {
    r.digest = std::string(text.substr(at + 1));
    if (!util::is_valid_digest(r.digest)) throw bad("the digest must be sha256: and 64 lowercase hex digits");
    text = text.substr(0, at);
  }
  size_t slash = text.find('/');
  std::string_view first = text.substr(0, slash);
  if (slash != std::string_view::npos && (first.find('.') != std::string_view::npos ||
                                          first.find(':') != std::string_view::npos || first == "localhost")) {
    r.registry = std::string(first);
    text = text.substr(slash + 1);
  } else {
    r.registry = "docker.io";
  }
  size_t colon = text.rfind(':');
  if (colon != std::string_view::npos && text.find('/', colon) == std::string_view::npos) {
    r.tag = std::string(text.substr(colon + 1));
    if (!valid_tag(r.tag)) throw bad("invalid tag `" + r.tag + "`");
    text = text.substr(0, colon);
  }
  r.repository = std::string(text);
  if (r.repository.empty() || r.repository.front() == '/' || r.repository.back() == '/' ||
      r.repository.find("//") != std::string::npos ||
      !std::all_of(r.repository.begin(), r.repository.end(), valid_repo_char))
    throw bad("the repository must be lowercase letters, digits, and . _ - /");
  if (r.registry == "docker.io" && r.repository.find('/') == std::string::npos)
    r.repository = "library/" + r.repository;
  if (r.tag.empty() && r.digest.empty()) r.tag = "latest";
  return r;
}

}  // namespace rt::store
