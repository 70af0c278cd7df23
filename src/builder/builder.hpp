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
//
// Its parts, in the files of this folder:
//   builder.cpp    the steps of a stage in order, the result, rt::build
//   dockerfile.cpp the Dockerfile read, ARG values, stages planned
//   definition.cpp an Apptainer definition file's stages and sections
//   stages.cpp     bases (an image, a file, a directory), trees, layers
//   cache.cpp      step keys and cache entries
//   run_step.cpp   RUN
//   context.cpp    COPY, ADD, WORKDIR
//   config.cpp     the image config's fields and history
#pragma once
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "app/assemble.hpp"
#include "app/import.hpp"
#include "app/store.hpp"
#include "image/copy_tree.hpp"
#include "image/definition.hpp"
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

namespace rt::builder {

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
  const image::DefStage* def = nullptr;  // a definition file's stage (then no from and body)
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

// Image config helpers (config.cpp).
std::string now_utc();
// A history entry with "created" when the time is known (a base without
// one has none: an empty string is not a time, and loaders refuse it).
json with_created(json h, const std::string& created);
std::string seconds_since(std::chrono::steady_clock::time_point t0);
std::string lower(std::string s);
json& cfg_of(State& s);
std::string cfg_string(const State& s, const char* key);
std::vector<std::string> cfg_env(const State& s);
// A history entry for each base layer that has none (an image imported
// from a tree), so that its non-empty entries match its layers.
void base_history(State& st, const std::string& base);
// HEALTHCHECK [--interval=D --timeout=D --start-period=D --start-interval=D
// --retries=N] CMD ... | NONE, as Docker's config records it.
json healthcheck(const Instruction& ins, const std::string& where);

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
  // definition files (definition.cpp): read_definition is false for a Dockerfile.
  bool read_definition(const std::string& text);
  void plan_def_stages();
  void build_def_stage(Stage& s);
  void def_setup(Stage& s, const image::DefSection& sec);
  // %files (DEST below `dest_base`: an app's root for %appfiles).
  void def_files(Stage& s, const image::DefSection& sec, const std::string& dest_base = "/");
  // %post, or an app's %appinstall (run in its root, SCIF_* set).
  void def_post(Stage& s, const image::DefSection& sec, const std::string& app = "");
  void def_meta(Stage& s);
  void def_test(Stage& s);
  // The stage --target names, else the last.
  Stage* target_stage();
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
                                   image::AttrMap* attrs, const image::AttrMap* given = nullptr);
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
    std::vector<std::string> env;                        // SSH_AUTH_SOCK=... of an ssh mount
    bool read_only = false;                              // the tree read-only (a definition's %test)
    std::string key;                                     // what of them the step's cache key holds (never a secret)
    std::vector<std::unique_ptr<app::WorkDir>> scratch;  // copies bound read-write
  };
  std::string mount_source(Stage& s, std::map<std::string, std::string>& m, const std::string& what,
                           std::string* digest);
  void copy_for_step(const std::string& from, const std::string& to, const std::string& what);
  void read_secrets();
  void read_agents();
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
  std::optional<image::Definition> def_;  // instead of df_, for a definition file
  std::deque<image::Instruction> triggers_;        // ONBUILD triggers of bases, run as the FROM's steps
  std::map<std::string, std::string> given_args_;  // --build-arg
  std::set<std::string> used_args_;
  std::map<std::string, std::optional<std::string>> global_args_;
  std::vector<Stage> stages_;
  std::map<std::string, std::unique_ptr<Stage>> from_images_;  // COPY --from=IMAGE
  std::optional<image::SourceTree> context_;
  std::map<std::string, std::string> secrets_;  // --secret id=ID: the file holding it
  image::AttrMap step_xattrs_;  // the step's ADD archives' extended attributes (the disk cannot hold them)
  std::map<std::string, std::string> agents_;  // --ssh ID=SOCKET: the agent's socket
  std::unique_ptr<app::WorkDir> secret_dir_;   // secrets given from the environment, as files
  util::UniqueFd cache_dir_;
  int step_no_ = 0, steps_ = 0;
};

}  // namespace rt::builder
