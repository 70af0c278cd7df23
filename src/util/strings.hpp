// String helpers (pure).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rt::util {

std::vector<std::string> split(std::string_view s, char sep);
// The parts with `sep` between them (the inverse of split).
std::string join(const std::vector<std::string>& parts, char sep);
// Shell-style glob ("*", "?", "[...]") as fnmatch(3) without flags.
bool glob_match(const std::string& pattern, const std::string& text);
// True when `path` is `prefix` or lies below it (both normalised, absolute).
bool path_within(std::string_view path, std::string_view prefix);
// A 128-bit non-cryptographic hash of `s` (two FNV-1a), as 32 hex digits:
// names for sockets and cache files, never for security.
std::string hash_hex(std::string_view s);
// A 128-bit keyed hash of `s` (BLAKE2b, libsodium's crypto_generichash) as
// 32 hex digits: nobody without `key` (16 to 64 bytes) can compute or
// predict it, even from other outputs.
std::string keyed_hash_hex(std::string_view key, std::string_view s);
// True when `s` is not empty and only lowercase hex digits.
bool is_hex(std::string_view s);
// Human-readable byte counts: "12.3 MB".
std::string human_bytes(uint64_t n);
// Quote for logs: `x` with control characters escaped.
std::string quoted(std::string_view s);

} // namespace rt::util
