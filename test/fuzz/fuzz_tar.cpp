// Image layers (image/unpack): a tar stream applied to a fresh directory.
// Whatever the archive says, nothing is written outside that directory
// (checked by a marker beside it) and errors are rt::Errors.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "image/unpack.hpp"
#include "rt/error.hpp"
#include "scratch_dir.hpp"
#include "util/fs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string root = scratch_dir() + "/root";
  if (::mkdir(root.c_str(), 0700) != 0) std::abort();
  size_t at = 0;
  auto read = [&](void* buf, size_t n) {
    n = std::min(n, size - at);
    std::memcpy(buf, data + at, n);
    at += n;
    return n;
  };
  try {
    rt::image::TreeWriter w(root, "fuzz", 64 << 20);
    w.apply_layer(read, "layer");
    w.finish();
  } catch (const rt::Error&) {
  }
  // Only `root` may exist in the directory.
  for (const auto& e : std::filesystem::directory_iterator(scratch_dir()))
    if (e.path().filename() != "root") std::abort();
  rt::util::remove_tree(root);  // whatever modes the archive left
  return 0;
}
