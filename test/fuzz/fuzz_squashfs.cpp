// SquashFS images and SIF files: the SIF header and descriptors
// (squash/sif.hpp), the checks of squash/verify.hpp, then, for an image they
// pass, every directory listed, every path looked up and every file read
// through libsquashfuse and rt's reader.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rt/error.hpp"
#include "squash/sqfs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = ::memfd_create("fuzz.sqfs", MFD_CLOEXEC);
  if (fd < 0 || ::write(fd, data, size) != static_cast<ssize_t>(size)) std::abort();
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    rt::squash::Image image(path);  // checks first (a SIF file: its partition)
    std::vector<std::string> todo{""};
    for (size_t seen = 0; !todo.empty() && seen < 2000; ++seen) {
      std::string dir = todo.back();
      todo.pop_back();
      for (const auto& name : image.list(dir.empty() ? "/" : dir)) {
        std::string p = dir + "/" + name;
        image.has(p);
        try {
          image.read_file(p, 1 << 20);
        } catch (const rt::Error&) {
        }
        todo.push_back(p);
      }
    }
  } catch (const rt::Error&) {
  }
  ::close(fd);
  return 0;
}
