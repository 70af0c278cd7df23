// Finding images in the user's store (host). Light: no network or archive
// code, so the exec path can use it.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/layout.hpp"

namespace rt::store {

// The directory name for an image name: '/' becomes '+' (never part of a
// reference). Throws rt::Error for names that cannot be stored safely.
std::string escape_name(std::string_view name);
std::string unescape_name(std::string_view dir);

// The image directory (a bundle: rootfs/ + image-config.json) for a name as
// given or as its canonical reference ("ubuntu" -> docker.io/library/ubuntu:latest).
// An image's directory is a real directory (no symlink) below the checked
// store's images/.
class Root;
std::optional<std::string> find_image(const Root& store, const std::string& name);

// Stored names that are `name` with a tag (myapp -> myapp:1.0; ubuntu ->
// docker.io/library/ubuntu:24.04), for the error when `name` itself is
// not there.
std::vector<std::string> similar_images(const Root& store, const std::string& name);

}  // namespace rt::store
