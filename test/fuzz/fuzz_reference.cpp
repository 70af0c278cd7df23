// Image references as users type them (store/ref).
#include <cstdint>
#include <string_view>

#include "rt/error.hpp"
#include "store/ref.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto r = rt::store::parse_reference(std::string_view(reinterpret_cast<const char*>(data), size));
    (void)r.str();
  } catch (const rt::Error&) {
  }
  return 0;
}
