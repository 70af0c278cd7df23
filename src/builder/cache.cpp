// rt build: the cache: step keys, entries, and the step that looks its key up first (host).
#include "builder/builder.hpp"

#include <unistd.h>

namespace rt::builder {

std::string Builder::next_key(const State& st, const std::string& what) {
  json k = {st.key, st.config.value("config", json::object()), st.shell, what};
  return image::sha256_digest(k.dump()).substr(7);
}

std::optional<json> Builder::cache_get(const std::string& key) {
  if (o_.no_cache) return std::nullopt;
  auto text = util::read_owned_at(cache_dir_.get(), key, 1 << 16);
  if (!text) return std::nullopt;
  auto j = json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("created") || !j["created"].is_string()) return std::nullopt;
  if (j.contains("blob") != j.contains("diff_id")) return std::nullopt;
  for (const char* k : {"blob", "diff_id"})
    if (j.contains(k) && (!j[k].is_string() || !util::is_valid_digest(j[k].get<std::string>()))) return std::nullopt;
  if (j.contains("blob") && !store_.has_blob(j["blob"].get<std::string>())) return std::nullopt;  // pruned
  return j;
}

void Builder::cache_put(const std::string& key, const json& entry) {
  if (!util::write_file_atomic_at(cache_dir_.get(), key, entry.dump() + "\n"))
    util::warn("cannot write the build cache entry `" + key + "`");
}

// A cache entry that names a blob the store still has.
std::optional<json> Builder::cached_blob(const std::string& key) {
  auto text = util::read_owned_at(cache_dir_.get(), key, 1 << 20);
  json j = text ? json::parse(*text, nullptr, false) : json();
  if (!j.is_object() || !j.contains("blob") || !j["blob"].is_string()) return std::nullopt;
  const std::string blob = j["blob"].get<std::string>();
  if (!util::is_valid_digest(blob) || !store_.has_blob(blob)) return std::nullopt;
  return j;
}

void Builder::history(State& st, const std::string& created_by, bool empty) {
  json h = with_created({{"created_by", created_by}, {"comment", "rt build"}}, st.created);
  if (empty) h["empty_layer"] = true;
  if (!st.config.contains("history") || !st.config["history"].is_array()) st.config["history"] = json::array();
  st.config["history"].push_back(std::move(h));
}

void Builder::fs_step(Stage& s, const std::string& shown, const std::string& key_extra,
                      const std::function<void()>& act) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string key = next_key(s.state, shown + "\n" + key_extra);
  std::optional<json> hit = s.work ? std::nullopt : cache_get(key);
  if (hit) {
    s.state.created = (*hit)["created"].get<std::string>();
    const bool empty = !hit->contains("blob");
    if (!empty) s.state.layers.push_back({(*hit)["blob"].get<std::string>(), (*hit)["diff_id"].get<std::string>()});
    history(s.state, shown, empty);
    s.state.key = key;
    util::note("--> cached");
    return;
  }
  materialize(s);
  step_xattrs_.clear();
  act();
  auto layer = write_layer(s.root.get(), s.rootfs, s.snap, &s.attrs, &step_xattrs_);
  step_xattrs_.clear();
  s.state.created = now_utc();
  json entry = {{"created", s.state.created}, {"step", shown}};
  if (layer) {
    s.state.layers.push_back(*layer);
    entry["blob"] = layer->blob;
    entry["diff_id"] = layer->diff_id;
  }
  history(s.state, shown, !layer);
  s.state.key = key;
  cache_put(key, entry);
  util::note("--> " + seconds_since(t0) + (layer ? "" : " (no change)"));
}

}  // namespace rt::builder
