// rt pull and rt push of oras://REF: a SIF file in an OCI registry as
// Apptainer keeps it there (image/oras), a whole file, never unpacked
// (host).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "image/registry.hpp"
#include "rt/image.hpp"

namespace rt::app {

// The SIF artifact `ref` names (`shown` as oras://REF in messages): its
// manifest (one of an index's, by --platform) and its SIF layer, the
// trust policy applied to what the reference names and the size limit to
// the layer. Throws rt::Error naming the reference.
struct SifArtifact {
  image::Registry::Document doc;  // the manifest
  nlohmann::json manifest;        // parsed
  image::Descriptor layer;
};
SifArtifact resolve_sif(image::Registry& reg, const store::Reference& ref, const std::string& shown,
                        const PullOptions& o);

// Downloads the SIF artifact `ref` (oras://REG/REPO:TAG) into `dest` (a
// directory: NAME_TAG.sif in it), or into NAME_TAG.sif in the working
// directory when `dest` is empty: the blob
// hashed while it streams into a private temporary beside the
// destination, renamed over it only when whole and verified. Returns the
// path written.
std::string pull_sif(const std::string& ref, const std::string& dest, const PullOptions& o);

// Uploads `image` (a SIF file as it is; any other image rt convert reads,
// a stored one included, converted to a SIF file first) to `ref`
// (oras://REG/REPO:TAG) as Apptainer does; returns the manifest's digest.
std::string push_sif(const std::string& image, const std::string& ref, const PushOptions& o);

}  // namespace rt::app
