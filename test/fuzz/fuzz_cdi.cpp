// CDI specs, YAML or JSON (hpc/cdi): the input is written as one spec and
// every device of its kind is applied.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "hpc/cdi.hpp"
#include "rt/error.hpp"
#include "scratch_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte chooses the syntax, the rest is the spec.
  const bool json = size > 0 && (data[0] & 1);
  const std::string file = scratch_dir() + (json ? "/spec.json" : "/spec.yaml");
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data) + (size ? 1 : 0), static_cast<std::streamsize>(size ? size - 1 : 0));
  rt::hpc::Injection inj;
  try {
    rt::hpc::apply_cdi({"example.com/gpu=all", "example.com/gpu=0"}, {scratch_dir()}, inj);
  } catch (const rt::Error&) {
  }
  ::unlink(file.c_str());
  return 0;
}
