// rt build: a Dockerfile's instructions, run without root, into an image
// of the store (host; RUN in a container under root emulation).
//
// Each stage keeps its state as data: the image config (with its
// history), its layers (blobs of the store) and a cache key that chains
// its base, every instruction so far, the build arguments in scope and
// the content of what it copied. A step that changes files (RUN, COPY,
// ADD, WORKDIR) looks its key up in STORE/build-cache; only the first
// step that misses needs a tree: the stage's layers are then unpacked into
// a work directory of the store, and from there each step runs on it and
// its layer is the difference it made (image/tree_diff). Nothing under
// the image's name changes before the final commit, so a killed build
// leaves the store as it was (work directories are debris, blobs and cache
// entries are written whole and renamed into place).
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "app/assemble.hpp"
#include "app/import.hpp"
#include "app/store.hpp"
#include "image/copy_tree.hpp"
#include "image/dockerfile.hpp"
#include "image/layer_stream.hpp"
#include "image/manifest.hpp"
#include "image/sha256.hpp"
#include "image/tree_diff.hpp"
#include "image/unpack.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "rt/image.hpp"
#include "run/hostinfo.hpp"
#include "store/lookup.hpp"
#include "util/fs.hpp"
#include "util/inroot.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

using image::Instruction;
using nlohmann::json;

struct Layer {
  std::string blob;     // digest of the blob in the store
  std::string diff_id;  // digest of the uncompressed tar
};

struct State {
  json config;  // the whole image config; rootfs is filled at the end
  std::vector<Layer> layers;
  std::string key;      // the cache chain so far
  std::string created;  // when the newest layer was made
  std::vector<std::string> shell{"/bin/sh", "-c"};
};

struct Stage {
  int index = 0;
  std::string name;  // AS NAME, lower case; "" when unnamed
  const Instruction* from = nullptr;
  std::vector<const Instruction*> body;
  std::map<std::string, std::optional<std::string>> args;  // declared in the stage
  State state;
  bool needed = false;
  bool cmd_set = false;  // CMD given in this stage (a later ENTRYPOINT keeps it)
  std::string base;      // what FROM named, for rt-image.json
  std::string base_digest;
  // The tree, once a step needed it.
  std::unique_ptr<app::WorkDir> work;
  std::string rootfs;
  util::UniqueFd root;
  image::TreeSnapshot snap;
  image::AttrMap attrs;  // what the tree's disk does not hold (image/file_attrs)
};

std::string now_utc() { return util::utc_time(::time(nullptr)); }

// A history entry with "created" when the time is known (a base without
// one has none: an empty string is not a time, and loaders refuse it).
json with_created(json h, const std::string& created) {
  if (!created.empty()) h["created"] = created;
  return h;
}

std::string seconds_since(std::chrono::steady_clock::time_point t0) {
  char t[32];
  std::snprintf(t, sizeof t, "%.1f s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return t;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

json& cfg_of(State& s) {
  if (!s.config.contains("config") || !s.config["config"].is_object()) s.config["config"] = json::object();
  return s.config["config"];
}

std::string cfg_string(const State& s, const char* key) {
  if (!s.config.contains("config") || !s.config["config"].is_object()) return {};
  const json& c = s.config["config"];
  return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : std::string();
}

std::vector<std::string> cfg_env(const State& s) {
  std::vector<std::string> out;
  if (s.config.contains("config") && s.config["config"].is_object() && s.config["config"].contains("Env") &&
      s.config["config"]["Env"].is_array())
    for (const auto& e : s.config["config"]["Env"])
      if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

// A history entry for each base layer that has none (an image imported
// from a tree), so that its non-empty entries match its layers.
void base_history(State& st, const std::string& base) {
  json& h = st.config["history"];
  if (!h.is_array()) h = json::array();
  size_t with_layer = 0;
  for (const auto& e : h)
    if (!e.is_object() || !e.value("empty_layer", false)) ++with_layer;
  for (; with_layer < st.layers.size(); ++with_layer)
    h.push_back(with_created({{"created_by", "the tree of " + base}, {"comment", "rt build (base)"}}, st.created));
}

// Go durations as Docker writes them (30s, 1m30s, 500ms) in nanoseconds.
int64_t duration_ns(const std::string& v, const std::string& where) {
  int64_t total = 0;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j < v.size() && (std::isdigit(static_cast<unsigned char>(v[j])) || v[j] == '.')) ++j;
    size_t u = j;
    while (u < v.size() && std::isalpha(static_cast<unsigned char>(v[u]))) ++u;
    static const std::map<std::string, double> units = {{"ns", 1},  {"us", 1e3}, {"ms", 1e6},
                                                        {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
    auto unit = units.find(v.substr(j, u - j));
    if (j == i || unit == units.end()) throw Error(where + ": `" + v + "` is not a duration (30s, 1m30s, 500ms)");
    total += static_cast<int64_t>(std::stod(v.substr(i, j - i)) * unit->second);
    i = u;
  }
  return total;
}

// HEALTHCHECK [--interval=D --timeout=D --start-period=D --start-interval=D
// --retries=N] CMD ... | NONE, as Docker's config records it.
json healthcheck(const Instruction& ins, const std::string& where) {
  static const std::map<std::string, std::string> names = {{"interval", "Interval"},
                                                           {"timeout", "Timeout"},
                                                           {"start-period", "StartPeriod"},
                                                           {"start-interval", "StartInterval"},
                                                           {"retries", "Retries"}};
  json h = json::object();
  for (const auto& [f, v] : ins.flags) {
    auto n = names.find(f);
    if (n == names.end()) throw Error(where + ": HEALTHCHECK has no flag --" + f);
    if (f == "retries")
      h[n->second] = std::atoi(v.c_str());
    else
      h[n->second] = duration_ns(v, where + ": --" + f);
  }
  const std::string rest = util::trim(ins.args);
  if (lower(rest) == "none") {
    h["Test"] = {"NONE"};
    return h;
  }
  const size_t sp = rest.find_first_of(" \t");
  if (sp == std::string::npos || lower(rest.substr(0, sp)) != "cmd")
    throw Error(where + ": HEALTHCHECK takes CMD COMMAND or NONE");
  const std::string cmd = util::trim(rest.substr(sp));
  auto j = json::parse(cmd, nullptr, false);
  if (j.is_array() && !j.empty() && std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_string(); })) {
    h["Test"] = json::array({"CMD"});
    for (const auto& e : j) h["Test"].push_back(e);
  } else {
    h["Test"] = {"CMD-SHELL", cmd};
  }
  return h;
}

class Builder {
public:
  explicit Builder(const BuildOptions& o) : o_(o), store_(o.storage) {}
  std::string run();

private:
  void write_output(const image::ImageSource& src);
  // Where the result goes as pull and import deliver an image: the store
  // and the tag, quiet unless -v.
  ImportOptions delivery() const {
    ImportOptions io;
    io.storage = o_.storage;
    io.name = o_.tag;
    io.verbosity = o_.verbosity > 0 ? o_.verbosity : -1;
    return io;
  }
  // set-up
  void read_dockerfile();
  void plan_stages();
  // The stage named `name` (AS NAME, or its index) among those before `before`.
  Stage* earlier_stage(const std::string& name, int before);
  std::optional<std::string> arg_value(const std::string& name, const std::optional<std::string>& dflt);
  image::Lookup lookup_for(const Stage* s);
  // stages and steps
  void build_stage(Stage& s);
  void set_base(Stage& s, const std::string& what);
  void base_from_store(Stage& s, const std::string& name);
  void base_from_file(Stage& s, const std::string& path);
  void step(Stage& s, const Instruction& ins);
  void fs_step(Stage& s, const std::string& shown, const std::string& key_extra, const std::function<void()>& act);
  void note_step(const Stage& s, const std::string& shown);
  void history(State& st, const std::string& created_by, bool empty);
  void materialize(Stage& s);
  std::optional<Layer> write_layer(int root, const std::string& shown, image::TreeSnapshot& before,
                                   image::AttrMap* attrs);
  Layer tree_layer(const std::string& dir, const std::string& what, bool bundle);
  std::optional<json> cached_blob(const std::string& key);
  // instructions
  void do_run(Stage& s, const Instruction& ins);
  void do_copy(Stage& s, const Instruction& ins);
  void do_workdir(Stage& s, const Instruction& ins);
  // What RUN's flags add to its container: --mount (cache, bind, tmpfs,
  // secret) and --network.
  struct RunExtras {
    std::vector<BindSpec> binds;
    std::vector<std::string> tmpfs;
    bool net_none = false;
    std::string key;  // what of them the step's cache key holds (never a secret)
  };
  void read_secrets();
  RunExtras run_extras(Stage& s, const Instruction& ins);
  int run_container(Stage& s, const std::vector<std::string>& argv, const RunExtras* extras = nullptr);
  void relay_output(int out, int err);
  std::deque<std::string> last_lines_;  // of the last RUN's output
  struct RunAs {
    uid_t uid = 0;
    gid_t gid = 0;
    std::string home;  // from the image's /etc/passwd, else / (/root for root)
  };
  RunAs run_as(Stage& s, const std::string& user, const std::string& where);
  // cache
  std::optional<json> cache_get(const std::string& key);
  void cache_put(const std::string& key, const json& entry);
  std::string next_key(const State& st, const std::string& what);
  // the result
  image::ImageSource result(Stage& s);
  std::string where(const Instruction& ins) const { return file_shown_ + ":" + std::to_string(ins.line); }

  BuildOptions o_;
  app::Store store_;
  std::string file_shown_;
  image::Dockerfile df_;
  std::deque<image::Instruction> triggers_;        // ONBUILD triggers of bases, run as the FROM's steps
  std::map<std::string, std::string> given_args_;  // --build-arg
  std::set<std::string> used_args_;
  std::map<std::string, std::optional<std::string>> global_args_;
  std::vector<Stage> stages_;
  std::map<std::string, std::unique_ptr<Stage>> from_images_;  // COPY --from=IMAGE
  std::optional<image::SourceTree> context_;
  std::map<std::string, std::string> secrets_;  // --secret id=ID: the file holding it
  std::unique_ptr<app::WorkDir> secret_dir_;    // secrets given from the environment, as files
  util::UniqueFd cache_dir_;
  int step_no_ = 0, steps_ = 0;
};

void Builder::read_dockerfile() {
  std::string ctx = o_.context.empty() ? "." : o_.context;
  if (!util::is_directory(ctx)) throw Error("build context `" + ctx + "` is not a directory");
  std::string text;
  if (o_.file == "-") {
    file_shown_ = "Dockerfile (stdin)";
    text = util::read_fd(0, "stdin", 1 << 20);
  } else {
    const std::string f = o_.file.empty() ? ctx + "/Dockerfile" : o_.file;
    file_shown_ = f;
    auto t = util::read_file_if_exists(f, 1 << 20);
    if (!t) throw Error("cannot read the Dockerfile `" + f + "`", o_.file.empty() ? "name it with -f FILE" : "");
    text = *t;
  }
  df_ = image::parse_dockerfile(text, file_shown_);
  std::optional<image::DockerIgnore> ignore;
  if (auto t = util::read_regular_if_exists(ctx + "/.dockerignore", 1 << 20)) ignore = image::DockerIgnore::parse(*t);
  context_.emplace(ctx, std::move(ignore));
}

std::optional<std::string> Builder::arg_value(const std::string& name, const std::optional<std::string>& dflt) {
  auto g = given_args_.find(name);
  if (g != given_args_.end()) {
    used_args_.insert(name);
    return g->second;
  }
  return dflt;
}

image::Lookup Builder::lookup_for(const Stage* s) {
  return [this, s](const std::string& name) -> std::optional<std::string> {
    if (s) {
      for (const auto& e : cfg_env(s->state))
        if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
          return e.substr(name.size() + 1);
      auto a = s->args.find(name);
      if (a != s->args.end()) return a->second;
      return std::nullopt;
    }
    auto a = global_args_.find(name);
    return a != global_args_.end() ? a->second : std::nullopt;
  };
}

Stage* Builder::earlier_stage(const std::string& name, int before) {
  for (auto& st : stages_)
    if (st.index < before && (st.name == lower(name) || std::to_string(st.index) == name)) return &st;
  return nullptr;
}

void Builder::plan_stages() {
  const char esc = df_.escape;
  Stage* cur = nullptr;
  for (const auto& ins : df_.instructions) {
    if (ins.keyword == "FROM") {
      Stage s;
      s.index = static_cast<int>(stages_.size());
      s.from = &ins;
      for (const auto& [k, v] : ins.flags)
        if (k != "platform") throw Error(where(ins) + ": FROM has no flag --" + k);
      auto w = image::split_words(ins.args, esc, where(ins));
      if (w.size() == 3 && lower(w[1]) == "as")
        s.name = lower(w[2]);
      else if (w.size() != 1)
        throw Error(where(ins) + ": FROM takes IMAGE [AS NAME]");
      stages_.push_back(std::move(s));
      cur = &stages_.back();
      continue;
    }
    if (!cur) {
      if (ins.keyword != "ARG")
        throw Error(where(ins) + ": only ARG may come before the first FROM, not " + ins.keyword);
      const image::Lookup look = lookup_for(nullptr);
      for (auto& [k, v] : image::key_values(ins.args, image::Pairs::Arg, esc, where(ins), &look))
        global_args_[k] = arg_value(k, v);
      continue;
    }
    cur->body.push_back(&ins);
  }
  // The target and what it needs: stages named by FROM and COPY --from.
  Stage* target = &stages_.back();
  if (!o_.target.empty()) {
    target = nullptr;
    for (auto& s : stages_)
      if (s.name == lower(o_.target)) target = &s;
    if (!target) throw Error("--target: " + file_shown_ + " has no stage `" + o_.target + "`");
  }
  std::function<void(Stage&)> need = [&](Stage& s) {
    if (s.needed) return;
    s.needed = true;
    const image::Lookup look = lookup_for(nullptr);
    auto w = image::split_words(s.from->args, esc, where(*s.from), &look);
    if (Stage* b = earlier_stage(w[0], s.index)) need(*b);
    for (const Instruction* i : s.body)
      for (const auto& [k, v] : i->flags) {
        if (i->keyword == "RUN" && k == "mount")
          for (const auto& part : util::split(v, ','))
            if (part.starts_with("from="))
              if (Stage* b = earlier_stage(part.substr(5), s.index)) need(*b);
        if ((i->keyword == "COPY" || i->keyword == "ADD") && k == "from") {
          if (v.find('$') != std::string::npos)
            throw Error(where(*i) + ": " + i->keyword + " --from=" + v + ": variables are not expanded in --from",
                        "name the stage or image itself (or use ARG in a FROM line and --from that stage)");
          if (Stage* b = earlier_stage(v, s.index)) need(*b);
        }
      }
  };
  need(*target);
  stages_.resize(static_cast<size_t>(target->index) + 1);  // later stages are not built
  for (const auto& s : stages_)
    if (s.needed) steps_ += 1 + static_cast<int>(s.body.size());
}

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

void Builder::history(State& st, const std::string& created_by, bool empty) {
  json h = with_created({{"created_by", created_by}, {"comment", "rt build"}}, st.created);
  if (empty) h["empty_layer"] = true;
  if (!st.config.contains("history") || !st.config["history"].is_array()) st.config["history"] = json::array();
  st.config["history"].push_back(std::move(h));
}

void Builder::note_step(const Stage& s, const std::string& shown) {
  ++step_no_;
  std::string line = "STEP " + std::to_string(step_no_) + "/" + std::to_string(steps_) + ": " + shown;
  if (stages_.size() > 1) line = "[" + (s.name.empty() ? std::to_string(s.index) : s.name) + "] " + line;
  util::note(line);
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
                                          image::AttrMap* attrs) {
  const auto t0 = std::chrono::steady_clock::now();
  app::WorkDir w(store_.tmp_dir(), "blob");
  const std::string file = w.path() + "/layer.tar";
  util::UniqueFd fd = util::open_fd(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
  auto r = image::write_tree_layer(root, shown, before, fd.get(), attrs);
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

// A cache entry that names a blob the store still has.
std::optional<json> Builder::cached_blob(const std::string& key) {
  auto text = util::read_owned_at(cache_dir_.get(), key, 1 << 20);
  json j = text ? json::parse(*text, nullptr, false) : json();
  if (!j.is_object() || !j.contains("blob") || !j["blob"].is_string()) return std::nullopt;
  const std::string blob = j["blob"].get<std::string>();
  if (!util::is_valid_digest(blob) || !store_.has_blob(blob)) return std::nullopt;
  return j;
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
      pull(what, p);
    }
    base_from_store(s, what);
  }
  base_history(s.state, what);
  s.state.key = next_key(s.state, "FROM " + s.base_digest + " " + s.state.config.dump());
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
  act();
  auto layer = write_layer(s.root.get(), s.rootfs, s.snap, &s.attrs);
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

Builder::RunAs Builder::run_as(Stage& s, const std::string& user_given, const std::string& where) {
  const std::string user = user_given.empty() ? "0" : user_given;
  const size_t colon = user.find(':');
  const std::string u = user.substr(0, colon), g = colon == std::string::npos ? "" : user.substr(colon + 1);
  auto number = [](const std::string& t) -> std::optional<unsigned long> {
    if (t.empty() || t.size() > 10 || t.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoul(t);
  };
  auto read = [&](const char* file) -> std::string {
    auto r = util::open_in_root(s.root.get(), file, O_RDONLY | O_NONBLOCK);
    return r.fd ? util::read_regular_fd(r.fd.get(), s.rootfs + file) : std::string();
  };
  // The fields of the line of /etc/passwd or /etc/group named `name`
  // (run::find_id_line finds one by id).
  auto named = [](const std::string& text, const std::string& name) {
    std::vector<std::string> out;
    util::for_each_line(text, [&](std::string_view line) {
      if (line.starts_with(name + ":")) out = util::split(line, ':');
      return out.empty();
    });
    return out;
  };
  auto id_of = [&](const std::vector<std::string>& f, size_t i) -> std::optional<unsigned long> {
    return i < f.size() ? number(f[i]) : std::nullopt;
  };
  RunAs r;
  const std::string passwd = read("/etc/passwd");
  std::vector<std::string> pw;
  if (auto n = number(u)) {
    r.uid = static_cast<uid_t>(*n);
    pw = run::find_id_line(passwd, *n);
  } else {
    pw = named(passwd, u);
    auto id = id_of(pw, 2);
    if (!id) throw Error(where + ": USER `" + u + "` is not in the image's /etc/passwd");
    r.uid = static_cast<uid_t>(*id);
  }
  if (auto pg = id_of(pw, 3)) r.gid = static_cast<gid_t>(*pg);
  r.home = pw.size() > 5 && !pw[5].empty() ? pw[5] : r.uid == 0 ? "/root" : "/";
  if (!g.empty()) {
    if (auto n = number(g))
      r.gid = static_cast<gid_t>(*n);
    else if (auto id = id_of(named(read("/etc/group"), g), 2))
      r.gid = static_cast<gid_t>(*id);
    else
      throw Error(where + ": group `" + g + "` is not in the image's /etc/group");
  }
  return r;
}

// Copies a step's stdout and stderr to rt's as they come, until both end,
// keeping its last lines (both streams, in order) in last_lines_.
void Builder::relay_output(int out, int err) {
  constexpr size_t kKeep = 12, kLine = 300;
  last_lines_.clear();
  std::string partial;
  auto keep = [&](std::string_view data) {
    for (char c : data) {
      if (c == '\n') {
        last_lines_.push_back(partial);
        if (last_lines_.size() > kKeep) last_lines_.pop_front();
        partial.clear();
      } else if (partial.size() < kLine) {
        partial += c;
      }
    }
  };
  pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
  const int to[2] = {1, 2};
  char buf[65536];
  for (int open = 2; open > 0;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw SysError{errno, "poll"};
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        --open;
        continue;
      }
      keep(std::string_view(buf, static_cast<size_t>(n)));
      for (ssize_t done = 0; done < n;) {  // a closed stdout of rt's own loses the rest, not the build
        const ssize_t w = ::write(to[i], buf + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += w;
      }
    }
  }
  if (!partial.empty()) {
    last_lines_.push_back(partial);
    if (last_lines_.size() > kKeep) last_lines_.pop_front();
  }
}

// Runs argv in the stage's tree as RUN does: rt exec --write --seccomp,
// as the stage's USER, in its WORKDIR, with its ENV over the build
// arguments, the image's own /tmp, no home directory. Returns the status.
int Builder::run_container(Stage& s, const std::vector<std::string>& argv, const RunExtras* extras) {
  // exec reads the bundle's config for ENV.
  util::write_file_atomic_at(util::open_fd(s.work->path(), O_PATH | O_DIRECTORY).get(), "image-config.json",
                             s.state.config.dump());
  // Mount points exec needs (else it builds underlays that leave their
  // directory read-only): made for the run, removed after it.
  struct Made {
    std::string path;
    bool dir;
  };
  std::vector<Made> made;
  auto make = [&](const std::string& path, bool dir) {
    if (util::open_in_root(s.root.get(), path, O_PATH, false).fd) return;
    const std::string parent = util::dir_name(path);
    auto p = util::open_in_root(s.root.get(), parent, O_PATH | O_DIRECTORY);
    if (!p.fd) return;
    const std::string name = util::base_name(path);
    int rc =
        dir ? ::mkdirat(p.fd.get(), name.c_str(), 0755)
            : ::close(::openat(p.fd.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (rc == 0) made.push_back({path, dir});
  };
  for (const char* d : {"/dev", "/proc", "/sys", "/tmp", "/etc"}) make(d, true);
  // RUN --mount targets, with the directories above them: made for the
  // run, removed after it when still empty (nothing of them in the layer).
  auto make_all = [&](const std::string& path, bool dir) {
    std::string at;
    const auto parts = util::split(util::normalize_path(path, "/"), '/');
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].empty()) continue;
      at += "/" + parts[i];
      make(at, i + 1 < parts.size() || dir);
    }
  };
  if (extras) {
    for (const auto& b : extras->binds) make_all(b.dst, util::is_directory(b.src));
    for (const auto& t : extras->tmpfs) make_all(t, true);
  }
  for (const char* f : {"/etc/hosts", "/etc/resolv.conf"}) make(f, false);
  if (util::open_in_root(s.root.get(), "/etc/apt/apt.conf.d", O_PATH | O_DIRECTORY).fd)
    make("/etc/apt/apt.conf.d/00rt-root-emulation", false);

  const std::string where_run = "RUN " + util::join(argv, ' ');
  const RunAs as = run_as(s, cfg_string(s.state, "User"), where_run);
  ExecOptions e;
  e.image = s.work->path();
  e.storage = store::store_path(o_.storage);  // resolved here: the step runs with an empty environment
  e.command = argv;
  e.write = true;
  e.image_tmp = true;
  e.no_home = true;
  e.seccomp = true;
  e.skip_sync = true;
  e.only_stdio = true;     // not the store, context or cache descriptors of the build
  e.pid_namespace = true;  // nothing it starts outlives the step (or the build)
  e.uid = as.uid;
  e.gid = as.gid;
  e.cd = cfg_string(s.state, "WorkingDir").empty() ? "/" : cfg_string(s.state, "WorkingDir");
  e.gpu = e.ib = e.join = ExecOptions::Inject::Off;
  e.no_pull = true;
  if (extras) {
    e.binds = extras->binds;
    e.tmpfs = extras->tmpfs;
    e.net_none = extras->net_none;
  }
  e.verbosity = o_.verbosity > 1 ? o_.verbosity - 1 : 0;  // -vv: exec's plan too
  // The environment: the build arguments in scope; the image's ENV comes
  // over them inside (exec's order: host, then image).
  std::vector<std::string> env = {std::string("PATH=") +
                                  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  for (const auto& [k, v] : s.args)
    if (v) env.push_back(k + "=" + *v);
  if (const char* term = std::getenv("TERM")) env.push_back(std::string("TERM=") + term);
  // Inside only: rt's own environment would let an argument steer rt
  // (ARG PMIX_SERVER_TMPDIR=/home/USER binds the home).
  e.base_env = std::move(env);
  // HOME from the image's passwd, as Docker sets it, unless ENV sets it
  // (given again here: exec would set root's /root over the image's).
  const auto image_env = cfg_env(s.state);
  const auto home =
      std::find_if(image_env.begin(), image_env.end(), [](const std::string& kv) { return kv.starts_with("HOME="); });
  e.env_set.push_back(home != image_env.end() ? *home : "HOME=" + as.home);

  std::cout.flush();
  std::cerr.flush();
  // The step's output goes through pipes: shown as it comes, and its last
  // lines kept for the error when it fails.
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw SysError{errno, "pipe"};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw SysError{errno, "pipe"};
  }
  util::UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]), err_r(err_pipe[0]), err_w(err_pipe[1]);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw SysError{errno, "fork"};
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the step dies with the build
    if (::getppid() != parent) ::_exit(125);
    if (::dup2(out_w.get(), 1) < 0 || ::dup2(err_w.get(), 2) < 0) ::_exit(125);
    // rt-image blocks these for its signal thread and ignores SIGPIPE:
    // the step's programs get them as usual.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (::chdir("/") != 0) ::_exit(125);
    ::clearenv();
    try {
      exec(e);
    } catch (const Error& err) {
      print_error(err);
      ::_exit(err.exit_code());
    } catch (...) {
    }
    ::_exit(125);
  }
  out_w.reset();
  err_w.reset();
  relay_output(out_r.get(), err_r.get());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw SysError{errno, "waitpid"};
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    auto p = util::open_in_root(s.root.get(), util::dir_name(it->path), O_PATH | O_DIRECTORY);
    if (!p.fd) continue;
    struct stat st;
    const std::string name = util::base_name(it->path);
    if (::fstatat(p.fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    // Only what is still the empty mount point it was.
    if (it->dir && S_ISDIR(st.st_mode))
      ::unlinkat(p.fd.get(), name.c_str(), AT_REMOVEDIR);  // fails when not empty: then kept
    else if (!it->dir && S_ISREG(st.st_mode) && st.st_size == 0)
      ::unlinkat(p.fd.get(), name.c_str(), 0);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// --secret id=ID,src=FILE | id=ID,env=VAR: what RUN --mount=type=secret
// mounts, read-only, for the step alone.
void Builder::read_secrets() {
  for (const auto& spec : o_.secrets) {
    std::map<std::string, std::string> m;
    for (const auto& part : util::split(spec, ',')) {
      const size_t eq = part.find('=');
      if (eq == std::string::npos) throw Error("--secret " + spec + ": `" + part + "` is not KEY=VALUE");
      m[part.substr(0, eq)] = part.substr(eq + 1);
    }
    const std::string id = m["id"];
    if (id.empty()) throw Error("--secret " + spec + ": it needs id=ID");
    const std::string src = m.count("src") ? m["src"] : m["source"];
    if (!src.empty()) {
      char real[PATH_MAX];
      if (!::realpath(src.c_str(), real) || !util::path_exists(real))
        throw Error("--secret id=" + id + ": `" + src + "` is not there");
      secrets_[id] = real;
    } else {
      const std::string var = m.count("env") ? m["env"] : id;
      const char* v = std::getenv(var.c_str());
      if (!v) throw Error("--secret id=" + id + ": the environment has no " + var);
      if (!secret_dir_) secret_dir_ = std::make_unique<app::WorkDir>(store_.tmp_dir(), "secret");
      const std::string file = secret_dir_->path() + "/" + image::sha256_digest(id).substr(7, 16);
      util::UniqueFd fd = util::open_fd(file, O_WRONLY | O_CREAT | O_EXCL, 0400);
      util::write_all(fd.get(), v, "secret " + id);
      secrets_[id] = file;
    }
  }
}

// RUN --mount=type=cache|bind|tmpfs|secret,... and --network=none|host|default.
Builder::RunExtras Builder::run_extras(Stage& s, const Instruction& ins) {
  RunExtras x;
  json key = json::array();
  for (const auto& [flag, value] : ins.flags) {
    if (flag == "network") {
      if (value == "none")
        x.net_none = true;
      else if (value != "host" && value != "default")
        throw Error(where(ins) + ": RUN --network=" + value + " is not supported", "use none, host or default");
      key.push_back("network=" + value);
      continue;
    }
    if (flag != "mount")
      throw Error(where(ins) + ": RUN --" + flag + " is not supported", "RUN takes --mount and --network");
    std::map<std::string, std::string> m;
    for (const auto& part : util::split(value, ',')) {
      const size_t eq = part.find('=');
      m[part.substr(0, eq)] = eq == std::string::npos ? "true" : part.substr(eq + 1);
    }
    const std::string type = m.count("type") ? m["type"] : "bind";
    std::string target = m.count("target") ? m["target"] : m.count("dst") ? m["dst"] : m["destination"];
    const std::string what = where(ins) + ": RUN --mount=" + value;
    auto truthy = [](const std::string& v) { return v == "true" || v == "1"; };
    if (type != "cache" && type != "bind" && type != "tmpfs" && type != "secret")
      throw Error(what + ": --mount type=" + type + " is not supported",
                  "rt build takes cache, bind, tmpfs and secret");
    if (type == "secret") {
      const std::string id = m["id"].empty() ? util::base_name(target) : m["id"];
      if (id.empty()) throw Error(what + ": a secret needs id=ID");
      if (target.empty()) target = "/run/secrets/" + id;
      auto given = secrets_.find(id);
      if (given == secrets_.end()) {
        if (m.count("required") && truthy(m["required"]))
          throw Error(what + ": no secret `" + id + "` was given", "give it with --secret id=" + id + ",src=FILE");
        continue;  // an optional secret not given: nothing mounted, as Docker does
      }
      x.binds.push_back({given->second, util::normalize_path(target, "/"), true});
      continue;  // a secret's content never reaches the cache key, the layer or the history
    }
    if (target.empty()) throw Error(what + ": it needs target=PATH");
    if (target.front() != '/') {
      const std::string wd = cfg_string(s.state, "WorkingDir");
      target = (wd.empty() ? "/" : wd) + "/" + target;
    }
    target = util::normalize_path(target, "/");
    if (target == "/") throw Error(what + ": the target cannot be /");
    if (type == "tmpfs") {
      x.tmpfs.push_back(target);
      key.push_back("tmpfs:" + target);
    } else if (type == "cache") {
      if (m.count("from") || m.count("source"))
        throw Error(what + ": a cache seeded from=/source= is not supported", "use an empty cache (id= and target=)");
      // One directory per user and cache id (default: the target), kept
      // in the store across builds, never in a layer.
      const std::string id = m.count("id") ? m["id"] : target;
      const std::string rel = std::string(store::kRunCacheDir) + "/" + image::sha256_digest(id).substr(7, 32);
      store_.dir().dir(store::kRunCacheDir, true);
      const std::string dir = store_.dir().sub(rel);
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", dir};
      x.binds.push_back({dir, target, m.count("readonly") || m.count("ro")});
      key.push_back("cache:" + id + ":" + target);
    } else {  // bind
      if (m.count("rw") || m.count("readwrite"))
        throw Error(what + ": read-write bind mounts are not supported", "bind it read-only and copy what you change");
      const std::string source = m.count("source") ? m["source"] : m.count("src") ? m["src"] : ".";
      const std::string rel = util::normalize_path("/" + source, "/").substr(1);  // never above the root
      std::string host, digest;
      if (m.count("from")) {
        Stage* from = earlier_stage(m["from"], s.index);
        if (!from) throw Error(what + ": from= names no earlier stage", "name a stage of this Dockerfile");
        materialize(*from);
        host = from->rootfs + (rel.empty() ? "" : "/" + rel);
        digest = from->state.key;
      } else {
        host = context_->path() + (rel.empty() ? "" : "/" + rel);
        digest = context_->digest(context_->match(rel.empty() ? "." : rel, what));
      }
      // Its symlinks may not lead out of where it lies.
      char real[PATH_MAX], top[PATH_MAX];
      const std::string root = m.count("from") ? host.substr(0, host.size() - rel.size()) : context_->path();
      if (!::realpath(host.c_str(), real) || !::realpath(root.c_str(), top))
        throw Error(what + ": `" + source + "` is not there");
      if (std::string(real) != top && !std::string(real).starts_with(std::string(top) + "/"))
        throw Error(what + ": `" + source + "` leads out of where it lies");
      x.binds.push_back({real, target, true});
      key.push_back("bind:" + target + ":" + digest);
    }
  }
  x.key = key.dump();
  return x;
}

void Builder::do_run(Stage& s, const Instruction& ins) {
  std::vector<std::string> argv;
  if (ins.exec_form) {
    argv = ins.argv;
  } else if (!ins.heredocs.empty()) {
    // RUN <<EOF: the body is the script. RUN CMD <<EOF: the line and its
    // heredocs as the shell reads them (quoting and <<- included).
    const auto& first = ins.heredocs.front();
    std::string marker = util::trim(ins.args);
    for (const char* q : {"\"", "'"}) marker.erase(std::remove(marker.begin(), marker.end(), q[0]), marker.end());
    const bool alone = ins.heredocs.size() == 1 && (marker == "<<" + first.word || marker == "<<-" + first.word);
    if (alone && first.body.starts_with("#!"))
      throw Error(where(ins) + ": a RUN heredoc that starts with #! is not supported",
                  "name the interpreter on the RUN line: RUN python3 <<" + first.word);
    std::string script = alone ? first.body : ins.args + "\n";
    if (!alone)
      for (const auto& d : ins.heredocs) script += d.body + d.word + "\n";
    argv = s.state.shell;
    argv.push_back(script);
  } else {
    argv = s.state.shell;
    argv.push_back(ins.args);
  }
  if (argv.empty()) throw Error(where(ins) + ": RUN has an empty command");
  std::string shown = ins.exec_form ? "RUN " + json(ins.argv).dump() : "RUN " + ins.args;
  for (auto it = ins.flags.rbegin(); it != ins.flags.rend(); ++it)
    shown = "RUN --" + it->first + "=" + it->second + shown.substr(3);
  note_step(s, shown);
  const RunExtras extras = run_extras(s, ins);
  json args = json::object();
  for (const auto& [k, v] : s.args)
    if (v) args[k] = *v;
  fs_step(s, shown, args.dump() + "\n" + json(argv).dump() + (ins.flags.empty() ? "" : "\n" + extras.key), [&] {
    int status = run_container(s, argv, &extras);
    if (status != 0) {
      std::string tail;
      for (const auto& l : last_lines_) tail += "\n  | " + l;
      throw Error(where(ins) + ": `" + shown + "` failed with status " + std::to_string(status) +
                      (tail.empty() ? " (it printed nothing)" : "; its last lines:" + tail),
                  "the steps before it are cached", 1);
    }
  });
}

void Builder::do_copy(Stage& s, const Instruction& ins) {
  const bool add = ins.keyword == "ADD";
  std::string from, checksum;
  bool parents = false;
  image::CopyOptions copt;
  for (const auto& [k, v] : ins.flags) {
    if (k == "from" && !add) {
      from = v;
    } else if (k == "chown") {
      util::info(where(ins) + ": --chown=" + v + " is recorded as a no-op (root emulation: one owner)");
    } else if (k == "chmod") {
      if (v.empty() || v.size() > 4 || v.find_first_not_of("01234567") != std::string::npos)
        throw Error(where(ins) + ": --chmod takes an octal mode, not `" + v + "`");
      copt.chmod = static_cast<unsigned>(std::stoul(v, nullptr, 8));
    } else if (k == "link") {  // the same tree either way: the layer is its own already
    } else if (k == "parents" && !add) {
      parents = v.empty() || v == "true";
    } else if (k == "checksum" && add) {
      checksum = v;
    } else {
      throw Error(where(ins) + ": " + ins.keyword + " --" + k + " is not supported");
    }
  }
  const image::Lookup look = lookup_for(&s);
  std::vector<std::string> words;
  if (ins.exec_form)
    for (const auto& w : ins.argv) words.push_back(image::substitute(w, look, df_.escape, where(ins)));
  else
    words = image::split_words(ins.args, df_.escape, where(ins), &look);
  if (words.size() < 2) throw Error(where(ins) + ": " + ins.keyword + " needs SOURCE... DEST");
  std::string dest = words.back();
  const std::string dest_given = dest;
  words.pop_back();
  // COPY <<NAME DEST: files of the heredocs' bodies, as they are written
  // (no expansion), mode 0644, from a scratch directory of their own.
  std::optional<app::WorkDir> inline_dir;
  std::optional<image::SourceTree> inline_src;
  if (!ins.heredocs.empty()) {
    inline_dir.emplace(store_.tmp_dir(), "heredoc");
    for (auto& w : words) {
      if (!w.starts_with("<<"))
        throw Error(where(ins) + ": " + ins.keyword + " of heredocs and other sources at once is not supported",
                    "give the heredocs a " + ins.keyword + " of their own");
      std::string name = w.substr(w.starts_with("<<-") ? 3 : 2);
      auto d = std::find_if(ins.heredocs.begin(), ins.heredocs.end(),
                            [&](const image::Heredoc& h) { return h.word == name; });
      if (d == ins.heredocs.end() || name.find('/') != std::string::npos || name == "." || name == "..")
        throw Error(where(ins) + ": `" + w + "` is not a heredoc of this line");
      const std::string file = inline_dir->path() + "/" + name;
      util::UniqueFd fd = util::open_fd(file, O_WRONLY | O_CREAT | O_EXCL, 0644);
      util::write_all(fd.get(), d->body, file);
      w = name;
    }
    inline_src.emplace(inline_dir->path());
  }
  for (const auto& w : words)
    if (w.find("://") != std::string::npos)
      throw Error(where(ins) + ": " + ins.keyword + " of a URL (`" + w + "`) is not supported",
                  "download it with RUN curl or wget, or put it in the build context");
  const std::string workdir = cfg_string(s.state, "WorkingDir");
  const bool dest_dir_syntax = dest.ends_with("/") || dest == "." || dest.ends_with("/.");
  if (dest.empty() || dest.front() != '/') dest = (workdir.empty() ? "/" : workdir) + "/" + dest;
  dest = util::normalize_path(dest, "/");

  // Where the sources come from: the context, or a stage's tree.
  const image::SourceTree* src = inline_src ? &*inline_src : &*context_;
  std::optional<image::SourceTree> stage_src;
  Stage* from_stage = nullptr;
  std::string src_key = "context";
  if (!from.empty() && inline_src) throw Error(where(ins) + ": --from with heredocs is not supported");
  if (!from.empty()) {
    Stage* b = earlier_stage(from, s.index);
    if (!b) {
      // An image, as FROM would take it: a stage of its own, unnamed.
      auto& img = from_images_[from];
      if (!img) {
        img = std::make_unique<Stage>();
        img->index = -1;
        set_base(*img, from);
      }
      b = img.get();
    }
    // Its key says what its tree holds: the tree is made only on a miss.
    from_stage = b;
    src_key = "stage " + b->state.key;
  }
  std::vector<std::string> rels;
  auto match = [&] {
    rels.clear();
    for (const auto& w : words)
      for (auto& r : src->match(w, where(ins))) rels.push_back(std::move(r));
  };
  if (!from_stage) match();
  const std::string shown_step =
      ins.keyword + (from.empty() ? "" : " --from=" + from) + " " + util::join(words, ' ') + " " + dest_given;
  note_step(s, shown_step);
  if (!checksum.empty()) {
    // ADD --checksum: the one file it names must hash to it.
    if (rels.size() != 1 || src->is_dir(rels[0])) throw Error(where(ins) + ": ADD --checksum takes one file");
    auto f = util::open_in_root(src->fd(), rels[0], O_RDONLY);
    if (!f.fd) throw SysError(f.err, "open", src->path() + "/" + rels[0], "");
    image::Sha256 h;
    std::vector<char> buf(1 << 20);
    for (size_t n; (n = util::read_some(f.fd.get(), buf.data(), buf.size(), rels[0])) > 0;) h.update(buf.data(), n);
    const std::string got = h.digest();
    if (got != checksum)
      throw Error(where(ins) + ": `" + rels[0] + "` hashes to " + got + ", not the --checksum " + checksum);
  }
  const std::string content = from_stage ? src_key : src->digest(rels);
  json extra = {from_stage ? json(words) : json(rels), content, copt.chmod ? static_cast<int>(*copt.chmod) : -1,
                dest_dir_syntax, parents};
  fs_step(s, shown_step, extra.dump(), [&] {
    if (from_stage) {
      materialize(*from_stage);
      stage_src.emplace(from_stage->rootfs);
      src = &*stage_src;
      match();
    }
    const bool into_dir = dest_dir_syntax || rels.size() > 1 || image::dir_in_tree(s.root.get(), dest);
    if (rels.size() > 1 && !dest_dir_syntax && !image::dir_in_tree(s.root.get(), dest))
      throw Error(where(ins) + ": with more than one source the destination must end with /");
    for (const auto& r : rels) {
      // ADD unpacks a local tar archive (plain, gzip or zstd) into DEST.
      if (add && !src->is_dir(r)) {
        app::WorkDir scratch(store_.tmp_dir(), "build");
        if (image::add_archive(*src, r, s.root.get(), dest, scratch.path(), copt, where(ins))) continue;
      }
      // --parents: the source's own directories come along below DEST.
      const std::string parent = util::dir_name("/" + r);
      if (parents && parent != "/") {
        image::copy_into(*src, r, s.root.get(), util::normalize_path(dest + parent, "/"), true, copt, where(ins));
        continue;
      }
      image::copy_into(*src, r, s.root.get(), dest, into_dir, copt, where(ins));
    }
  });
}

void Builder::do_workdir(Stage& s, const Instruction& ins) {
  const image::Lookup look = lookup_for(&s);
  std::string dir = image::substitute(util::trim(ins.args), look, df_.escape, where(ins));
  const std::string cur = cfg_string(s.state, "WorkingDir");
  dir = util::normalize_path(dir, cur.empty() ? "/" : cur);
  cfg_of(s.state)["WorkingDir"] = dir;
  const std::string shown = "WORKDIR " + dir;
  note_step(s, shown);
  fs_step(s, shown, "", [&] {
    std::string prefix;
    for (const auto& c : util::split(dir, '/')) {
      if (c.empty()) continue;
      const std::string parent = prefix.empty() ? "/" : prefix;
      prefix += "/" + c;
      if (image::dir_in_tree(s.root.get(), prefix)) continue;
      auto p = util::open_in_root(s.root.get(), parent, O_PATH | O_DIRECTORY);
      if (!p.fd || ::mkdirat(p.fd.get(), c.c_str(), 0755) != 0)
        throw SysError{p.fd ? errno : p.err, "mkdir", where(ins) + ": " + prefix};
    }
  });
}

void Builder::step(Stage& s, const Instruction& ins) {
  const std::string& k = ins.keyword;
  const char esc = df_.escape;
  const image::Lookup look = lookup_for(&s);
  if (k == "RUN") return do_run(s, ins);
  if (k == "COPY" || k == "ADD") return do_copy(s, ins);
  if (k == "WORKDIR") return do_workdir(s, ins);
  if (!ins.flags.empty() && k != "HEALTHCHECK")
    throw Error(where(ins) + ": " + k + " --" + ins.flags.front().first + " is not supported");
  json& c = cfg_of(s.state);
  std::string shown = k + " " + ins.args;
  if (k == "HEALTHCHECK") {
    shown = k;
    for (const auto& [f, v] : ins.flags) shown += " --" + f + "=" + v;
    shown += " " + ins.args;
  }
  if (k == "ENV") {
    auto env = cfg_env(s.state);
    for (auto& [name, v] : image::key_values(ins.args, image::Pairs::Env, esc, where(ins), &look)) {
      const std::string prefix = name + "=";
      // A variable set again keeps its place in the list, as Docker keeps it.
      auto at = std::find_if(env.begin(), env.end(), [&prefix](const std::string& e) { return e.starts_with(prefix); });
      if (at != env.end())
        *at = prefix + v.value_or("");
      else
        env.push_back(prefix + v.value_or(""));
    }
    c["Env"] = env;
  } else if (k == "ARG") {
    for (auto& [name, v] : image::key_values(ins.args, image::Pairs::Arg, esc, where(ins), &look)) {
      std::optional<std::string> dflt = v;
      if (!dflt) {
        auto g = global_args_.find(name);
        if (g != global_args_.end()) dflt = g->second;
      }
      s.args[name] = arg_value(name, dflt);
    }
  } else if (k == "LABEL") {
    if (!c.contains("Labels") || !c["Labels"].is_object()) c["Labels"] = json::object();
    for (auto& [name, v] : image::key_values(ins.args, image::Pairs::Label, esc, where(ins), &look))
      c["Labels"][name] = v.value_or("");
  } else if (k == "USER") {
    c["User"] = image::substitute(util::trim(ins.args), look, esc, where(ins));
  } else if (k == "CMD" || k == "ENTRYPOINT") {
    std::vector<std::string> v;
    if (ins.exec_form) {
      v = ins.argv;
    } else if (!util::trim(ins.args).empty()) {
      v = s.state.shell;
      v.push_back(ins.args);
    }
    const char* key = k == "CMD" ? "Cmd" : "Entrypoint";
    if (v.empty())
      c.erase(key);
    else
      c[key] = v;
    // A new ENTRYPOINT drops the CMD the base image had, not one this stage set.
    if (k == "CMD") s.cmd_set = true;
    if (k == "ENTRYPOINT" && !s.cmd_set) c.erase("Cmd");
    shown = k + " " + json(v).dump();
  } else if (k == "SHELL") {
    s.state.shell = ins.argv;
    if (s.state.shell.empty()) throw Error(where(ins) + ": SHELL needs a program");
    c["Shell"] = ins.argv;  // as Docker records it: later builds FROM this image use it
  } else if (k == "ONBUILD") {
    if (!c.contains("OnBuild") || !c["OnBuild"].is_array()) c["OnBuild"] = json::array();
    c["OnBuild"].push_back(util::trim(ins.args));
  } else if (k == "STOPSIGNAL") {
    c["StopSignal"] = image::substitute(util::trim(ins.args), look, esc, where(ins));
  } else if (k == "EXPOSE") {
    if (!c.contains("ExposedPorts") || !c["ExposedPorts"].is_object()) c["ExposedPorts"] = json::object();
    for (auto p : image::split_words(ins.args, esc, where(ins), &look)) {
      if (p.find('/') == std::string::npos) p += "/tcp";
      c["ExposedPorts"][p] = json::object();
    }
  } else if (k == "VOLUME") {
    if (!c.contains("Volumes") || !c["Volumes"].is_object()) c["Volumes"] = json::object();
    std::vector<std::string> v = ins.exec_form ? ins.argv : image::split_words(ins.args, esc, where(ins), &look);
    for (const auto& p : v) c["Volumes"][p] = json::object();
  } else if (k == "HEALTHCHECK") {
    c["Healthcheck"] = healthcheck(ins, where(ins));
  } else if (k == "MAINTAINER") {
    s.state.config["author"] = util::trim(ins.args);
  } else {
    throw Error(where(ins) + ": " + k + " is not supported");
  }
  note_step(s, shown);
  history(s.state, shown, true);
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

image::ImageSource Builder::result(Stage& s) {
  json cfg = s.state.config;
  std::vector<std::string> diff_ids;
  for (const auto& l : s.state.layers) diff_ids.push_back(l.diff_id);
  cfg["rootfs"] = {{"type", "layers"}, {"diff_ids", diff_ids}};
  if (!s.state.created.empty()) cfg["created"] = s.state.created;  // a time or nothing: "" is no RFC 3339 time
  for (const char* k : {"container", "container_config", "docker_version"}) cfg.erase(k);
  image::ImageSource src;
  src.name = o_.tag;
  src.ref = "build:" + (o_.file == "-" ? std::string("-") : file_shown_);
  src.config_text = cfg.dump();
  src.config_digest = image::sha256_digest(src.config_text);
  src.base_name = s.base;  // for rt inspect and later pushes
  src.base_digest = s.base_digest;
  for (const auto& l : s.state.layers) {
    const std::string path = store_.blob_path(l.blob);
    src.layers.push_back({l.diff_id, l.blob, -1, l.diff_id, [path] { return app::file_reader(path); }});
  }
  return src;
}

// -o: a SquashFS file straight from the layers; any other form rt convert
// writes from the stored image, replacing what is there.
void Builder::write_output(const image::ImageSource& src) {
  const std::string& out = o_.output;
  if (out.ends_with(".sqfs") || out.ends_with(".squashfs") || out.ends_with(".sqsh")) {
    ImportOptions io = delivery();
    io.squash = out;
    app::deliver(store_, src, io, false);
    util::note("wrote `" + out + "`");
    return;
  }
  ConvertOptions co;
  static_cast<StoreOptions&>(co) = o_;
  co.force = true;
  rt::convert(o_.tag, out, co);
}

std::string Builder::run() {
  if (o_.tag.empty()) throw Error("rt build needs -t NAME: the name to store the image under");
  store::escape_name(o_.tag);  // refuses names that cannot be stored
  // Every user can read /proc/PID/cmdline for as long as the build runs:
  // the values of --build-arg K=V leave it at once (K alone takes V from
  // the environment, which only the user can read).
  if (std::any_of(o_.build_args.begin(), o_.build_args.end(),
                  [](const std::string& a) { return a.find('=') != std::string::npos; }))
    util::set_process_title("rt build -t " + o_.tag + " (build arguments hidden)");
  for (const auto& a : o_.build_args) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos) {
      if (const char* v = std::getenv(a.c_str())) given_args_[a] = v;
    } else {
      given_args_[a.substr(0, eq)] = a.substr(eq + 1);
    }
  }
  read_dockerfile();
  for (const auto& [name, value] : df_.directives)
    if (name == "syntax" || name == "check")
      util::note(file_shown_ + ": `# " + name + "=" + value +
                 "` read and ignored: rt build reads the Dockerfile itself");
  read_secrets();
  cache_dir_ = store_.dir().dir(store::kBuildCacheDir, true);
  plan_stages();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& s : stages_)
    if (s.needed) build_stage(s);
  for (const auto& [k, v] : given_args_)
    if (!used_args_.count(k)) util::warn("--build-arg " + k + " is not used by " + file_shown_);

  Stage& target = stages_.back();
  image::ImageSource src = result(target);
  const std::string format = store_format(o_.format);
  auto lock = store_.lock_name(o_.tag);
  auto info = store_.info(o_.tag);
  const bool same = info && info->config_digest == src.config_digest && info->squashfs == (format == "sqfs");
  if (same) {
    util::note("image `" + o_.tag + "` is unchanged");
  } else if (target.work && format == "dir") {
    // The tree is the image: it becomes the bundle.
    uint64_t size = 0;
    for (const auto& [rel, st] : target.snap.entries)
      if (S_ISREG(st.mode)) size += st.size;
    app::write_image_files(target.work->path(), src, size);
    // A store image holds no set-id bit on disk: kept beside its tree.
    std::vector<std::string> setid;
    for (const auto& [rel, st] : target.snap.entries)
      if (st.mode & (S_ISUID | S_ISGID)) setid.push_back(rel);
    image::setid_from_disk(target.root.get(), target.rootfs, setid, target.attrs);
    image::write_attrs(target.work->path(), target.attrs);
    store_.commit_image(o_.tag, *target.work);
    target.work.reset();
  } else {
    ImportOptions io = delivery();
    io.format = format;
    app::deliver(store_, src, io, false);
  }
  if (!o_.output.empty()) write_output(src);
  if (!o_.push.empty()) {
    PushOptions po;
    static_cast<StoreOptions&>(po) = o_;
    rt::push(o_.tag, o_.push, po);
  }
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) == 0)
    util::info("peak resident memory of rt build itself: " + std::to_string(ru.ru_maxrss) + " kB");
  util::note("built `" + o_.tag + "` (" + src.config_digest.substr(0, 19) + ", " +
             std::to_string(target.state.layers.size()) + " layers) in " + seconds_since(t0));
  return o_.tag;
}

}  // namespace

std::string build(const BuildOptions& options) {
  util::log_init(options.verbosity);
  return Builder(options).run();
}

}  // namespace rt
