// String helpers (pure).
#include "util/strings.hpp"

#include <fnmatch.h>
#include <sodium.h>
#include <ctime>

#include <cstdint>
#include <cstdio>
#include <stdexcept>

namespace rt::util {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string join(std::span<const std::string> parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

std::string ascii_lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string trim(std::string_view s, std::string_view chars) {
  size_t b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(chars) - b + 1));
}

std::string base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string dir_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos || slash == 0 ? "/" : std::string(path.substr(0, slash));
}

namespace {

uint64_t fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

std::string hash_hex(std::string_view s) {
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(fnv1a(s, 14695981039346656037ULL)),
                static_cast<unsigned long long>(fnv1a(s, 0x9e3779b97f4a7c15ULL)));
  return out;
}

std::string keyed_hash_hex(std::string_view key, std::string_view s) {
  unsigned char md[16];
  if (key.size() < crypto_generichash_KEYBYTES_MIN || key.size() > crypto_generichash_KEYBYTES_MAX ||
      crypto_generichash(md, sizeof md, reinterpret_cast<const unsigned char*>(s.data()), s.size(),
                         reinterpret_cast<const unsigned char*>(key.data()), key.size()) != 0)
    throw std::invalid_argument("keyed_hash_hex: bad key");
  return hex(md, sizeof md);
}

std::string hex(const void* data, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    const unsigned char c = static_cast<const unsigned char*>(data)[i];
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

bool base64_decode(std::string_view text, std::string* out) {
  if (text.size() % 4) return false;
  out->assign(text.size() / 4 * 3, '\0');
  size_t n = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out->data()), out->size(), text.data(), text.size(), nullptr,
                        &n, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != text.data() + text.size())
    return false;
  out->resize(n);
  return true;
}

bool is_hex(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string utc_time(int64_t seconds) {
  const auto t = static_cast<time_t>(seconds);
  std::tm tm{};
  char buf[32] = "";
  if (::gmtime_r(&t, &tm)) std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n < 1000)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  else if (n < 1000 * 1000)
    std::snprintf(buf, sizeof buf, "%.1f kB", static_cast<double>(n) / 1e3);
  else if (n < 1000ull * 1000 * 1000)
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(n) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(n) / 1e9);
  return buf;
}

bool glob_match(const std::string& pattern, const std::string& text) {
  return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

bool path_within(std::string_view path, std::string_view prefix) {
  if (prefix == "/") return true;
  if (!path.starts_with(prefix)) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

std::string quoted(std::string_view s) {
  std::string out = "`";
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '`';
  return out;
}

std::string utf8_escaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto cont = [&](size_t i) { return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80; };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;  // bytes after the first
    unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range (RFC 3629)
    if (c < 0x80) {
      n = 0;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      n = SIZE_MAX;
    }
    bool ok = n != SIZE_MAX;
    if (ok && n > 0) {
      const auto second = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
      ok = second >= lo && second <= hi;
      for (size_t k = 2; ok && k <= n; ++k) ok = cont(i + k);
    }
    if (ok) {
      out.append(s.substr(i, n + 1));
      i += n + 1;
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    }
  }
  return out;
}

}  // namespace rt::util
