// The site configuration (hpc/site_config).
#include <cstdint>
#include <string>

#include "hpc/site_config.hpp"
#include "rt/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto c = rt::hpc::parse_site_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz.conf");
    (void)c.get("cdi.dirs");
  } catch (const rt::Error&) {
  }
  return 0;
}
