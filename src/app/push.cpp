// rt push: store -> compressed blobs -> registry (host). Blobs the
// registry has are not sent again (HEAD, or a mount from the repository
// the image was pulled from), so a push that was interrupted is finished
// by running it again.
#include <fcntl.h>

#include <algorithm>

#include "app/export.hpp"
#include "app/import.hpp"
#include "app/store.hpp"
#include "image/registry.hpp"
#include "image/sha256.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "store/ref.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/progress.hpp"
#include "util/strings.hpp"

namespace rt {

std::string push(const std::string& image, const std::string& ref_text, const PushOptions& o) {
  util::log_init(o.verbosity);
  const image::Compression compression = image::parse_compression(o.compression);
  // Without REF the image's own name says where, and it must name its
  // registry: a store name such as `app` is not sent to Docker Hub unasked.
  const std::string target = ref_text.empty() ? image : ref_text;
  const std::string where_to = "give the registry reference to push to: rt push " + image + " REGISTRY/REPOSITORY:TAG";
  store::Reference ref;
  try {
    ref = store::parse_reference(target);
  } catch (const Error& e) {
    throw Error(std::string(e.what()), ref_text.empty() ? where_to : "");
  }
  if (ref_text.empty() && !image.starts_with(ref.registry + "/"))
    throw Error("`" + image + "` names no registry to push to", where_to);
  image::Registry reg(ref, image::registry_options(o.ca_file, o.insecure, o.plain_http));

  app::Store store(o.storage);
  ConvertOptions co;
  static_cast<StoreOptions&>(co) = o;
  app::Exported src = app::export_source(image, store.tmp_dir() + "/push", true, co);
  // Access (a HEAD of the empty blob) before the layers are compressed: a
  // refusal should not wait for them.
  reg.has_blob(image::sha256_digest(""));
  std::vector<app::OutLayer> layers;
  {
    util::Meter meter("compressing the layers of `" + image + "`", app::layer_bytes(src.image),
                      util::Meter::mode_for(o.verbosity));
    layers = app::compressed_layers(store, src.image, compression, static_cast<unsigned>(std::max(0, o.jobs)), meter);
    meter.done();
  }
  std::vector<std::string> diff_ids;
  for (const auto& l : layers) diff_ids.push_back(l.diff_id);
  const std::string config = app::export_config(src.image.config_text, diff_ids);
  const std::string manifest = app::oci_manifest(config, layers);

  // A repository of the same registry the image came from: blobs may be
  // mounted from there instead of sent.
  std::string from;
  try {
    if (auto info = store.info(image); info && !info->ref.empty()) {
      const store::Reference origin = store::parse_reference(info->ref);
      if (origin.registry == ref.registry && origin.repository != ref.repository) from = origin.repository;
    }
  } catch (const Error&) {  // a path, or an import's "import:PATH": none
  }

  // The config as a blob file too: uploads go from files.
  app::WorkDir work(store.tmp_dir(), "push");
  const std::string config_file = work.path() + "/config.json";
  {
    util::UniqueFd fd = util::open_fd(config_file, O_WRONLY | O_CREAT | O_EXCL, 0600);
    util::write_all(fd.get(), config, config_file);
  }
  std::vector<app::OutLayer> blobs = layers;
  blobs.push_back({{"application/vnd.oci.image.config.v1+json", image::sha256_digest(config),
                    static_cast<int64_t>(config.size()), {}, {}},
                   "", config_file});
  uint64_t total = 0;
  for (const auto& b : blobs) total += static_cast<uint64_t>(b.blob.size);
  const std::string shown = ref.str();
  util::Meter meter("pushing `" + image + "` to `" + shown + "`", total, util::Meter::mode_for(o.verbosity));
  size_t sent = 0, had = 0, mounted = 0;
  for (const auto& b : blobs) {
    const std::string what = b.diff_id.empty() ? "config" : "layer " + b.blob.digest.substr(0, 19);
    if (reg.has_blob(b.blob.digest)) {
      util::info(what + ": the registry has it");
      ++had;
    } else if (!from.empty() && reg.mount_blob(b.blob.digest, from)) {
      util::info(what + ": mounted from " + from);
      ++mounted;
    } else {
      reg.upload_blob(b.blob, b.file, [&meter](uint64_t n) { meter.add(n); });
      util::note("sent " + what + " " + util::human_bytes(static_cast<uint64_t>(b.blob.size)));
      ++sent;
      continue;
    }
    meter.add(static_cast<uint64_t>(b.blob.size));
  }
  meter.done();
  const std::string digest = reg.put_manifest(ref.manifest_ref(), manifest, image::media::kOciManifest);
  util::note("pushed `" + image + "` to `" + shown + "` (" + digest.substr(0, 19) + "; " + std::to_string(sent) +
             " blob" + (sent == 1 ? "" : "s") + " sent, " + std::to_string(had + mounted) + " already there" +
             (mounted ? " (" + std::to_string(mounted) + " mounted)" : "") + ")");
  return digest;
}

}  // namespace rt
