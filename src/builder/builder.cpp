// rt build: the steps of a stage in order, and the result (host).
#include "builder/builder.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>

namespace rt::builder {

void Builder::note_step(const Stage& s, const std::string& shown) {
  ++step_no_;
  std::string line = "STEP " + std::to_string(step_no_) + "/" + std::to_string(steps_) + ": " + shown;
  if (stages_.size() > 1) line = "[" + (s.name.empty() ? std::to_string(s.index) : s.name) + "] " + line;
  util::note(line);
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
  if (o_.push_sign.wanted() && o_.push.empty())
    throw Error("--sign-by and --sign-by-key sign what rt build pushes: they need --push REF");
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
  for (const auto& f : o_.build_arg_files) {
    auto text = util::read_file_if_exists(f, 1 << 20);
    if (!text) throw Error("cannot read the build argument file `" + f + "`");
    for (const auto& l : util::split(*text, '\n')) {
      const std::string t = util::trim(l);
      if (t.empty() || t[0] == '#') continue;
      const size_t eq = t.find('=');
      if (eq == std::string::npos || eq == 0) throw Error("`" + f + "`: `" + t + "` is no K=V line");
      given_args_.emplace(t.substr(0, eq), t.substr(eq + 1));  // --build-arg wins
    }
  }
  read_dockerfile();
  for (const auto& [name, value] : df_.directives)
    if (name == "syntax" || name == "check")
      util::note(file_shown_ + ": `# " + name + "=" + value +
                 "` read and ignored: rt build reads the Dockerfile itself");
  read_secrets();
  read_agents();
  cache_dir_ = store_.dir().dir(store::kBuildCacheDir, true);
  if (def_)
    plan_def_stages();
  else
    plan_stages();
  for (const auto& [k, v] : given_args_)
    if (def_ && !used_args_.count(k) && !o_.warn_unused_args)
      throw Error("--build-arg " + k + " is not used by " + file_shown_,
                  "leave it out, or give --warn-unused-build-args to build anyway");
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& s : stages_)
    if (s.needed) s.def ? build_def_stage(s) : build_stage(s);
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
    po.sign = o_.push_sign;
    rt::push(o_.tag, o_.push, po);
  }
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) == 0)
    util::info("peak resident memory of rt build itself: " + std::to_string(ru.ru_maxrss) + " kB");
  util::note("built `" + o_.tag + "` (" + src.config_digest.substr(0, 19) + ", " +
             std::to_string(target.state.layers.size()) + " layers) in " + seconds_since(t0));
  return o_.tag;
}

}  // namespace rt::builder

namespace rt {

std::string build(const BuildOptions& options) {
  util::log_init(options.verbosity);
  return builder::Builder(options).run();
}

}  // namespace rt
