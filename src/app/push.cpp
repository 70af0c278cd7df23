// rt push: store -> compressed blobs -> registry (host). Blobs the
// registry has are not sent again (HEAD, or a mount from the repository
// the image was pulled from), so a push that was interrupted is finished
// by running it again.
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "app/export.hpp"
#include "app/import.hpp"
#include "app/oras.hpp"
#include "app/push_sign.hpp"
#include "app/store.hpp"
#include "image/oras.hpp"
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
namespace {

// Blobs sent at once (Docker's default for uploads is five, skopeo's
// copies run layers side by side too).
constexpr size_t kSenders = 4;

// The blobs ready to send, taken by the senders in order. pop() waits for
// one; it returns nothing once the queue is closed and empty, or stopped
// (a sender failed, or the push is being left).
class BlobQueue {
public:
  bool push(app::OutLayer b) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stopped_) return false;
      items_.push_back(std::move(b));
    }
    cv_.notify_one();
    return true;
  }
  std::optional<app::OutLayer> pop() {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait(g, [this] { return stopped_ || closed_ || !items_.empty(); });
    if (stopped_ || items_.empty()) return std::nullopt;
    app::OutLayer b = std::move(items_.front());
    items_.pop_front();
    return b;
  }
  void close() { set(closed_); }
  void stop() { set(stopped_); }

private:
  void set(bool& flag) {
    {
      std::lock_guard<std::mutex> g(mu_);
      flag = true;
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<app::OutLayer> items_;
  bool closed_ = false, stopped_ = false;
};

}  // namespace

std::string push(const std::string& image, const std::string& ref_text, const PushOptions& o) {
  // A SIF file as Apptainer keeps one in a registry (oras://).
  if (image::is_oras(ref_text)) {
    if (o.sign.wanted())
      throw Error("--sign-by signs a registry image's manifest, not a SIF file pushed to oras://",
                  "sign the SIF file itself with rt sign before pushing it");
    return app::push_sif(image, ref_text, o);
  }
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
  // What signing can refuse (the lookaside store, the key) is refused
  // before anything is sent.
  std::optional<app::PushSigner> signer;
  if (o.sign.wanted()) signer.emplace(ref, o.sign);
  image::Registry reg(ref, image::registry_options(o.ca_file, o.insecure, o.plain_http));

  app::Store store(o.storage);
  ConvertOptions co;
  static_cast<StoreOptions&>(co) = o;
  app::Exported src = app::export_source(image, store.tmp_dir() + "/push", true, co);
  // Access (a HEAD of the empty blob) before the layers are compressed: a
  // refusal should not wait for them.
  reg.has_blob(image::sha256_digest(""));

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

  // Each layer is sent as soon as it is compressed, while the next ones
  // are: several at once, each sender with a connection (and token) of its
  // own, as other clients send them. The config goes when all are there.
  const std::string shown = ref.str();
  BlobQueue queue;
  std::atomic<size_t> sent{0}, had{0}, mounted{0};
  std::atomic<uint64_t> done_bytes{0};
  std::atomic<util::Meter*> send_meter{nullptr};  // once compression is over
  std::mutex failed_mu;
  std::exception_ptr failed;
  auto send = [&](image::Registry& r) {
    try {
      while (auto b = queue.pop()) {
        const std::string what = b->diff_id.empty() ? "config" : "layer " + b->blob.digest.substr(0, 19);
        const auto size = static_cast<uint64_t>(b->blob.size);
        if (r.has_blob(b->blob.digest)) {
          util::info(what + ": the registry has it");
          ++had;
        } else if (!from.empty() && r.mount_blob(b->blob.digest, from)) {
          util::info(what + ": mounted from " + from);
          ++mounted;
        } else {
          uint64_t counted = 0;
          r.upload_blob(b->blob, b->file, [&](uint64_t n) {
            if (util::Meter* m = send_meter.load()) {
              m->add(n);
              counted += n;
            }
          });
          util::note("sent " + what + " " + util::human_bytes(size));
          ++sent;
          done_bytes += size;
          if (util::Meter* m = send_meter.load(); m && size > counted) m->add(size - counted);
          continue;
        }
        done_bytes += size;
        if (util::Meter* m = send_meter.load()) m->add(size);
      }
    } catch (...) {
      std::lock_guard<std::mutex> g(failed_mu);
      if (!failed) failed = std::current_exception();
      queue.stop();  // the others stop after their current blob
    }
  };
  std::vector<std::unique_ptr<image::Registry>> more;  // the other senders' connections
  for (size_t i = 1; i < kSenders; ++i)
    more.push_back(
        std::make_unique<image::Registry>(ref, image::registry_options(o.ca_file, o.insecure, o.plain_http)));
  std::vector<std::jthread> threads;
  struct Stop {  // on the way out, before the threads are joined
    BlobQueue& q;
    ~Stop() { q.stop(); }
  } stop{queue};
  threads.emplace_back([&send, &reg] { send(reg); });
  for (auto& r : more) threads.emplace_back([&send, r = r.get()] { send(*r); });

  std::vector<app::OutLayer> layers;
  uint64_t total = 0;
  {
    util::Meter meter("compressing the layers of `" + image + "`", app::layer_bytes(src.image),
                      util::Meter::mode_for(o.verbosity));
    try {
      layers = app::compressed_layers(store, src.image, compression, static_cast<unsigned>(std::max(0, o.jobs)), meter,
                                      [&](const app::OutLayer& l) {
                                        if (!queue.push(l)) throw Error("a sender stopped");  // its error follows
                                        total += static_cast<uint64_t>(l.blob.size);
                                      });
    } catch (...) {
      std::lock_guard<std::mutex> g(failed_mu);
      if (failed) std::rethrow_exception(failed);  // what stopped it
      throw;
    }
    meter.done();
  }
  std::vector<std::string> diff_ids;
  for (const auto& l : layers) diff_ids.push_back(l.diff_id);
  const std::string config = app::export_config(src.image.config_text, diff_ids);
  const std::string manifest = app::oci_manifest(config, layers);
  // The config as a blob file too: uploads go from files.
  app::WorkDir work(store.tmp_dir(), "push");
  const std::string config_file = work.path() + "/config.json";
  {
    util::UniqueFd fd = util::open_fd(config_file, O_WRONLY | O_CREAT | O_EXCL, 0600);
    util::write_all(fd.get(), config, config_file);
  }
  queue.push({{image::media::kOciConfig,
               image::sha256_digest(config),
               static_cast<int64_t>(config.size()),
               {},
               {}},
              "",
              config_file});
  total += config.size();
  util::Meter meter("pushing `" + image + "` to `" + shown + "`", total, util::Meter::mode_for(o.verbosity));
  meter.add(done_bytes.load());
  send_meter = &meter;
  queue.close();
  for (auto& t : threads) t.join();
  send_meter = nullptr;
  {
    std::lock_guard<std::mutex> g(failed_mu);
    if (failed) std::rethrow_exception(failed);
  }
  meter.done();
  // The signature is made before the manifest is put (its digest is that
  // of these bytes), so a wrong passphrase leaves the tag as it was;
  // skopeo signs after, and says the image may already be there.
  app::PushSigner::Signatures signature;
  if (signer) {
    try {
      signature = signer->sign(image::sha256_digest(manifest));
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + "; the manifest was not pushed to `" + shown +
                      "` (its blobs may have been: a push with the key's passphrase sends no blob again)",
                  e.hint());
    }
  }
  const std::string digest = reg.put_manifest(ref.manifest_ref(), manifest, image::media::kOciManifest);
  if (signer) {
    if (digest != image::sha256_digest(manifest))
      throw Error("the registry took the manifest of `" + shown + "` as " + digest + ", not as the " +
                  image::sha256_digest(manifest) + " signed: no signature written");
    std::vector<std::string> where;
    try {
      where = signer->store(reg, digest, signature);
    } catch (const Error& e) {
      throw Error("pushed `" + image + "` to `" + shown + "` (" + digest + "), but its signature was not written: " +
                  e.what(), e.hint());
    }
    util::note("signed `" + shown + "` (" + digest.substr(0, 19) + ") by " + signer->signer() + ": " +
               util::join(where, ", "));
  }
  util::note("pushed `" + image + "` to `" + shown + "` (" + digest.substr(0, 19) + "; " + std::to_string(sent.load()) +
             " blob" + (sent == 1 ? "" : "s") + " sent, " + std::to_string(had + mounted) + " already there" +
             (mounted ? " (" + std::to_string(mounted.load()) + " mounted)" : "") + ")");
  return digest;
}

}  // namespace rt
