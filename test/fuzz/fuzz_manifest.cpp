// OCI and Docker manifests, indexes and image configs (image/manifest,
// run/image_config): any field of the wrong type is an rt::Error naming it,
// never an escaping nlohmann exception.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "image/manifest.hpp"
#include "rt/error.hpp"
#include "run/image_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto doc = rt::image::parse_json(text, "fuzz");
    if (rt::image::is_index(doc)) {
      auto ms = rt::image::parse_index(doc, "fuzz");
      if (!ms.empty()) rt::image::select_platform(ms, rt::image::host_platform(), "fuzz");
    } else {
      auto m = rt::image::parse_manifest(doc, "fuzz");
      for (const auto& l : m.layers) rt::image::check_layer(l, "fuzz");
      rt::image::check_media_type(m.config, doc, "fuzz");
    }
  } catch (const rt::Error&) {
  }
  try {
    rt::image::parse_diff_ids(rt::image::parse_json(text, "fuzz"), "fuzz");
  } catch (const rt::Error&) {
  }
  try {
    rt::run::parse_image_config(text, "fuzz");
  } catch (const rt::Error&) {
  }
  return 0;
}
