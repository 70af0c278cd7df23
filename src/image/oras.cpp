// SIF files as OCI artifacts, Apptainer's way (pure).
#include "image/oras.hpp"

#include <ctime>
#include <nlohmann/json.hpp>

#include "image/sha256.hpp"
#include "rt/error.hpp"
#include "squash/lazy.hpp"
#include "util/digest.hpp"

namespace rt::image {

bool is_oras(std::string_view ref) { return ref.starts_with(oras::kScheme); }

std::string_view without_oras(std::string_view ref) {
  if (is_oras(ref)) ref.remove_prefix(std::string_view(oras::kScheme).size());
  while (ref.starts_with('/')) ref.remove_prefix(1);
  return ref;
}

std::string rfc3339_utc(int64_t seconds) {
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string sif_manifest(const Descriptor& sif, const std::string& title, int64_t created, const std::string& chunks) {
  // go-containerregistry's field order (v1.Manifest, v1.Descriptor), which
  // Apptainer's pushes have: mediaType, size, digest, data, annotations.
  using ordered = nlohmann::ordered_json;
  const std::string config = oras::kEmptyConfig;
  ordered m;
  m["schemaVersion"] = 2;
  m["mediaType"] = media::kOciManifest;
  m["config"] = {{"mediaType", oras::kSifConfig},
                 {"size", config.size()},
                 {"digest", sha256_digest(config)},
                 {"data", "e30="}};  // base64 of "{}"
  ordered layer;
  layer["mediaType"] = oras::kSifLayer;
  layer["size"] = sif.size;
  layer["digest"] = sif.digest;
  layer["annotations"] = {{oras::kTitle, title}};
  if (!chunks.empty()) layer["annotations"][squash::lazy::kAnnotation] = chunks;
  m["layers"] = ordered::array({layer});
  if (created >= 0) m["annotations"] = {{oras::kCreated, rfc3339_utc(created)}};
  return m.dump();
}

std::string chunk_index_digest(const nlohmann::json& doc, const std::string& shown) {
  const auto layers = doc.find("layers");
  if (layers == doc.end() || !layers->is_array() || layers->size() != 1) return "";
  const auto a = (*layers)[0].find("annotations");
  if (a == (*layers)[0].end() || !a->is_object()) return "";
  const auto c = a->find(squash::lazy::kAnnotation);
  if (c == a->end()) return "";
  if (!c->is_string() || !util::is_valid_digest(c->get<std::string>()))
    throw Error("`" + shown + "`: the annotation " + squash::lazy::kAnnotation + " of its SIF layer is no digest");
  return c->get<std::string>();
}

Descriptor sif_layer(const nlohmann::json& doc, const std::string& shown) {
  const std::string what = "`" + shown + "`";
  const std::string hint = "an image of layers is pulled without oras://: rt pull " + std::string(without_oras(shown));
  if (is_index(doc))
    throw Error(what + " is no SIF file but an index of images (media type `" +
                    doc.value("mediaType", std::string(media::kOciIndex)) + "`)",
                hint);
  const Manifest m = parse_manifest(doc, what + " manifest");
  if (m.layers.size() != 1) {
    std::string types;
    for (const auto& l : m.layers) {
      if (types.find("`" + l.media_type + "`") != std::string::npos) continue;
      types += (types.empty() ? "`" : ", `") + l.media_type + "`";
    }
    throw Error(what + " is no SIF file: its manifest has " + std::to_string(m.layers.size()) + " layers" +
                    (types.empty() ? "" : " (media type " + types + ")") + ", a SIF file's has one, of media type `" +
                    oras::kSifLayer + "`",
                hint);
  }
  const Descriptor& l = m.layers.front();
  if (l.media_type != oras::kSifLayer && l.media_type != oras::kSifLayerOld)
    throw Error(what + " is no SIF file: its layer has media type `" + l.media_type + "`, not `" + oras::kSifLayer +
                    "`",
                hint);
  if (l.size < 0) throw Error(what + ": the manifest gives no size for the SIF layer `" + l.digest + "`");
  return l;
}

std::string sif_file_name(const store::Reference& ref) {
  const std::string& repo = ref.repository;
  const std::string name = repo.substr(repo.rfind('/') == std::string::npos ? 0 : repo.rfind('/') + 1);
  std::string tag = ref.tag;
  if (tag.empty() && !ref.digest.empty()) {
    const size_t colon = ref.digest.find(':');
    tag = ref.digest.substr(colon + 1, 12);
  }
  if (tag.empty()) tag = "latest";
  return name + "_" + tag + ".sif";
}

}  // namespace rt::image
