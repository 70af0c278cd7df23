// rt import: docker-archive, OCI layout (directory or archive), root
// filesystem tar (host).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/assemble.hpp"
#include "app/import.hpp"
#include "image/from_layers.hpp"
#include "image/manifest.hpp"
#include "image/sha256.hpp"
#include "image/tar_member.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "store/lookup.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/log.hpp"
#include "util/progress.hpp"
#include "util/strings.hpp"

namespace rt {
namespace app {
// The formats it reads are the image layer's.
using namespace image;

namespace {

using nlohmann::json;

uint64_t size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string base_name(const std::string& path) { return util::base_name(util::normalize_path(path)); }

// Where the pieces of an OCI layout live: a directory or a tar of one.
struct Layout {
  std::string dir;  // set for a directory
  std::string tar;  // set for an archive
  std::string read(const std::string& member) const {
    if (!dir.empty()) {
      auto t = util::read_regular_if_exists(dir + "/" + member, 4 << 20);
      if (!t) throw Error("`" + dir + "` has no `" + member + "`");
      return *t;
    }
    auto t = tar_read_small(tar, member);
    if (!t) throw Error("`" + tar + "` has no member `" + member + "`");
    return *t;
  }
  std::function<ReadFn()> opener(const std::string& member) const {
    if (!dir.empty()) return [p = dir + "/" + member] { return file_reader(p); };
    return [t = tar, member] { return tar_member_reader(t, member); };
  }
  std::string where() const { return dir.empty() ? tar : dir; }
};

std::string blob_member(const std::string& digest, const std::string& what) {
  return "blobs/sha256/" + util::digest_hex(digest, what);
}

// The config's platform must be the host's: an arm64 image would import
// and then fail with "Exec format error" on every run.
void check_platform(const std::string& config_text, const std::string& source) {
  json cfg = parse_json(config_text, "`" + source + "` image config");
  Platform have{util::json_string(cfg, "os", "`" + source + "` image config"),
                util::json_string(cfg, "architecture", "`" + source + "` image config"),
                util::json_string(cfg, "variant", "`" + source + "` image config")};
  Platform host = host_platform();
  if ((!have.os.empty() && have.os != host.os) ||
      (!have.architecture.empty() && have.architecture != host.architecture))
    throw Error("`" + source + "` holds an image for " + have.str() + "; this host runs " + host.str(),
                "import an archive saved for this platform (docker save --platform " + host.str() + ")");
}

ImageSource from_oci_layout(const Layout& lay, const std::string& tag, const std::string& source) {
  json index = parse_json(lay.read("index.json"), "`" + source + "` index.json");
  auto ms = parse_index(index, source);
  if (ms.empty()) throw Error("`" + source + "`: index.json lists no image");
  const Descriptor* pick = nullptr;
  const std::string what = "`" + source + "` index.json";
  std::vector<std::string> tags;  // per manifest, "" when untagged
  for (const auto& m : index["manifests"])
    tags.push_back(util::json_string(util::json_object(m, "annotations", what), "org.opencontainers.image.ref.name",
                                     what + " annotations"));
  const bool one_image =
      std::all_of(ms.begin(), ms.end(), [&](const Descriptor& d) { return d.digest == ms[0].digest; });
  if (!tag.empty()) {
    for (size_t i = 0; i < ms.size(); ++i)
      if (tags[i] == tag) pick = &ms[i];
    if (!pick) throw Error("`" + source + "` has no image tagged `" + tag + "`");
  } else if (one_image) {  // one image, perhaps under several tags
    pick = &ms[0];
  } else {
    std::string list;
    for (const auto& t : tags)
      if (!t.empty()) list += (list.empty() ? "" : ", ") + t;
    throw Error("`" + source + "` holds " + std::to_string(ms.size()) + " images; choose one with SOURCE:TAG",
                list.empty() ? "" : "tags: " + list);
  }
  std::string mtext = lay.read(blob_member(pick->digest, source));
  if (image::sha256_digest(mtext) != pick->digest) throw Error("`" + source + "`: manifest digest mismatch");
  json mdoc = parse_json(mtext, "`" + source + "` manifest");
  check_media_type(*pick, mdoc, "`" + source + "` manifest " + pick->digest);
  std::string manifest_digest = pick->digest;
  if (is_index(mdoc)) {  // a multi-platform image: take the host's
    auto inner = parse_index(mdoc, source);
    const Descriptor& d = select_platform(inner, host_platform(), source);
    mtext = lay.read(blob_member(d.digest, source));
    if (image::sha256_digest(mtext) != d.digest) throw Error("`" + source + "`: manifest digest mismatch");
    mdoc = parse_json(mtext, "`" + source + "` manifest");
    check_media_type(d, mdoc, "`" + source + "` manifest " + d.digest);
    manifest_digest = d.digest;
  }
  Manifest m = parse_manifest(mdoc, "`" + source + "` manifest");
  ImageSource src;
  src.manifest_digest = manifest_digest;
  src.config_text = lay.read(blob_member(m.config.digest, source));
  src.config_digest = m.config.digest;
  if (image::sha256_digest(src.config_text) != m.config.digest)
    throw Error("`" + source + "`: image config digest mismatch");
  check_platform(src.config_text, source);
  auto diff_ids = parse_diff_ids(parse_json(src.config_text, "image config"), source);
  if (diff_ids.size() != m.layers.size())
    throw Error("`" + source + "`: the manifest has " + std::to_string(m.layers.size()) + " layers, the config " +
                std::to_string(diff_ids.size()) + " diff_ids");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    check_layer(m.layers[i], source);
    src.layers.push_back({m.layers[i].digest, m.layers[i].digest, m.layers[i].size, diff_ids[i],
                          lay.opener(blob_member(m.layers[i].digest, source))});
  }
  std::string t = tag;
  for (size_t i = 0; t.empty() && i < tags.size(); ++i) t = tags[i];
  // A bare tag (OCI's usual annotation) names the image with the layout's
  // name: `busybox-oci:1.0`, not `1.0`.
  if (!t.empty()) src.name = t.find_first_of(":/@") == std::string::npos ? base_name(source) + ":" + t : t;
  return src;
}

ImageSource from_docker_archive(const std::string& tar, const std::string& source) {
  json manifest = json::parse(*tar_read_small(tar, "manifest.json"), nullptr, false);
  if (!manifest.is_array() || manifest.empty() || !manifest[0].is_object())
    throw Error("`" + source + "`: manifest.json is not a docker-archive manifest");
  const json& m = manifest[0];
  const std::string what = "`" + source + "` manifest.json";
  if (manifest.size() > 1) util::warn("`" + source + "` holds several images; importing the first");
  std::string config_member = util::json_string(m, "Config", what);
  auto config = tar_read_small(tar, config_member);
  if (!config) throw Error("`" + source + "` has no config `" + config_member + "`");
  ImageSource src;
  src.config_text = *config;
  src.config_digest = image::sha256_digest(*config);
  // Docker names the config by its digest: HEX.json, or blobs/sha256/HEX.
  std::string named = util::base_name(config_member);
  if (named.ends_with(".json")) named.resize(named.size() - 5);
  if (!util::is_hex(named) || named.size() != 64)
    throw Error("`" + source + "`: config `" + config_member + "` is not named by its digest");
  if ("sha256:" + named != src.config_digest)
    throw Error("`" + source + "`: config `" + config_member + "` does not match its name (its digest is " +
                src.config_digest + ")");
  check_platform(src.config_text, source);
  auto diff_ids = parse_diff_ids(parse_json(src.config_text, "image config"), source);
  auto layers = m.find("Layers");
  if (layers == m.end() || !layers->is_array()) throw Error("`" + source + "`: manifest.json has no Layers");
  if (layers->size() != diff_ids.size())
    throw Error("`" + source + "`: " + std::to_string(layers->size()) + " layers but " +
                std::to_string(diff_ids.size()) + " diff_ids");
  for (size_t i = 0; i < diff_ids.size(); ++i) {
    if (!(*layers)[i].is_string()) throw Error("`" + source + "`: a layer name is not a string");
    std::string member = (*layers)[i].get<std::string>();
    // Docker save names blobs by digest in newer versions; older ones use
    // <id>/layer.tar (uncompressed: its digest is the diff_id).
    std::string blob = member.starts_with("blobs/sha256/") ? "sha256:" + member.substr(13) : "";
    if (!blob.empty() && !util::is_valid_digest(blob)) blob.clear();
    src.layers.push_back(
        {diff_ids[i], blob, -1, diff_ids[i], [tar, member] { return tar_member_reader(tar, member); }});
  }
  auto tags = util::json_strings(m, "RepoTags", what);
  if (!tags.empty()) src.name = tags.front();
  src.bytes_hint = size_of(tar);
  return src;
}

ImageSource from_rootfs_tar(const std::string& tar) {
  ImageSource src;
  src.config_text = default_config();
  src.config_digest = image::sha256_digest(src.config_text);
  src.layers.push_back({base_name(tar), "", -1, "", [tar] { return file_reader(tar); }});
  src.bytes_hint = size_of(tar);
  return src;
}

}  // namespace
}  // namespace app

namespace app {

ReadFn file_reader(const std::string& path) {
  auto fd = std::make_shared<util::UniqueFd>(util::open_fd(path, O_RDONLY));
  return [fd, path](void* buf, size_t size) -> size_t { return util::read_some(fd->get(), buf, size, path); };
}

ImageSource import_source(const std::string& source_arg) {
  // SOURCE[:TAG] for OCI layouts; a path containing ':' wins if it exists.
  std::string source = source_arg, tag;
  if (!util::path_exists(source)) {
    size_t colon = source.rfind(':');
    if (colon != std::string::npos && util::path_exists(source.substr(0, colon))) {
      tag = source.substr(colon + 1);
      source = source.substr(0, colon);
    }
  }
  struct stat st;
  if (::stat(source.c_str(), &st) != 0) throw Error("import source `" + source + "` does not exist");
  image::ImageSource src;
  if (S_ISDIR(st.st_mode)) {
    if (!util::path_exists(source + "/index.json"))
      throw Error("`" + source + "` is a directory but not an OCI image layout (no index.json)",
                  "to run a root filesystem directory, give it to rt exec directly");
    src = app::from_oci_layout({source, ""}, tag, source);
  } else {
    auto members = image::tar_members(source);
    auto has = [&](const char* m) { return std::find(members.begin(), members.end(), m) != members.end(); };
    // Docker 25+ writes both: the OCI layout's descriptors carry sizes and
    // digests to check.
    if (has("index.json") && has("oci-layout"))
      src = app::from_oci_layout({"", source}, tag, source);
    else if (has("manifest.json"))
      src = app::from_docker_archive(source, source);
    else
      src = app::from_rootfs_tar(source);
  }
  if (src.name.empty()) src.name = app::base_name(source);
  src.ref = "import:" + util::normalize_path(source_arg, "/");
  return src;
}

std::string default_config() {
  json cfg = {{"architecture", host_platform().architecture},
              {"os", "linux"},
              {"config", {{"Env", {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}}},
              {"rootfs", {{"type", "layers"}, {"diff_ids", json::array()}}}};
  return cfg.dump();
}

}  // namespace app

namespace app {

// The layers' bytes (else the source's hint, 0 when unknown).
uint64_t layer_bytes(const ImageSource& src) {
  uint64_t total = 0;
  for (const auto& l : src.layers) {
    if (l.expected_size < 0) return src.bytes_hint;
    total += static_cast<uint64_t>(l.expected_size);
  }
  return total;
}

// `src` with every read of a layer counted by `meter`.
ImageSource metered(const ImageSource& src, util::Meter& meter) {
  ImageSource counted = src;
  for (auto& l : counted.layers)
    l.open = [open = std::move(l.open), &meter] {
      return ReadFn([read = open(), &meter](void* buf, size_t size) {
        size_t n = read(buf, size);
        meter.add(n);
        return n;
      });
    };
  return counted;
}

bool deliver(app::Store& store, const ImageSource& src, const ImportOptions& o, bool progress) {
  const uint64_t max_bytes = o.max_bytes ? o.max_bytes : kDefaultMaxBytes;
  const image::SquashOptions squash{o.compression, o.level, 0, max_bytes};
  const bool sqfs = !o.squash.empty() || store_format(o.format) == "sqfs";
  // A SquashFS file from the layers reads each layer twice (headers, then
  // contents).
  util::Meter meter(o.squash.empty() ? "unpacking `" + src.name + "`" : "writing `" + o.squash + "`",
                    layer_bytes(src) * (sqfs ? 2 : 1),
                    progress ? util::Meter::mode_for(o.verbosity) : util::Meter::Mode::Off);
  const ImageSource counted = metered(src, meter);
  if (!o.squash.empty())
    image::write_from_layers(counted, util::normalize_path(o.squash, util::current_dir()), squash);
  else if (sqfs)
    app::store_from_layers(store, counted, squash);
  else
    assemble_image(store, counted, {max_bytes, o.verbosity < 0});
  meter.done();
  return o.squash.empty();
}

}  // namespace app

std::string store_format(const std::string& format) {
  std::string f = format;
  if (f.empty())
    if (const char* env = std::getenv("RT_STORE_FORMAT")) f = env;
  if (f.empty() || f == "dir") return "dir";
  if (f == "sqfs") return "sqfs";
  throw Error("unknown store format `" + f + "`" + (format.empty() ? " (from RT_STORE_FORMAT)" : ""),
              "use dir (a directory tree) or sqfs (one SquashFS file)");
}

std::string import_image(const std::string& source_arg, const ImportOptions& o) {
  util::log_init(o.verbosity);
  app::ImageSource src = app::import_source(source_arg);
  if (!o.name.empty()) src.name = o.name;
  app::Store store(o.storage);
  auto lock = store.lock_name(src.name);
  if (app::deliver(store, src, o)) util::note("imported `" + src.name + "` into " + store.root());
  return src.name;
}

}  // namespace rt
