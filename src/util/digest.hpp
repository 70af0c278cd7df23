// Digest strings (pure).
#pragma once
#include <string>
#include <string_view>

namespace rt::util {

// True for "sha256:" followed by exactly 64 lowercase hex digits: checked
// before a digest ever becomes part of a path.
bool is_valid_digest(std::string_view digest);

// The hex part of a valid digest. Throws rt::Error naming `what` otherwise.
std::string digest_hex(std::string_view digest, const std::string& what);

}  // namespace rt::util
