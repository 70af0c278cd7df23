// OCI / Docker manifests, indexes and configs (pure).
#include "image/manifest.hpp"

#include <sys/utsname.h>

#include <nlohmann/json.hpp>

#include "image/sha256.hpp"
#include "rt/error.hpp"
#include "util/json.hpp"
#include "util/strings.hpp"

namespace rt::image {

using nlohmann::json;

std::string Platform::str() const {
  std::string s = os + "/" + architecture;
  if (!variant.empty()) s += "/" + variant;
  return s;
}

json parse_json(std::string_view text, const std::string& what) { return util::parse_json_object(text, what); }

Descriptor parse_descriptor(const json& j, const std::string& what) {
  if (!j.is_object()) throw Error(what + ": a descriptor is not an object");
  Descriptor d;
  d.media_type = util::json_string(j, "mediaType", what);
  auto dg = j.find("digest");
  if (dg == j.end() || !dg->is_string()) throw Error(what + ": a descriptor has no digest");
  d.digest = dg->get<std::string>();
  util::digest_hex(d.digest, what);  // validates before the digest is ever a path
  auto sz = j.find("size");
  if (sz != j.end()) {
    if (!sz->is_number_integer() || sz->get<int64_t>() < 0) throw Error(what + ": bad size for " + d.digest);
    d.size = sz->get<int64_t>();
  }
  if (auto u = j.find("urls"); u != j.end() && u->is_array())
    for (const auto& x : *u)
      if (x.is_string()) d.urls.push_back(x.get<std::string>());
  const json& p = util::json_object(j, "platform", what);
  d.platform.os = util::json_string(p, "os", what + " platform");
  d.platform.architecture = util::json_string(p, "architecture", what + " platform");
  d.platform.variant = util::json_string(p, "variant", what + " platform");
  return d;
}

namespace {

}  // namespace

bool is_index(const json& doc) {
  std::string mt = doc.is_object() && doc.contains("mediaType") && doc["mediaType"].is_string()
                       ? doc["mediaType"].get<std::string>()
                       : "";
  if (mt == media::kOciIndex || mt == media::kDockerList) return true;
  return mt.empty() && doc.contains("manifests") && !doc.contains("layers");
}

std::vector<Descriptor> parse_index(const json& doc, const std::string& what) {
  auto m = doc.find("manifests");
  if (m == doc.end() || !m->is_array()) throw Error(what + ": an index without `manifests`");
  std::vector<Descriptor> out;
  for (const auto& d : *m) out.push_back(parse_descriptor(d, what));
  return out;
}

Manifest parse_manifest(const json& doc, const std::string& what) {
  Manifest m;
  m.media_type = util::json_string(doc, "mediaType", what);
  auto version = doc.find("schemaVersion");
  if (version == doc.end() || !version->is_number_integer() || *version != 2)
    throw Error(what + ": only schema version 2 manifests are supported (Docker schema 1 is obsolete)");
  if (!m.media_type.empty() && m.media_type != media::kOciManifest && m.media_type != media::kDockerManifest)
    throw Error(what + ": unsupported manifest media type `" + m.media_type + "`");
  auto c = doc.find("config");
  if (c == doc.end()) throw Error(what + ": a manifest without `config`");
  m.config = parse_descriptor(*c, what);
  auto l = doc.find("layers");
  if (l == doc.end() || !l->is_array()) throw Error(what + ": a manifest without `layers`");
  for (const auto& d : *l) m.layers.push_back(parse_descriptor(d, what));
  return m;
}

std::string config_with_diff_ids(const std::string& config, const std::vector<std::string>& diff_ids) {
  json doc = json::parse(config, nullptr, false);
  if (!doc.is_object() || diff_ids.empty()) return config;
  json& rootfs = doc["rootfs"];
  if (!rootfs.is_object()) rootfs = {{"type", "layers"}};
  if (rootfs.contains("diff_ids") && !(rootfs["diff_ids"].is_array() && rootfs["diff_ids"].empty())) return config;
  rootfs["diff_ids"] = diff_ids;
  return doc.dump();
}

void check_media_type(const Descriptor& d, const json& doc, const std::string& what) {
  std::string says = util::json_string(doc, "mediaType", what);
  if (!d.media_type.empty() && !says.empty() && d.media_type != says)
    throw Error(what + ": the descriptor that points to it says `" + d.media_type + "`, the document says `" + says +
                "`");
  if (!d.media_type.empty() && says.empty()) {
    bool want_index = d.media_type == media::kOciIndex || d.media_type == media::kDockerList;
    if (want_index != is_index(doc))
      throw Error(what + ": the descriptor that points to it says `" + d.media_type + "`, the document is " +
                  (want_index ? "a manifest" : "an index"));
  }
}

std::vector<std::string> parse_diff_ids(const json& config, const std::string& what) {
  std::vector<std::string> out;
  auto r = config.find("rootfs");
  if (r == config.end() || !r->is_object()) throw Error(what + ": the image config has no `rootfs`");
  auto d = r->find("diff_ids");
  if (d == r->end() || !d->is_array()) throw Error(what + ": the image config has no `rootfs.diff_ids`");
  for (const auto& x : *d) {
    if (!x.is_string()) throw Error(what + ": a diff_id is not a string");
    out.push_back(x.get<std::string>());
    util::digest_hex(out.back(), what + " diff_id");
  }
  return out;
}

void check_layer(const Descriptor& l, const std::string& image) {
  const std::string& mt = l.media_type;
  const std::string where = "image `" + image + "` layer `" + l.digest + "`";
  if (mt.find("foreign") != std::string::npos || mt.find("nondistributable") != std::string::npos)
    throw Error(where + ": foreign layers (media type `" + mt + "`) are not supported; their URLs are never fetched");
  if (mt.ends_with("+encrypted")) throw Error(where + ": encrypted layers are not supported");
  static const char* kOk[] = {
      "application/vnd.oci.image.layer.v1.tar",
      "application/vnd.oci.image.layer.v1.tar+gzip",
      "application/vnd.oci.image.layer.v1.tar+zstd",
      "application/vnd.docker.image.rootfs.diff.tar.gzip",
      "application/vnd.docker.image.rootfs.diff.tar",
      "",  // docker-archive manifests carry no media types
  };
  for (const char* ok : kOk)
    if (mt == ok) return;
  throw Error(where + ": unsupported media type `" + mt + "`");
}

Platform host_platform() {
  utsname u{};
  ::uname(&u);
  std::string m = u.machine;
  Platform p{"linux", m, ""};
  if (m == "x86_64")
    p.architecture = "amd64";
  else if (m == "aarch64")
    p = {"linux", "arm64", "v8"};
  else if (m == "ppc64le")
    p.architecture = "ppc64le";
  else if (m.starts_with("armv7"))
    p = {"linux", "arm", "v7"};
  return p;
}

Platform parse_platform(std::string_view text) {
  auto parts = util::split(text, '/');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() || parts[1].empty())
    throw Error("bad platform `" + std::string(text) + "`: expected OS/ARCH[/VARIANT]");
  return {parts[0], parts[1], parts.size() == 3 ? parts[2] : ""};
}

const Descriptor& select_platform(const std::vector<Descriptor>& ms, const Platform& want, const std::string& image) {
  const Descriptor* loose = nullptr;
  for (const auto& d : ms) {
    if (d.platform.os != want.os || d.platform.architecture != want.architecture) continue;
    if (d.platform.variant == want.variant) return d;
    if (!loose && (want.variant.empty() || d.platform.variant.empty())) loose = &d;
  }
  if (loose) return *loose;
  std::string have;
  for (const auto& d : ms) {
    if (d.platform.os == "unknown") continue;  // attestation manifests
    have += have.empty() ? "" : ", ";
    have += d.platform.str();
  }
  throw Error(
      "image `" + image + "` has no manifest for platform " + want.str(),
      "platforms available: " + (have.empty() ? std::string("none listed") : have) + " (choose one with --platform)");
}

}  // namespace rt::image
