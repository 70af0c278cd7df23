// SIF files stored in OCI registries as Apptainer stores them (oras://):
// an OCI image manifest whose config is the empty JSON object and whose
// one layer is the SIF file, byte for byte, under Apptainer's media types
// (Apptainer's internal/pkg/client/oras; ORAS's file store names the layer
// by its org.opencontainers.image.title annotation). Pure.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "image/manifest.hpp"
#include "store/ref.hpp"

namespace rt::image {

namespace oras {
inline constexpr const char* kScheme = "oras://";
inline constexpr const char* kSifConfig = "application/vnd.sylabs.sif.config.v1+json";
inline constexpr const char* kSifLayer = "application/vnd.sylabs.sif.layer.v1.sif";
// What Singularity before 3.7 wrote, misspelt (hpcng/singularity#4437):
// still read, never written.
inline constexpr const char* kSifLayerOld = "appliciation/vnd.sylabs.sif.layer.tar";
// The config blob: "{}", whatever the SIF holds.
inline constexpr const char* kEmptyConfig = "{}";
inline constexpr const char* kTitle = "org.opencontainers.image.title";
inline constexpr const char* kCreated = "org.opencontainers.image.created";
}  // namespace oras

// Whether `ref` names a SIF artifact: it starts with oras://.
bool is_oras(std::string_view ref);
// The registry reference after oras:// (and any further leading slashes,
// as Apptainer takes oras:///REF too).
std::string_view without_oras(std::string_view ref);

// The manifest of a SIF artifact whose layer is `sif` (its digest and
// size), named `title` (the file's name), created at `created` (seconds
// since the epoch; < 0: no annotation): compact JSON in the field order of
// Apptainer's writer, the config inline as `data` too.
// `chunks`, when not empty, is the digest of the file's chunk index
// (squash/lazy.hpp), named by an annotation of the layer.
std::string sif_manifest(const Descriptor& sif, const std::string& title, int64_t created,
                         const std::string& chunks = "");

// The digest of the chunk index the SIF layer of `doc` names; "" when it
// names none. Throws rt::Error naming `shown` for an annotation that is no
// digest.
std::string chunk_index_digest(const nlohmann::json& doc, const std::string& shown);

// The SIF layer of the manifest `doc` of `shown` (as the user wrote it).
// Throws rt::Error naming `shown` and the media type found when it is no
// SIF artifact: not an image manifest, no single layer, or a layer of any
// other media type. The config's media type is not checked, as Apptainer
// does not check it (older versions wrote others).
Descriptor sif_layer(const nlohmann::json& doc, const std::string& shown);

// Where a pulled SIF goes without a name: NAME_TAG.sif, NAME the
// repository's last component (Apptainer's name); a reference by digest
// alone gives NAME_HEX12.sif.
std::string sif_file_name(const store::Reference& ref);

// `seconds` since the epoch as RFC 3339 in UTC: 2024-05-01T12:00:00Z.
std::string rfc3339_utc(int64_t seconds);

}  // namespace rt::image
