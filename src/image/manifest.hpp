// OCI / Docker manifests, indexes and configs (pure).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rt::image {

struct Platform {
  std::string os, architecture, variant;
  std::string str() const;  // "linux/arm64/v8"
};

struct Descriptor {
  std::string media_type;
  std::string digest;  // validated
  int64_t size = -1;
  std::vector<std::string> urls;
  Platform platform;
};

struct Manifest {
  std::string media_type;
  Descriptor config;
  std::vector<Descriptor> layers;
};

namespace media {
inline constexpr const char* kOciIndex = "application/vnd.oci.image.index.v1+json";
inline constexpr const char* kOciManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr const char* kDockerList = "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr const char* kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr const char* kOciConfig = "application/vnd.oci.image.config.v1+json";
}  // namespace media

// Parses JSON no larger than 4 MiB and nested no deeper than 64. `what`
// names the document in errors.
nlohmann::json parse_json(std::string_view text, const std::string& what);

bool is_index(const nlohmann::json& doc);
// One descriptor: its media type, digest (validated) and size; throws
// rt::Error naming `what`.
Descriptor parse_descriptor(const nlohmann::json& j, const std::string& what);
std::vector<Descriptor> parse_index(const nlohmann::json& doc, const std::string& what);
Manifest parse_manifest(const nlohmann::json& doc, const std::string& what);
// Refuses a manifest or index whose mediaType disagrees with the descriptor
// that pointed to it, naming both.
void check_media_type(const Descriptor& d, const nlohmann::json& doc, const std::string& what);

// `config` with rootfs.diff_ids set to `diff_ids` when it lists none (an
// image made here from a root filesystem tar): its digest then identifies
// the content. Any other config comes back as it is.
std::string config_with_diff_ids(const std::string& config, const std::vector<std::string>& diff_ids);

// The layers' diff_ids from an image config (rootfs.diff_ids).
std::vector<std::string> parse_diff_ids(const nlohmann::json& config, const std::string& what);

// Refuses foreign (non-distributable) layers, whose URLs are never fetched,
// encrypted layers and unknown media types, naming the layer.
void check_layer(const Descriptor& layer, const std::string& image);

// The host's platform, e.g. linux/amd64.
Platform host_platform();
Platform parse_platform(std::string_view text);
// Picks the manifest for `want`; the error lists the platforms that exist.
const Descriptor& select_platform(const std::vector<Descriptor>& manifests, const Platform& want,
                                  const std::string& image);

}  // namespace rt::image
