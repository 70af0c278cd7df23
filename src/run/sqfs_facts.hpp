// What `rt exec` reads from inside a SquashFS image before running it: the
// image's configuration, /etc/passwd and /etc/group, and which of
// Apptainer's files it has (host).
//
// Reading them costs a fresh process about 2 ms (metadata and fragment
// blocks decompressed into memory it touches for the first time), paid by
// every rank of a job. The store remembers them per image file version
// (path and util::file_stamp), so only the first run of a version opens the
// image; the others read one small file.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "run/image.hpp"

namespace rt::squash {
class Image;
}

namespace rt::run {

struct SquashFacts {
  std::optional<std::string> config;  // squash::kConfigPath
  std::optional<std::string> passwd;  // /etc/passwd
  std::optional<std::string> group;   // /etc/group
  ApptainerFiles apptainer;           // in /.singularity.d
  // A SIF file's ext3 overlay partition: where it starts (decimal); none
  // for a file without one (or no SIF file).
  std::optional<std::string> sif_overlay;
};

// The facts of the SquashFS file `path`, from the directory `cache_dir`
// (STORE/sqfs-facts, checked) when they are there for this version of the
// file, else read through `open` (which opens and checks the image,
// throwing its errors) and remembered. Only regular files of the caller's
// are read; a cache that cannot be read or written is ignored.
SquashFacts squash_facts(const std::string& path, int cache_dir, const std::function<squash::Image&()>& open);

// Removes from `cache_dir` the facts of files that are gone or changed,
// and damaged entries (rt prune); names not of the cache's own form are
// left alone, and nothing is followed. Returns the bytes freed.
uint64_t prune_squash_facts(int cache_dir, size_t* removed = nullptr);

}  // namespace rt::run
