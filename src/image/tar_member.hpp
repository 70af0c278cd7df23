// Members of a tar file (docker-archive, OCI archive), read by name (host).
// Each open scans from the start; seekable uncompressed files skip data.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "image/unpack.hpp"

namespace rt::image {

// Names of the archive's regular-file members, with "./" removed.
std::vector<std::string> tar_members(const std::string& tar);
// A member's whole content, at most `limit` bytes; nullopt if absent.
std::optional<std::string> tar_read_small(const std::string& tar, const std::string& member, size_t limit = 4 << 20);
// A streaming reader of one member; throws rt::Error if it is absent.
ReadFn tar_member_reader(const std::string& tar, const std::string& member);

}  // namespace rt::image
