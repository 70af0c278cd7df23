// Digest strings (pure).
#include "util/digest.hpp"

#include "rt/error.hpp"

namespace rt::util {

bool is_valid_digest(std::string_view d) {
  if (d.size() != 71 || !d.starts_with("sha256:")) return false;
  for (char c : d.substr(7))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string digest_hex(std::string_view d, const std::string& what) {
  if (!is_valid_digest(d))
    throw Error(what + ": malformed digest `" + std::string(d.substr(0, 100)) +
                "` (expected sha256: and 64 lowercase hex digits)");
  return std::string(d.substr(7));
}

}  // namespace rt::util
