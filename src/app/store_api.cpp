// rt images / inspect / rm / prune (host).
#include "app/store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <optional>

#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "rt/instance.hpp"
#include "run/image.hpp"
#include "run/image_root.hpp"
#include "run/injection.hpp"
#include "run/sqfs_facts.hpp"
#include "squash/sqfs.hpp"
#include "store/lookup.hpp"
#include "store/root.hpp"
#include "store/site.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

// The store for a command that only reads or removes: not made when missing.
std::optional<app::Store> existing_store(const StoreOptions& o) {
  util::log_init(o.verbosity);
  return app::Store::existing(o.storage);
}

[[noreturn]] void no_image(const std::string& name, const std::string& root) {
  throw Error("no image `" + name + "` in store `" + root + "`", "rt images lists what is there");
}

ImageSummary summary(const app::ImageInfo& i) {
  return {i.name, i.ref, i.manifest_digest, i.config_digest, i.created, i.dir, i.size, {}, {}, {}, {}, {}, {}};
}

// A site store's image as rt images and rt inspect show it: its file for
// the path, the file's digest for the ID, when the file last changed.
ImageSummary site_summary(const store::SiteImage& img) {
  ImageSummary out;
  out.name = img.name;
  out.dir = img.path();
  out.site = img.dir;
  out.size = img.size;
  out.file_digest = img.digest;
  struct stat st;
  if (::stat(out.dir.c_str(), &st) == 0) out.created = util::utc_time(st.st_mtime);
  return out;
}

// The stored name for what the user typed: as given, or canonical.
std::string resolve_name(const app::Store& s, const std::string& name) {
  auto dir = store::find_image(s.dir(), name);
  if (!dir) no_image(name, s.root());
  return store::unescape_name(dir->substr(dir->rfind('/') + 1));
}

}  // namespace

std::vector<ImageSummary> list_images(const StoreOptions& o) {
  std::vector<ImageSummary> out;
  if (auto s = existing_store(o))
    for (const auto& i : s->list()) out.push_back(summary(i));
  // Then the site's, as exec searches them; one that cannot be trusted is
  // named and passed over, so the user's own list still shows.
  for (const auto& dir : hpc::load_site_config().get("store.site")) {
    try {
      if (auto images = store::read_site_index(dir))
        for (const auto& img : *images) out.push_back(site_summary(img));
    } catch (const Error& e) {
      util::warn(e.what());
    }
  }
  return out;
}

bool image_is_path(const std::string& name, const StoreOptions& o) {
  switch (store::name_kind(name)) {
    case store::NameKind::Path:
      return true;
    case store::NameKind::Reference:
      return false;
    case store::NameKind::Either:
      break;
  }
  const store::Root* root = store::Root::user_if_exists(o.storage);
  return !(root && store::find_image(*root, name)) && util::path_exists(name);
}

ImageSummary inspect_image(const std::string& name, const StoreOptions& o) {
  auto s = existing_store(o);
  if (!s || !store::find_image(s->dir(), name))
    if (auto site = run::find_site_image(name)) {
      ImageSummary out = site_summary(*site);
      // Its configuration is inside the file: read as exec reads it, once
      // the file has matched its index.
      const auto root = run::ImageRoot::open(*run::open_site_image(name, o.storage), o.storage);
      if (auto text = root->read(squash::kConfigPath, 4 << 20)) {
        auto doc = util::parse_json_object(*text, "`" + out.dir + ":" + squash::kConfigPath + "`");
        const auto& cfg = util::json_object(doc, "config", "`" + out.dir + ":" + squash::kConfigPath + "`");
        if (!cfg.is_null()) out.config = cfg.dump(2);
      }
      return out;
    }
  if (!s) no_image(name, store::store_path(o.storage));
  auto info = s->info(resolve_name(*s, name));
  if (!info) throw Error("image `" + name + "` in store `" + s->root() + "` has no metadata");
  ImageSummary out = summary(*info);
  if (auto meta = util::read_regular_if_exists(info->dir + "/" + store::kMetaFile)) {
    auto j = nlohmann::json::parse(*meta, nullptr, false);
    if (j.is_object() && j.contains("base") && j["base"].is_object()) {
      out.base_name = j["base"].value("name", "");
      out.base_digest = j["base"].value("config_digest", "");
    }
    if (j.is_object() && j.contains("policy") && j["policy"].is_object()) out.policy = j["policy"].dump();
  }
  const std::string file = info->dir + "/image-config.json";
  if (auto text = util::read_regular_if_exists(file, 4 << 20)) {
    auto doc = util::parse_json_object(*text, "`" + file + "`");
    const auto& cfg = util::json_object(doc, "config", "`" + file + "`");
    if (!cfg.is_null()) out.config = cfg.dump(2);
  }
  return out;
}

void remove_image(const std::string& name, const StoreOptions& o) {
  auto s = existing_store(o);
  if (!s || !store::find_image(s->dir(), name))
    if (auto site = run::find_site_image(name))
      throw Error("image `" + name + "` is in the site store `" + site->dir + "` (`" + site->path() +
                      "`), which rt never changes: rt rm removes images of your own store",
                  "the site's administrators remove it there");
  if (!s) no_image(name, store::store_path(o.storage));
  std::string stored = resolve_name(*s, name);
  s->remove(stored);
  util::note("removed `" + stored + "`");
}

PruneReport prune_store(const StoreOptions& o) {
  PruneReport r;
  auto s = existing_store(o);
  if (!s) return r;  // nothing there to prune
  // rt build's cache goes first: its layers are then blobs no image uses.
  if (util::UniqueFd cache = s->dir().dir(store::kBuildCacheDir, false))
    for (const auto& n : util::list_names(cache.get(), s->dir().sub(store::kBuildCacheDir)))
      if (n.size() == 64 && util::is_hex(n) && ::unlinkat(cache.get(), n.c_str(), 0) == 0) ++r.build_cache;
  // And RUN --mount=type=cache's directories, as Docker's builder prune
  // takes them.
  if (util::UniqueFd caches = s->dir().dir(store::kRunCacheDir, false))
    for (const auto& n : util::list_names(caches.get(), s->dir().sub(store::kRunCacheDir)))
      if (n.size() == 32 && util::is_hex(n)) {
        util::remove_tree_at(caches.get(), n, s->dir().sub(store::kRunCacheDir) + "/" + n);
        ++r.run_caches;
      }
  // So do the notes of compressed layers (rt push): their blobs are used by
  // no image.
  if (util::UniqueFd notes = s->dir().dir(store::kCompressedDir, false))
    for (const auto& n : util::list_names(notes.get(), s->dir().sub(store::kCompressedDir)))
      if (n.size() == 69 && util::is_hex(n.substr(0, 64)) && (n.ends_with(".gzip") || n.ends_with(".zstd")))
        ::unlinkat(notes.get(), n.c_str(), 0);
  r.blob_bytes = s->prune(&r.blobs, &r.debris);
  if (util::UniqueFd facts = s->dir().dir(store::kSqfsFactsDir, false))
    r.fact_bytes = run::prune_squash_facts(facts.get(), &r.facts);
  r.instances = prune_instances(o.storage).size();
  r.staged = app::prune_staged(*s);
  if (util::UniqueFd trees = s->dir().dir(store::kHostTreesDir, false))
    run::prune_host_trees(trees.get(), s->dir().sub(store::kHostTreesDir));
  return r;
}

void handle_signals_for_image_commands() {
  util::clean_up_on_signals();
  ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace rt
