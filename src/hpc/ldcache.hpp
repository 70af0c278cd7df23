// The dynamic linker's cache (/etc/ld.so.cache): soname -> path (host).
#pragma once
#include <map>
#include <string>

namespace rt::hpc {

// Entries for this machine's architecture, first one per soname (the
// linker's choice). Throws rt::Error naming the file when it is not a cache.
std::map<std::string, std::string> read_ld_cache(const std::string& path);
// The same for a cache already read (an image's); `path` is for messages.
std::map<std::string, std::string> parse_ld_cache(const std::string& data, const std::string& path);

}  // namespace rt::hpc
