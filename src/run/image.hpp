// Locating an image and its configuration (host).
#pragma once
#include <optional>
#include <string>

#include "run/image_config.hpp"
#include "store/site.hpp"

namespace rt::run {

// An image ready to run: a root filesystem directory plus, when the image
// came with one, its configuration.
//
// Accepted forms of IMAGE:
//   DIR             a root filesystem (has bin/, usr/ or etc/)
//   DIR             a bundle: DIR/rootfs/ plus DIR/image-config.json
//   FILE            a SquashFS file (its config at /.rt/image-config.json inside)
//   FILE            a SIF file: its primary SquashFS partition
//   NAME            an image in the store (a bundle there)
//   oras://REF      a SIF file in a registry, as the node cache has it
//                   (squash/lazy.hpp): ImageNotFound until rt-image
//                   lazy-open resolved it
struct Image {
  std::string name;       // what the user typed, for RT_CONTAINER and messages
  std::string rootfs;     // absolute host path of the root filesystem (or the .sqfs file)
  std::string path;       // the absolute path the name was taken as; empty: a stored image
  bool squashfs = false;  // rootfs is a SquashFS file; its config is inside it
  bool sif = false;       // ... a SIF file holding one
  bool staged = false;    // rootfs is this node's copy of the file at `path`, staged for the job
  bool lazy = false;      // rootfs is a node cache entry's file, not yet whole (squash/lazy.hpp)
  std::optional<ImageConfig> config;
};

// What an image built by Apptainer keeps in /.singularity.d and rt honours
// as Apptainer does: environment scripts (env/*.sh, sourced by /bin/sh
// before the program), the runscript (rt run) and the startscript (rt
// instance start).
struct ApptainerFiles {
  bool env_scripts = false;
  bool runscript = false;
  bool startscript = false;
};
inline constexpr const char* kApptainerEnvDir = "/.singularity.d/env";
inline constexpr const char* kApptainerRunscript = "/.singularity.d/runscript";
inline constexpr const char* kApptainerStartscript = "/.singularity.d/startscript";
inline constexpr const char* kApptainerTest = "/.singularity.d/test";
// The environment script of a SIF file rt writes (rt convert IMAGE
// FILE.sif), made from the image's config like its runscript: rt, which
// reads that config, uses neither (no /bin/sh to start, nothing twice).
inline constexpr const char* kRtEnvScript = "10-rt-image-config.sh";

// Looks for them in `tree`, anything with has(PATH) and list(DIR).
template <class Tree>
ApptainerFiles apptainer_files(Tree& tree) {
  ApptainerFiles a;
  if (!tree.has("/.singularity.d")) return a;
  bool from_config = false;
  for (const auto& name : tree.list(kApptainerEnvDir)) {
    if (name == kRtEnvScript)
      from_config = true;
    else
      a.env_scripts |= name.ends_with(".sh");
  }
  a.runscript = !from_config && tree.has(kApptainerRunscript);
  a.startscript = tree.has(kApptainerStartscript);
  return a;
}

inline constexpr const char* kBundleRootfs = "rootfs";
inline constexpr const char* kBundleConfig = "image-config.json";

// `ref` is a path or a stored name as store::name_kind says (a path in a
// directory other users can write is used with a warning). Throws
// rt::Error naming the image and what is wrong with it; ImageNotFound when
// it is neither.
Image open_image(const std::string& ref, const std::string& cwd, const std::string& storage,
                 bool any_directory = false);
// The site's image store (store.site, store/site.hpp), asked only for a
// name the user's store lacks, so that a start of any other image reads no
// index: the image the first site directory that has `name` (any form of
// it) gives, or nullopt; rt::Error when a site directory cannot be trusted.
std::optional<store::SiteImage> find_site_image(const std::string& name);
// ... that image to run: its file checked against the index once per
// version of the file (store::verify_site_image, in `storage`'s store) and
// of the format the index gives. nullopt when no site store has `name`.
std::optional<Image> open_site_image(const std::string& name, const std::string& storage);

// Warns when `image` was taken from a path another user could have placed
// or changed (store::foreign_path); called once per node, not per rank.
void warn_if_foreign(const Image& image);

}  // namespace rt::run
