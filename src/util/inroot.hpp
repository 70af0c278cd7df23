// Path resolution confined to a root directory (host, before the container root is entered).
// Every symlink, absolute or relative, and every ".." is resolved as if
// rootfd were "/": nothing the image contains can lead outside it.
#pragma once
#include <string_view>

#include "util/fd.hpp"

namespace rt::util {

struct InRootResult {
  UniqueFd fd;  // valid when err == 0
  int err = 0;  // errno of the failing step
};

// Opens `path` (absolute or relative, taken relative to the root) below
// rootfd (AT_FDCWD: the working directory is the root). `flags` are open(2) flags (O_PATH, O_DIRECTORY, ...); O_CLOEXEC is
// added. With follow_final false a final symlink is opened itself (O_NOFOLLOW).
// Uses openat2(RESOLVE_IN_ROOT) (Linux 5.6) and falls back to a walk one
// component at a time on older kernels.
InRootResult open_in_root(int rootfd, std::string_view path, int flags, bool follow_final = true);

// The fallback walk, exposed for tests.
InRootResult open_in_root_walk(int rootfd, std::string_view path, int flags, bool follow_final);

}  // namespace rt::util
