// Locating an image and its configuration (host).
#pragma once
#include <optional>
#include <string>

#include "run/image_config.hpp"

namespace rt::run {

// An image ready to run: a root filesystem directory plus, when the image
// came with one, its configuration.
//
// Accepted forms of IMAGE:
//   DIR             a root filesystem (has bin/, usr/ or etc/)
//   DIR             a bundle: DIR/rootfs/ plus DIR/image-config.json
//   FILE            a SquashFS file (its config at /.rt/image-config.json inside)
//   NAME            an image in the store (a bundle there)
struct Image {
  std::string name;       // what the user typed, for RT_CONTAINER and messages
  std::string rootfs;     // absolute host path of the root filesystem (or the .sqfs file)
  bool squashfs = false;  // rootfs is a SquashFS file; its config is inside it
  std::optional<ImageConfig> config;
};

inline constexpr const char* kBundleRootfs = "rootfs";
inline constexpr const char* kBundleConfig = "image-config.json";

// A directory path is used as it is; otherwise `ref` is looked up by name
// in the store at `storage`. Throws rt::Error naming the image and what is
// wrong with it.
Image open_image(const std::string& ref, const std::string& cwd, const std::string& storage);

}  // namespace rt::run
