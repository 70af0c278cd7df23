// rt build: stages: their bases (an image, a file, a directory), their trees, their layers (host).
#include "builder/builder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace rt::builder {

// `what`: FROM's image (or COPY --from's when it names no stage).
void Builder::set_base(Stage& s, const std::string& what) {
  s.base = what;
  for (auto& b : stages_)
    if (b.index < s.index && (b.name == lower(what) || std::to_string(b.index) == what)) {
      s.state = b.state;
      s.state.key = next_key(b.state, "FROM stage");
      s.base_digest = b.base_digest;
      return;
    }
  if (what == "scratch") {
    s.state.config = image::parse_json(app::default_config(), "config");  // PATH set, as Docker's builder does
    s.state.key = next_key(s.state, "FROM scratch");
    s.state.created = util::utc_time(0);
    return;
  }
  // A host path only when asked for: a Dockerfile may not make the
  // builder's files (FROM /home/USER/.ssh, COPY --from=../x) a layer.
  const store::NameKind kind = store::name_kind(what);
  const bool as_path =
      kind == store::NameKind::Path ||
      (kind == store::NameKind::Either && !store::find_image(store_.dir(), what) && util::path_exists(what));
  if (as_path && !o_.host_paths)
    throw Error("`" + what +
                    "` is a path on the host: FROM and COPY --from take stages, stored images and registry "
                    "references",
                "give --from-host to build from files of this machine");
  if (as_path && !util::path_exists(what)) {
    throw Error("`" + what + "`: no such file or directory");
  } else if (as_path && !util::is_directory(what)) {
    base_from_file(s, what);
  } else if (as_path) {
    // A directory (root filesystem or bundle) rt can run: its tree as one
    // layer, made again each time (a directory has no version to key on).
    const bool bundle = util::is_directory(what + "/rootfs");
    auto cfg = bundle ? util::read_regular_if_exists(what + "/image-config.json") : std::nullopt;
    s.state.config = image::parse_json(cfg ? *cfg : app::default_config(), "`" + what + "` config");
    s.state.config.erase("history");  // its layers are one now
    Layer l = tree_layer(bundle ? what + "/rootfs" : what, what, bundle);
    s.state.layers.push_back(l);
    s.base_digest = l.diff_id;
    struct stat st;
    s.state.created = util::utc_time(::stat(what.c_str(), &st) == 0 ? st.st_mtime : 0);
  } else {
    if (!store::find_image(store_.dir(), what)) {
      util::note("pulling `" + what + "`");
      PullOptions p;
      p.storage = o_.storage;
      p.verbosity = o_.verbosity;
      p.policy = o_.policy;
      pull(what, p);
    }
    base_from_store(s, what);
  }
  base_history(s.state, what);
  s.state.key = next_key(s.state, "FROM " + s.base_digest + " " + s.state.config.dump());
}

void Builder::base_from_store(Stage& s, const std::string& name) {
  auto dir = store::find_image(store_.dir(), name);
  if (!dir) throw Error("no image `" + name + "` in the store");
  auto cfg = util::read_regular_if_exists(*dir + "/image-config.json");
  auto meta_text = util::read_regular_if_exists(*dir + "/" + store::kMetaFile);
  if (!cfg || !meta_text) throw Error("image `" + name + "` in the store is incomplete: `" + *dir + "`");
  s.state.config = image::parse_json(*cfg, "image `" + name + "` config");
  json meta = json::parse(*meta_text, nullptr, false);
  s.base_digest = meta.is_object() ? meta.value("config_digest", "") : "";
  std::vector<std::string> diff_ids;
  try {
    diff_ids = image::parse_diff_ids(s.state.config, name);
  } catch (const Error&) {
  }
  std::vector<std::string> blobs;
  if (meta.is_object() && meta.contains("layers") && meta["layers"].is_array())
    for (const auto& l : meta["layers"])
      if (l.is_string()) blobs.push_back(l.get<std::string>());
  bool have_blobs = blobs.size() == diff_ids.size() && !blobs.empty();
  for (const auto& b : blobs) have_blobs = have_blobs && util::is_valid_digest(b) && store_.has_blob(b);
  if (have_blobs) {
    for (size_t i = 0; i < blobs.size(); ++i) s.state.layers.push_back({blobs[i], diff_ids[i]});
  } else if (util::is_directory(*dir + "/rootfs")) {
    // Imported from a tree or archive without its blobs: its tree as one
    // layer, made once per stored version of the image.
    const std::string key =
        image::sha256_digest("base-tree 2\n" + *dir + "\n" + s.base_digest + "\n" + meta.value("created", ""))
            .substr(7);
    if (auto j = cached_blob(key)) {
      s.state.layers.push_back({(*j)["blob"].get<std::string>(), (*j)["blob"].get<std::string>()});
    } else {
      util::note("taking image `" + name + "` as one layer");
      Layer l = tree_layer(*dir + "/rootfs", "image `" + name + "`", true);
      cache_put(key, {{"blob", l.blob}, {"created", now_utc()}});
      s.state.layers.push_back(l);
    }
  } else {
    // Kept as one SquashFS file without its blobs: as a file is taken.
    return base_from_file(s, *dir + "/" + store::kSquashFile);
  }
  s.state.created = s.state.config.value("created", "");
}

// A SquashFS or SIF file (or an archive rt imports) as a base: its tree as
// one layer and its config, made once per version of the file (path,
// device, inode, size, modification time).
void Builder::base_from_file(Stage& s, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw SysError{errno, "stat", path};
  const std::string real = util::normalize_path(path, util::current_dir());
  const std::string key = image::sha256_digest("base-file 2\n" + real + "\n" + util::file_stamp(st)).substr(7);
  json j = cached_blob(key).value_or(json());
  if (!j.contains("config") || !j["config"].is_string()) {
    util::note("taking `" + path + "` as one layer");
    app::WorkDir w(store_.tmp_dir(), "build");
    ConvertOptions co;
    co.storage = o_.storage;
    co.verbosity = -1;
    co.to = "dir";
    convert(real, w.path() + "/bundle", co);
    util::log_init(o_.verbosity);  // convert set its own
    const Layer l = tree_layer(w.path() + "/bundle/rootfs", path, true);
    auto cfg = util::read_regular_if_exists(w.path() + "/bundle/image-config.json");
    j = {{"blob", l.blob}, {"config", cfg ? *cfg : app::default_config()}, {"created", now_utc()}};
    cache_put(key, j);
  }
  s.state.config = image::parse_json(j["config"].get<std::string>(), "`" + path + "` config");
  s.state.config.erase("history");  // its layers are one now
  s.state.layers.push_back({j["blob"].get<std::string>(), j["blob"].get<std::string>()});
  s.base_digest = j["blob"].get<std::string>();
  s.state.created = util::utc_time(st.st_mtime);
}

void Builder::materialize(Stage& s) {
  if (s.work) return;
  const auto t0 = std::chrono::steady_clock::now();
  s.work = std::make_unique<app::WorkDir>(store_.tmp_dir(), "build");
  s.rootfs = s.work->path() + "/rootfs";
  if (::mkdir(s.rootfs.c_str(), 0755) != 0) throw SysError{errno, "mkdir", s.rootfs};
  image::TreeWriter writer(s.rootfs, "build stage " + std::to_string(s.index));
  for (const auto& l : s.state.layers) {
    image::LayerStream stream(app::file_reader(store_.blob_path(l.blob)), l.blob);
    writer.apply_layer([&](void* buf, size_t size) { return stream.read(buf, size); }, l.blob);
  }
  writer.finish();
  s.attrs = writer.attrs();
  s.root = util::open_fd(s.rootfs, O_PATH | O_DIRECTORY);
  image::setid_to_disk(s.root.get(), s.rootfs, s.attrs);
  s.snap = image::TreeSnapshot::take(s.root.get(), s.rootfs);
  util::info("unpacked " + std::to_string(s.state.layers.size()) + " layers (" + std::to_string(s.snap.entries.size()) +
             " entries) in " + seconds_since(t0));
}

// The layer of what changed in the tree at `root` since `before` (all of
// it when `before` is empty), as a blob of the store; nullopt when nothing
// changed. The blob is an uncompressed tar: its digest is its diff_id.
std::optional<Layer> Builder::write_layer(int root, const std::string& shown, image::TreeSnapshot& before,
                                          image::AttrMap* attrs, const image::AttrMap* given) {
  const auto t0 = std::chrono::steady_clock::now();
  app::WorkDir w(store_.tmp_dir(), "blob");
  const std::string file = w.path() + "/layer.tar";
  util::UniqueFd fd = util::open_fd(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
  auto r = image::write_tree_layer(root, shown, before, fd.get(), attrs, given);
  util::info("layer of " + std::to_string(r.changes) + " changes, " + util::human_bytes(r.bytes) + " in " +
             seconds_since(t0));
  if (r.changes == 0) return std::nullopt;
  if (!store_.has_blob(r.diff_id)) store_.commit_blob(r.diff_id, file);
  return Layer{r.diff_id, r.diff_id};
}

// A whole tree as one layer (a base image kept as a tree, or a directory);
// a bundle's rootfs/ with the set-id bits and attributes the bundle keeps.
Layer Builder::tree_layer(const std::string& dir, const std::string& what, bool bundle) {
  util::UniqueFd root = util::open_fd(dir, O_PATH | O_DIRECTORY);
  image::TreeSnapshot none;
  image::AttrMap attrs = bundle ? image::read_attrs(dir + "/..") : image::AttrMap{};
  auto l = write_layer(root.get(), what, none, &attrs);
  if (!l) throw Error("`" + what + "` is empty: nothing to build on");
  return *l;
}

void Builder::build_stage(Stage& s) {
  const image::Lookup look = lookup_for(nullptr);
  const auto words = image::split_words(s.from->args, df_.escape, where(*s.from), &look);
  note_step(s, "FROM " + util::join(words, ' '));
  set_base(s, words.at(0));
  // The base's ONBUILD triggers run first, as steps of this FROM; the new
  // image does not inherit them.
  json& c = cfg_of(s.state);
  if (c.contains("Shell") && c["Shell"].is_array() && !c["Shell"].empty() &&
      std::all_of(c["Shell"].begin(), c["Shell"].end(), [](const json& w) { return w.is_string(); }))
    s.state.shell = c["Shell"].get<std::vector<std::string>>();  // the base's SHELL
  if (c.contains("OnBuild") && c["OnBuild"].is_array() && !c["OnBuild"].empty()) {
    const json on_build = c["OnBuild"];
    c.erase("OnBuild");
    for (const auto& t : on_build) {
      if (!t.is_string()) continue;
      triggers_.push_back(image::parse_instruction(t.get<std::string>(), where(*s.from), df_.escape));
      triggers_.back().line = s.from->line;
      step(s, triggers_.back());
    }
  }
  for (const Instruction* ins : s.body) step(s, *ins);
}

}  // namespace rt::builder
