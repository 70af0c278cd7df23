// rt pull: registry -> verified blobs in the cache -> unpacked image (host).
// Layers download in parallel; each is unpacked as soon as it and the
// layers below it are there, so downloading and unpacking overlap.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/assemble.hpp"
#include "app/import.hpp"
#include "app/oras.hpp"
#include "app/store.hpp"
#include "image/manifest.hpp"
#include "image/oras.hpp"
#include "image/registry.hpp"
#include "image/signatures.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "store/lookup.hpp"
#include "store/ref.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/progress.hpp"
#include "util/strings.hpp"
#include "util/work_queue.hpp"

namespace rt {
namespace {

using image::Descriptor;

}  // namespace

std::string pull(const std::string& ref_text, const PullOptions& o) {
  // A SIF file (oras://): a file, its name where NAME would be.
  if (image::is_oras(ref_text)) return app::pull_sif(ref_text, o.name, o);
  util::log_init(o.verbosity);
  store::Reference ref = store::parse_reference(ref_text);
  image::Registry reg(ref, image::registry_options(o.ca_file, o.insecure, o.plain_http));
  const std::string shown = ref.str();
  const std::string name = o.name.empty() ? ref.str() : o.name;
  app::Store store(o.storage);
  std::optional<app::FileLock> lock;
  if (o.if_missing) {
    // A rank that found the image missing: the other ranks of its node
    // wait here while the first pulls, then find it and ask nothing.
    lock.emplace(store.lock_name(name));
    if (store.info(name)) return name;
  }

  auto doc = reg.get_manifest(ref.manifest_ref());
  // The trust policy, before anything is stored: it judges the manifest
  // (or index) the reference names, as podman and skopeo do; an index
  // names each platform's manifest by digest, so that one is bound too.
  const std::optional<image::Admission> admitted =
      image::admit_image(o.policy, ref, doc.digest, image::registry_options(o.ca_file, o.insecure, o.plain_http), false);
  auto j = image::parse_json(doc.body, "image `" + shown + "` manifest");
  std::string manifest_digest = doc.digest;
  if (image::is_index(j)) {
    auto ms = image::parse_index(j, "image `" + shown + "` index");
    image::Platform want = o.platform.empty() ? image::host_platform() : image::parse_platform(o.platform);
    const Descriptor& d = image::select_platform(ms, want, shown);
    doc = reg.get_manifest(d.digest);
    j = image::parse_json(doc.body, "image `" + shown + "` manifest");
    image::check_media_type(d, j, "image `" + shown + "` manifest " + d.digest);
    manifest_digest = doc.digest;
  }
  image::Manifest m = image::parse_manifest(j, "image `" + shown + "` manifest");
  for (const auto& l : m.layers) image::check_layer(l, shown);
  std::string config = reg.get_blob(m.config);
  auto diff_ids = image::parse_diff_ids(image::parse_json(config, "image `" + shown + "` config"), shown);
  if (diff_ids.size() != m.layers.size())
    throw Error("image `" + shown + "`: the manifest lists " + std::to_string(m.layers.size()) +
                " layers but the config " + std::to_string(diff_ids.size()) + " diff_ids");

  if (!lock) lock.emplace(store.lock_name(name));
  const bool as_sqfs = store_format(o.format) == "sqfs";
  if (auto info = store.info(name);
      o.squash.empty() && info && info->manifest_digest == manifest_digest && info->squashfs == as_sqfs) {
    util::note("`" + name + "` is up to date (" + manifest_digest.substr(0, 19) + ")");
    return name;
  }

  // Downloads: a few threads take layers in order; each layer's future says
  // when its blob is in the cache.
  const size_t n = m.layers.size();
  std::vector<std::promise<void>> ready(n);
  std::vector<std::shared_future<void>> ready_f;
  uint64_t total = 0;
  size_t missing = 0;
  for (size_t i = 0; i < n; ++i) {
    ready_f.push_back(ready[i].get_future().share());
    if (!store.has_blob(m.layers[i].digest)) {
      total += static_cast<uint64_t>(std::max<int64_t>(m.layers[i].size, 0));
      ++missing;
    }
  }
  util::Meter progress("downloading " + std::to_string(missing) + " layer" + (missing == 1 ? "" : "s"), total,
                       util::Meter::mode_for(o.verbosity));
  std::atomic<size_t> left{missing};
  auto fetch = [&](const size_t& i) {
    const Descriptor& d = m.layers[i];
    try {
      if (!store.has_blob(d.digest)) {
        app::WorkDir work(store.tmp_dir(), "blob");
        std::string file = work.path() + "/blob";
        reg.download_blob(d, file, [&](uint64_t b) { progress.add(b); });
        store.commit_blob(d.digest, file);
        util::note("downloaded layer " + std::to_string(i + 1) + "/" + std::to_string(n) + " " +
                   d.digest.substr(0, 19) + " " +
                   util::human_bytes(static_cast<uint64_t>(std::max<int64_t>(d.size, 0))));
        if (--left == 0) progress.done();
      }
      ready[i].set_value();
    } catch (...) {
      ready[i].set_exception(std::current_exception());
    }
  };
  // Declared after everything the workers use: on the way out (an error),
  // they finish what they have and drop the rest.
  const int threads = std::max(1, std::min<int>(o.jobs, static_cast<int>(n)));
  util::WorkQueue<size_t> downloads(static_cast<unsigned>(threads), fetch);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  downloads.push(order);

  image::ImageSource src;
  src.name = name;
  src.ref = shown;
  src.config_text = config;
  src.config_digest = m.config.digest;
  src.manifest_digest = manifest_digest;
  if (admitted)
    src.admission = nlohmann::json{{"policy", admitted->policy},
                                   {"scope", admitted->scope},
                                   {"requirement", admitted->requirement},
                                   {"manifest_digest", admitted->manifest_digest},
                                   {"signer", admitted->signer}}
                        .dump();
  for (size_t i = 0; i < n; ++i) {
    std::string path = store.blob_path(m.layers[i].digest);
    src.layers.push_back(
        {m.layers[i].digest, m.layers[i].digest, m.layers[i].size, diff_ids[i], [f = ready_f[i], path] {
           f.get();  // rethrows a failed download
           auto fd = std::make_shared<util::UniqueFd>(util::open_fd(path, O_RDONLY));
           return image::ReadFn(
               [fd, path](void* buf, size_t size) { return util::read_some(fd->get(), buf, size, path); });
         }});
  }
  // Unpacking overlaps the downloads, whose progress shows meanwhile.
  if (!app::deliver(store, src, o, missing == 0)) return src.name;
  util::note("pulled `" + shown + "` as `" + name + "` (" + manifest_digest.substr(0, 19) + ")");
  return name;
}

}  // namespace rt
