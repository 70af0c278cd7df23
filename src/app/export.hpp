// Images leaving the store as layers (host): what rt convert's archive
// forms and rt push share. A stored image's layers go out as its blobs,
// those kept uncompressed compressed once and remembered.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/store.hpp"
#include "image/compress.hpp"
#include "image/layer_stream.hpp"
#include "image/manifest.hpp"
#include "image/source.hpp"
#include "rt/image.hpp"
#include "util/fs.hpp"
#include "util/progress.hpp"

namespace rt::app {

// A stored image as its config and layer blobs; nullopt when it has none
// of its own (kept as SquashFS, or imported from a plain tree) or one is
// gone (the tree is then read).
std::optional<image::ImageSource> stored_layers(Store& store, const std::string& name);

// The tag an archive of `name` carries: NAME:latest unless it has one
// (Docker Hub's names short); "" for a name that is no reference (a path).
std::string archive_tag(const std::string& name);

// `config_text` as an exported image's config: its rootfs the layers'
// `diff_ids`, one history entry per layer, no empty "created".
std::string export_config(const std::string& config_text, const std::vector<std::string>& diff_ids);

// How the blob in `file` is compressed, by its first bytes.
using image::Magic;
Magic magic_of(const std::string& file);

struct OutLayer {
  image::Descriptor blob;  // media type, digest, size
  std::string diff_id;
  std::string file;  // the blob's bytes
};

// The layers of `src` as compressed blobs in `store`: blobs already gzip or
// zstd as they are; others compressed with `c` once (STORE/compressed
// remembers them). `meter` counts the bytes read; `ready` (when given) gets
// each layer as soon as it is there, in order (what it throws ends the
// work).
std::vector<OutLayer> compressed_layers(Store& store, const image::ImageSource& src, image::Compression c,
                                        unsigned threads, util::Meter& meter,
                                        const std::function<void(const OutLayer&)>& ready = {});

// An image rt convert reads (a store name, a bundle or root-filesystem
// directory, a SquashFS or SIF file, an archive or OCI layout) as layers;
// `layered`: a stored image as its blobs, else as one tree. `near`: where a
// scratch copy may go (beside it). In convert.cpp.
struct Exported {
  image::ImageSource image;
  std::unique_ptr<util::TempDirBeside> scratch;  // what `image` reads from, when it needed a copy
};
Exported export_source(const std::string& src, const std::string& near, bool layered, const ConvertOptions& o);

// An OCI image manifest of `config` (its digest and size) and `layers`.
std::string oci_manifest(const std::string& config, const std::vector<OutLayer>& layers);

}  // namespace rt::app
