// String helpers (pure).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rt::util {

std::vector<std::string> split(std::string_view s, char sep);
// The parts with `sep` between them (the inverse of split).
std::string join(std::span<const std::string> parts, std::string_view sep);
inline std::string join(std::span<const std::string> parts, char sep) { return join(parts, std::string_view(&sep, 1)); }
// `s` without the `chars` it starts and ends with.
std::string trim(std::string_view s, std::string_view chars = " \t\r\n");
// ASCII letters to lower case, other bytes as they are.
std::string ascii_lower(std::string s);
// The last component of a path ("/a/b" -> "b"; "b" -> "b"), and the
// directory it is in ("/a/b" -> "/a"; "/b" and "b" -> "/"); lexical.
std::string base_name(std::string_view path);
std::string dir_name(std::string_view path);
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
// `size` bytes as lowercase hex digits, two per byte.
std::string hex(const void* data, size_t size);
// RFC 4648 base64 with padding (libsodium's), as Go's StdEncoding writes
// it; decoding refuses anything else (no spaces, no missing padding).
std::string base64_encode(std::string_view bytes);
bool base64_decode(std::string_view text, std::string* out);
// True when `s` is not empty and only lowercase hex digits.
bool is_hex(std::string_view s);
// Human-readable byte counts: "12.3 MB".
std::string human_bytes(uint64_t n);
// `seconds` since the epoch as UTC in ISO 8601 ("2026-11-24T09:30:00Z").
std::string utc_time(int64_t seconds);
// Calls fn(line) for each line of `text` (without its newline) until fn
// returns false; a last line without a newline counts too.
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (!fn(text.substr(start, end - start))) return;
    start = end + 1;
  }
}
// Quote for logs: `x` with control characters escaped.
std::string quoted(std::string_view s);
// `s` as valid UTF-8: each byte that is not part of a well-formed sequence
// becomes the text \xNN (for JSON and messages of names read from files).
std::string utf8_escaped(std::string_view s);

}  // namespace rt::util
