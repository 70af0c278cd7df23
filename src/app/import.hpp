// What `rt import` reads, for other writers (convert) too (host).
#pragma once
#include <string>

#include "app/assemble.hpp"
#include "app/store.hpp"
#include "rt/image.hpp"
#include "util/progress.hpp"

namespace rt::app {

// A docker-archive, an OCI layout (directory or tar, SOURCE[:TAG]) or a
// root-filesystem tar as a config and its layers; throws rt::Error.
ImageSource import_source(const std::string& source);

// A reader of a file's bytes (opened now: a missing file throws here).
image::ReadFn file_reader(const std::string& path);

// The config of an image with none of its own (a root-filesystem tar).
std::string default_config();

// The layers' bytes (else the source's hint, 0 when unknown).
uint64_t layer_bytes(const ImageSource& src);
// `src` with every read of a layer counted by `meter`.
ImageSource metered(const ImageSource& src, util::Meter& meter);

// Where pull and import put an image: the --squash file, else the store in
// the chosen format (--format, RT_STORE_FORMAT). True when it was stored.
// `progress`: show how far it got (on a terminal, or at -v).
bool deliver(app::Store& store, const ImageSource& src, const ImportOptions& o, bool progress = true);

}  // namespace rt::app
