// Small file helpers that throw SysError naming the path (any world).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "util/fd.hpp"

namespace rt::util {

// Opens with O_CLOEXEC always added; throws SysError("open", path).
UniqueFd open_fd(const std::string& path, int flags, unsigned mode = 0);
UniqueFd open_fd_at(int dirfd, const std::string& path, int flags, unsigned mode = 0);

// Whole file into a string; nullopt if it does not exist (ENOENT/ENOTDIR).
std::optional<std::string> read_file_if_exists(const std::string& path, size_t limit = 1 << 24);
std::string read_fd(int fd, const std::string& name_for_errors, size_t limit = 1 << 24);

void write_all(int fd, std::string_view data, const std::string& name_for_errors);

// "/proc/self/fd/N": a path naming what fd N refers to, usable as a mount
// source or target (the magic link is followed by mount(2)).
std::string fd_path(int fd);

// Lexically normalised absolute path: collapses "//", "/./" and "x/.."; no
// symlink is consulted. Relative inputs are made absolute against base.
std::string normalize_path(std::string_view path, std::string_view base = "/");

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);

} // namespace rt::util
