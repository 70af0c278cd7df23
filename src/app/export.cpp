// Images leaving the store as layers (see export.hpp).
#include "app/export.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/import.hpp"
#include "image/layer_stream.hpp"
#include "image/sha256.hpp"
#include "image/tar_filter.hpp"
#include "rt/error.hpp"
#include "run/image.hpp"
#include "store/layout.hpp"
#include "store/ref.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/strings.hpp"

namespace rt::app {

Magic magic_of(const std::string& file) {
  util::UniqueFd fd = util::open_fd(file, O_RDONLY);
  unsigned char m[4] = {};
  const ssize_t n = ::pread(fd.get(), m, sizeof m, 0);
  return image::magic_of(m, n > 0 ? static_cast<size_t>(n) : 0);
}

namespace {

uint64_t file_size(const std::string& file) {
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) throw SysError{errno, "stat", file};
  return static_cast<uint64_t>(st.st_size);
}

// The diff_id of a compressed blob: read through once.
std::string diff_id_of(const std::string& file) {
  image::LayerStream s(file_reader(file), file);
  std::vector<char> buf(1 << 20);
  while (s.read(buf.data(), buf.size()) > 0) {
  }
  return s.diff_id();
}

// The uncompressed tar of a layer, whatever its blob's compression,
// without the names the source drops.
image::ReadFn tar_of(const image::LayerInput& l, const std::vector<std::string>& drop) {
  auto s = std::make_shared<image::LayerStream>(l.open(), l.name);
  image::ReadFn tar = [s](void* buf, size_t size) { return s->read(buf, size); };
  return drop.empty() ? tar : image::without_names(std::move(tar), drop);
}

}  // namespace

std::optional<image::ImageSource> stored_layers(Store& store, const std::string& name) {
  const auto info = store.info(name);
  if (!info || info->squashfs) return std::nullopt;
  const auto meta = util::read_regular_if_exists(info->dir + "/" + store::kMetaFile);
  const auto config = util::read_regular_if_exists(info->dir + "/" + run::kBundleConfig);
  if (!meta || !config) return std::nullopt;
  const nlohmann::json m = util::parse_json_object(*meta, info->dir + "/" + store::kMetaFile);
  if (!m.contains("layers") || !m["layers"].is_array() || m["layers"].empty()) return std::nullopt;
  image::ImageSource s;
  s.name = name;
  s.config_text = *config;
  for (const auto& l : m["layers"]) {
    if (!l.is_string() || !util::is_valid_digest(l.get<std::string>())) return std::nullopt;
    const std::string path = store.blob_path(l.get<std::string>());
    if (!util::path_exists(path)) return std::nullopt;
    s.layers.push_back({l.get<std::string>(), l.get<std::string>(), static_cast<int64_t>(file_size(path)), "",
                        [path] { return file_reader(path); }});
  }
  return s;
}

std::string archive_tag(const std::string& name) {
  try {
    const store::Reference r = store::parse_reference(name);
    if (!r.digest.empty()) return "";
    const bool hub = r.registry == "docker.io";
    const std::string repo = hub && r.repository.starts_with("library/") ? r.repository.substr(8) : r.repository;
    return (hub ? "" : r.registry + "/") + repo + ":" + r.tag;
  } catch (const Error&) {
    return "";
  }
}

std::string export_config(const std::string& config_text, const std::vector<std::string>& diff_ids) {
  const nlohmann::json original = util::parse_json_object(config_text, "the image config");
  nlohmann::json cfg = original;
  cfg["rootfs"] = {{"type", "layers"}, {"diff_ids", diff_ids}};
  // "created" must be a time where present (older rt builds wrote "").
  if (cfg.contains("created") && cfg["created"] == "") cfg.erase("created");
  if (cfg.contains("history") && cfg["history"].is_array())
    for (auto& h : cfg["history"])
      if (h.is_object() && h.contains("created") && h["created"] == "") h.erase("created");
  // One history entry per layer (a flattened tree has one): loaders check.
  size_t with_layers = 0;
  if (cfg.contains("history") && cfg["history"].is_array())
    for (const auto& h : cfg["history"]) with_layers += !(h.is_object() && h.value("empty_layer", false));
  if (with_layers != diff_ids.size()) {
    cfg["history"] = nlohmann::json::array();
    for (size_t i = 0; i < diff_ids.size(); ++i) cfg["history"].push_back({{"created_by", "rt convert"}});
  }
  // Unchanged: the same bytes, so the same digest as where it came from.
  return cfg == original ? config_text : cfg.dump();
}

std::vector<OutLayer> compressed_layers(Store& store, const image::ImageSource& src, image::Compression c,
                                        unsigned threads, util::Meter& meter,
                                        const std::function<void(const OutLayer&)>& ready) {
  std::vector<std::string> config_diff_ids;
  try {
    config_diff_ids = image::parse_diff_ids(util::parse_json_object(src.config_text, "the image config"), src.name);
  } catch (const Error&) {  // none usable: computed where needed
  }
  const char* alg = image::compression_name(c);
  util::UniqueFd notes = store.dir().dir(store::kCompressedDir, true);
  std::vector<OutLayer> out;
  auto add = [&](OutLayer l) {
    out.push_back(std::move(l));
    if (ready) ready(out.back());
  };
  for (size_t i = 0; i < src.layers.size(); ++i) {
    const image::LayerInput& l = src.layers[i];
    const bool stored = util::is_valid_digest(l.expected_blob) && store.has_blob(l.expected_blob);
    std::string note;  // where a compressed form of this layer is remembered
    // One layer made from a tree: remembered by what it was made from, the
    // note holding the blob's digest and the tar's.
    const bool stamped = !stored && src.layers.size() == 1 && !src.tree_stamp.empty();
    if (stamped) {
      note = image::sha256_digest(src.tree_stamp).substr(7) + "." + alg;
      if (auto text = util::read_owned_at(notes.get(), note, 256)) {
        const auto words = util::split(util::trim(*text, " \n"), ' ');
        if (words.size() == 2 && util::is_valid_digest(words[0]) && util::is_valid_digest(words[1]) &&
            store.has_blob(words[0])) {
          const std::string file = store.blob_path(words[0]);
          add({{image::layer_media_type(c), words[0], static_cast<int64_t>(file_size(file)), {}, {}}, words[1], file});
          meter.add(file_size(file));
          continue;
        }
      }
    }
    if (stored) {
      const std::string path = store.blob_path(l.expected_blob);
      const Magic m = magic_of(path);
      if (m != Magic::Other) {  // compressed already (pulled): as it came
        const uint64_t size = file_size(path);
        std::string diff_id = !l.expected_diff_id.empty()                   ? l.expected_diff_id
                              : config_diff_ids.size() == src.layers.size() ? config_diff_ids[i]
                                                                            : diff_id_of(path);
        add({{m == Magic::Gzip ? image::layer_media_type(image::Compression::Gzip)
                               : image::layer_media_type(image::Compression::Zstd),
              l.expected_blob,
              static_cast<int64_t>(size),
              {},
              {}},
             diff_id,
             path});
        meter.add(size);
        continue;
      }
      note = util::digest_hex(l.expected_blob, "layer") + "." + alg;
      if (auto text = util::read_owned_at(notes.get(), note, 128)) {
        const std::string digest = util::trim(*text, " \n");
        if (util::is_valid_digest(digest) && store.has_blob(digest)) {
          const std::string file = store.blob_path(digest);
          add({{image::layer_media_type(c), digest, static_cast<int64_t>(file_size(file)), {}, {}},
               l.expected_blob,
               file});
          meter.add(file_size(path));
          continue;
        }
      }
    }
    WorkDir work(store.tmp_dir(), "compress");
    const std::string tmp = work.path() + "/blob";
    const image::CompressedLayer z =
        image::compress_layer(tar_of(l, src.drop), tmp, c, threads, [&meter](uint64_t n) { meter.add(n); });
    if (stored && z.diff_id != l.expected_blob)
      throw Error("image `" + src.name + "`: layer " + l.expected_blob + " is corrupt (its tar hashes to " + z.diff_id +
                  ")");
    store.commit_blob(z.digest, tmp);
    if (!note.empty())
      util::write_file_atomic_at(notes.get(), note, z.digest + (stamped ? " " + z.diff_id : "") + "\n");
    add({{image::layer_media_type(c), z.digest, static_cast<int64_t>(z.size), {}, {}},
         z.diff_id,
         store.blob_path(z.digest)});
  }
  return out;
}

std::string oci_manifest(const std::string& config, const std::vector<OutLayer>& layers) {
  nlohmann::json m = {{"schemaVersion", 2},
                      {"mediaType", image::media::kOciManifest},
                      {"config",
                       {{"mediaType", image::media::kOciConfig},
                        {"digest", image::sha256_digest(config)},
                        {"size", config.size()}}},
                      {"layers", nlohmann::json::array()}};
  for (const auto& l : layers)
    m["layers"].push_back({{"mediaType", l.blob.media_type}, {"digest", l.blob.digest}, {"size", l.blob.size}});
  return m.dump();
}

}  // namespace rt::app
