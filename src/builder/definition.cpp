// rt build: Apptainer definition files on the same builder (host): each
// stage's base, then %setup, %files, %post, Apptainer's files in
// /.singularity.d and %test, as steps with keys and layers like a
// Dockerfile's.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "builder/builder.hpp"
#include "image/child.hpp"
#include "image/sif_definition.hpp"
#include "run/launch.hpp"

namespace rt::builder {
namespace {

// Where %post finds what it may add: environment lines and labels
// (Apptainer's $APPTAINER_ENVIRONMENT and $APPTAINER_LABELS).
constexpr const char* kPostEnvironment = "/.singularity.d/env/91-environment.sh";
constexpr const char* kPostLabels = "/.build.labels";
// Where the %post script is bound for its step, as RUN's heredoc scripts are.
constexpr const char* kPostScript = "/.rt-post";

// A script file of Apptainer's: the section's own #! line, else /bin/sh.
std::string script_text(const std::string& body) {
  std::string b = body;
  const size_t first = b.find_first_not_of(" \t\n");
  if (first != std::string::npos && b.compare(first, 2, "#!") == 0) return b.substr(first);
  return "#!/bin/sh\n\n" + b;
}

// Makes directory `dir` of the tree and those above it.
void dirs_in_tree(int root, const std::string& dir) {
  std::string at;
  for (const auto& c : util::split(dir, '/')) {
    if (c.empty()) continue;
    auto p = util::open_in_root(root, at.empty() ? "/" : at, O_PATH | O_DIRECTORY);
    at += "/" + c;
    if (!p.fd) throw SysError(p.err, "open", at);
    if (::mkdirat(p.fd.get(), c.c_str(), 0755) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", at};
  }
}

// Writes `text` at `path` in the tree (its directory made), replacing a file.
void put_in_tree(int root, const std::string& path, const std::string& text, mode_t mode) {
  dirs_in_tree(root, util::dir_name(path));
  auto dir = util::open_in_root(root, util::dir_name(path), O_PATH | O_DIRECTORY);
  if (!dir.fd) throw SysError(dir.err, "open", util::dir_name(path));
  const std::string name = util::base_name(path);
  ::unlinkat(dir.fd.get(), name.c_str(), 0);
  util::UniqueFd fd(::openat(dir.fd.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd) throw SysError{errno, "create", path};
  util::write_all(fd.get(), text, path);
  if (::fchmod(fd.get(), mode) != 0) throw SysError{errno, "chmod", path};
}

std::optional<std::string> read_in_tree(int root, const std::string& path) {
  auto r = util::open_in_root(root, path, O_RDONLY | O_NONBLOCK);
  if (!r.fd) return std::nullopt;
  return util::read_regular_fd(r.fd.get(), path);
}

bool has_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The SCIF apps of a stage, in the order their sections first appear.
std::vector<std::string> app_names(const image::DefStage& d, const std::string& file) {
  std::vector<std::string> out;
  for (const auto& sec : d.sections) {
    if (!sec.name.starts_with("app")) continue;
    const std::string& n = sec.args;
    if (n.empty() || n.front() == '.' ||
        n.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != std::string::npos)
      throw Error(file + ":" + std::to_string(sec.line) + ": %" + sec.name + " needs an app name of letters, digits, "
                  "`_`, `.` and `-`, not `" + n + "`");
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

// Where an app lives (SCIF's layout, as Apptainer makes it).
std::string app_root(const std::string& app) { return "/scif/apps/" + app; }

// The layout Apptainer's runtime expects, made by the first step of a
// stage that changes its tree (before %post may write there): a step of
// its own would cost a walk of the whole tree for its layer.
void layout(int root) {
  for (const char* dir : {"/.singularity.d/env", "/.singularity.d/actions", "/.singularity.d/libs"})
    dirs_in_tree(root, dir);
}

}  // namespace

bool Builder::read_definition(const std::string& text) {
  const std::string base = util::base_name(file_shown_);
  if (!image::looks_like_definition(text) && !base.ends_with(".def") && base != "Singularity" && base != "Apptainer")
    return false;
  def_ = image::parse_definition(text, file_shown_, given_args_, used_args_);
  return true;
}

void Builder::plan_def_stages() {
  for (const auto& ds : def_->stages) {
    Stage s;
    s.index = static_cast<int>(stages_.size());
    s.def = &ds;
    s.name = lower(ds.value("stage"));
    const std::string where = file_shown_ + ":" + std::to_string(ds.line);
    if (ds.value("bootstrap").empty()) throw Error(where + ": `Bootstrap:` has no agent");
    stages_.push_back(std::move(s));
  }
  Stage* target = target_stage();
  std::function<void(Stage&)> need = [&](Stage& s) {
    if (s.needed) return;
    s.needed = true;
    for (const auto& sec : s.def->sections) {
      if (sec.name != "files" || sec.args.empty()) continue;
      const auto w = util::split(sec.args, ' ');
      const std::string where = file_shown_ + ":" + std::to_string(sec.line);
      if (w.size() != 2 || lower(w[0]) != "from") throw Error(where + ": %files takes `from STAGE` or nothing");
      Stage* b = earlier_stage(w[1], s.index);
      if (!b) throw Error(where + ": %files from " + w[1] + ": no stage `" + w[1] + "` before this one");
      need(*b);
    }
  };
  need(*target);
  stages_.resize(static_cast<size_t>(target->index) + 1);
  for (const auto& s : stages_) {
    if (!s.needed) continue;
    steps_ += 2;  // the base, Apptainer's files
    for (const auto& sec : s.def->sections)
      steps_ += sec.name == "setup" || sec.name == "files" || sec.name == "post" || sec.name == "appfiles" ||
                sec.name == "appinstall" || (sec.name == "test" && !o_.no_test);
  }
}

void Builder::build_def_stage(Stage& s) {
  const image::DefStage& d = *s.def;
  const std::string where = file_shown_ + ":" + std::to_string(d.line);
  const std::string agent = lower(d.value("bootstrap"));
  std::string from = d.value("from");
  std::string base;
  if (agent == "docker") {
    if (from.empty()) throw Error(where + ": `Bootstrap: docker` needs `From: IMAGE`");
    base = from.starts_with("docker://") ? from.substr(9) : from;
  } else if (agent == "localimage") {
    if (from.empty()) throw Error(where + ": `Bootstrap: localimage` needs `From: FILE` (a SIF, SquashFS or directory)");
    base = from.find('/') == std::string::npos ? "./" + from : from;
  } else if (agent == "scratch") {
    base = "scratch";
  } else {
    throw Error(where + ": `Bootstrap: " + d.value("bootstrap") + "` is not supported by rt build",
                "rt builds on `docker` (a registry or the store), `localimage` (a file or directory) and `scratch`; "
                "pull the base with rt pull and use Bootstrap: docker");
  }
  for (const auto& [k, v] : d.header)
    if (k != "bootstrap" && k != "from" && k != "stage" && k != "includecmd")
      util::warn(where + ": header `" + k + ": " + v + "` is read and ignored by rt build");
  note_step(s, "Bootstrap: " + agent + (base == "scratch" ? "" : " From: " + from));
  // A localimage base names a host path on purpose.
  const bool host_paths = std::exchange(o_.host_paths, o_.host_paths || agent == "localimage");
  set_base(s, base);
  o_.host_paths = host_paths;

  if (const auto* sec = d.section("setup")) def_setup(s, *sec);
  for (const auto& sec : d.sections)
    if (sec.name == "files") def_files(s, sec);
  if (const auto* sec = d.section("post")) def_post(s, *sec);
  // SCIF apps, after %post: each one's files (DEST below its root), then
  // its install script, run in its root.
  for (const auto& app : app_names(d, file_shown_)) {
    for (const auto& sec : d.sections)
      if (sec.name == "appfiles" && sec.args == app) def_files(s, sec, app_root(app));
    for (const auto& sec : d.sections)
      if (sec.name == "appinstall" && sec.args == app) def_post(s, sec, app);
  }
  def_meta(s);
  if (const auto* sec = d.section("test"); sec && !o_.no_test) def_test(s);
}

// %setup: on the host, as the user who builds (never as root), with the
// tree's path in $APPTAINER_ROOTFS.
void Builder::def_setup(Stage& s, const image::DefSection& sec) {
  const std::string shown = "%setup";
  note_step(s, shown);
  fs_step(s, shown, sec.body, [&] {
    layout(s.root.get());
    util::note("%setup runs on this host as uid " + std::to_string(::getuid()) + " (not as root), in " +
               util::current_dir());
    const int status = image::run_program({"/usr/bin/env", "APPTAINER_ROOTFS=" + s.rootfs,
                                           "SINGULARITY_ROOTFS=" + s.rootfs, "/bin/sh", "-e", "-c", sec.body});
    if (status != 0)
      throw Error(file_shown_ + ":" + std::to_string(sec.line) + ": %setup failed with status " +
                      std::to_string(status),
                  "the steps before it are cached", 1);
  });
}

// %files [from STAGE]: SOURCE [DEST] lines, copied as cp -r copies: a
// directory to DEST, or into DEST when that is a directory. Sources are
// host paths (relative to the working directory) or the stage's.
void Builder::def_files(Stage& s, const image::DefSection& sec, const std::string& dest_base) {
  const std::string where = file_shown_ + ":" + std::to_string(sec.line);
  const auto pairs = image::def_files(sec, file_shown_);
  Stage* from = nullptr;
  if (!sec.args.empty() && sec.name == "files") from = earlier_stage(util::split(sec.args, ' ').back(), s.index);
  const std::string shown = "%" + sec.name + (sec.args.empty() ? "" : " " + sec.args);
  note_step(s, shown);
  // Each source as a tree and a pattern: the tree its directory above any
  // glob (a pattern is matched below its tree only).
  // A stage's sources are paths of its tree, resolved inside it.
  struct Source {
    std::string dir, pattern, dest;
    bool dest_dir = false;  // DEST ends with /: a directory, made if missing
  };
  std::vector<Source> sources;
  const std::string cwd = util::current_dir();
  for (const auto& [src, dst] : pairs) {
    const std::string abs = util::normalize_path(src, from ? "/" : cwd);
    std::string dir = "/", pattern;
    bool globbed = false;
    for (const auto& c : util::split(abs.substr(1), '/')) {
      if (!globbed && !has_glob(c) && !from) {
        dir = dir == "/" ? "/" + c : dir + "/" + c;
        continue;
      }
      globbed = true;
      pattern += (pattern.empty() ? "" : "/") + c;
    }
    if (!globbed) {  // the source itself, from its directory
      pattern = util::base_name(dir);
      dir = util::dir_name(dir);
    }
    sources.push_back({dir, pattern, util::normalize_path(dst, dest_base), dst.ends_with("/")});
  }
  std::string key = from ? "stage " + from->state.key + "\n" : "";
  for (const auto& src : sources) {
    key += src.dir + " " + src.pattern + " " + src.dest + "\n";
    if (from) continue;
    if (!util::is_directory(src.dir)) throw Error(where + ": %files: `" + src.dir + "`: no such directory");
    image::SourceTree t(src.dir);
    key += t.digest(t.match(src.pattern, where)) + "\n";
  }
  fs_step(s, shown, key, [&] {
    layout(s.root.get());
    if (from) materialize(*from);
    for (const auto& src : sources) {
      image::SourceTree t(from ? from->rootfs : src.dir);
      const auto rels = t.match(src.pattern, where);
      const bool dest_is_dir = image::dir_in_tree(s.root.get(), src.dest) || src.dest_dir;
      if ((rels.size() > 1 || src.dest_dir) && !image::dir_in_tree(s.root.get(), src.dest))
        dirs_in_tree(s.root.get(), src.dest);  // several, or DEST/: into a new directory
      for (const auto& r : rels) {
        const bool into = rels.size() > 1 || dest_is_dir;
        if (t.is_dir(r))
          image::copy_into(t, r, s.root.get(), into ? src.dest + "/" + util::base_name(r) : src.dest, true, {}, where);
        else
          image::copy_into(t, r, s.root.get(), src.dest, into, {}, where);
      }
    }
  });
}

// %post [-c SHELL]: in the container under root emulation, `SHELL -e`
// (/bin/sh by default) running the section as a script.
void Builder::def_post(Stage& s, const image::DefSection& sec, const std::string& app) {
  std::string shell = "/bin/sh";
  if (!sec.args.empty() && app.empty()) {
    const auto w = util::split(sec.args, ' ');
    if (w.size() != 2 || w[0] != "-c")
      throw Error(file_shown_ + ":" + std::to_string(sec.line) + ": %post takes `-c SHELL` or nothing");
    shell = w[1];
  }
  const std::string shown = "%" + sec.name + (sec.args.empty() ? "" : " " + sec.args);
  note_step(s, shown);
  app::WorkDir scratch(store_.tmp_dir(), "post");
  const std::string file = scratch.path() + "/script";
  {
    util::UniqueFd fd = util::open_fd(file, O_WRONLY | O_CREAT | O_EXCL, 0644);
    // An app's install script runs in its root, made first with its bin/,
    // lib/ and data directories.
    const std::string r = app_root(app);
    const std::string cd = app.empty() ? ""
                                       : "mkdir -p " + r + "/bin " + r + "/lib " + r + "/scif/env /scif/data/" + app +
                                             "/input /scif/data/" + app + "/output && cd " + r + "\n";
    util::write_all(fd.get(), cd + sec.body, file);
  }
  RunExtras extras;
  extras.binds.push_back({file, kPostScript, true});
  extras.env = {std::string("APPTAINER_ENVIRONMENT=") + kPostEnvironment,
                std::string("SINGULARITY_ENVIRONMENT=") + kPostEnvironment,
                std::string("APPTAINER_LABELS=") + kPostLabels,
                std::string("SINGULARITY_LABELS=") + kPostLabels,
                "APPTAINER_ROOTFS=/",
                "SINGULARITY_ROOTFS=/"};
  if (!app.empty())
    extras.env.insert(extras.env.end(), {"SCIF_APPNAME=" + app, "SCIF_APPROOT=" + app_root(app),
                                         "SCIF_APPDATA=/scif/data/" + app, "SCIF_APPBIN=" + app_root(app) + "/bin",
                                         "SCIF_APPLIB=" + app_root(app) + "/lib"});
  fs_step(s, shown, shell + "\n" + sec.body, [&] {
    layout(s.root.get());
    const int status = run_container(s, {shell, "-e", kPostScript}, &extras);
    if (status != 0) {
      std::string tail;
      for (const auto& l : last_lines_) tail += "\n  | " + l;
      throw Error(file_shown_ + ":" + std::to_string(sec.line) + ": " + shown + " failed with status " +
                      std::to_string(status) + (tail.empty() ? " (it printed nothing)" : "; its last lines:" + tail),
                  "the steps before it are cached", 1);
    }
  });
}

// Apptainer's files from the sections: the environment, the scripts, the
// help, the labels (with what %post added) and the definition itself; the
// config's labels, and the runscript as its entrypoint.
void Builder::def_meta(Stage& s) {
  const image::DefStage& d = *s.def;
  json& c = cfg_of(s.state);
  if (!c.contains("Labels") || !c["Labels"].is_object()) c["Labels"] = json::object();
  for (const auto& sec : d.sections)
    if (sec.name == "labels")
      for (const auto& [k, v] : image::def_labels(sec)) c["Labels"][k] = v;
  const auto* runscript = d.section("runscript");
  if (runscript) {
    c["Entrypoint"] = json::array({"/.singularity.d/runscript"});
    c.erase("Cmd");
  }
  // Without %runscript, one that runs the config's ENTRYPOINT and CMD, as
  // Apptainer writes for a Docker base (IncludeCmd: no leaves CMD out).
  std::string run_text;
  if (runscript) {
    run_text = script_text(runscript->body);
  } else {
    json cfg = s.state.config;
    if (lower(d.value("includecmd")) == "no" && cfg.contains("config") && cfg["config"].is_object())
      cfg["config"].erase("Cmd");
    run_text = image::sif_metadata(cfg.dump(), file_shown_, d.value("from")).runscript;
  }
  std::vector<std::pair<std::string, std::string>> files;  // path, text (mode 0755 for scripts)
  if (const auto* e = d.section("environment"))
    files.emplace_back("/.singularity.d/env/90-environment.sh",
                       "#!/bin/sh\n# Custom environment shell code should follow\n\n" + e->body);
  files.emplace_back("/.singularity.d/runscript", run_text);
  if (const auto* t = d.section("startscript")) files.emplace_back("/.singularity.d/startscript", script_text(t->body));
  if (const auto* t = d.section("test")) files.emplace_back("/.singularity.d/test", script_text(t->body));
  if (const auto* h = d.section("help")) files.emplace_back("/.singularity.d/runscript.help", h->body);
  files.emplace_back("/.singularity.d/Singularity", def_->text);
  // Each SCIF app's files in its scif/ directory, as Apptainer lays them out.
  std::vector<std::string> dirs;
  for (const auto& app : app_names(d, file_shown_)) {
    const std::string r = app_root(app);
    for (const auto& dir : {r + "/bin", r + "/lib", r + "/scif/env", "/scif/data/" + app + "/input",
                            "/scif/data/" + app + "/output"})
      dirs.push_back(dir);
    json app_labels = {{"SCIF_APP_NAME", app}};
    for (const auto& sec : d.sections) {
      if (sec.args != app) continue;
      if (sec.name == "apprun") files.emplace_back(r + "/scif/runscript", script_text(sec.body));
      if (sec.name == "appstart") files.emplace_back(r + "/scif/startscript", script_text(sec.body));
      if (sec.name == "apptest") files.emplace_back(r + "/scif/test", script_text(sec.body));
      if (sec.name == "apphelp") files.emplace_back(r + "/scif/runscript.help", sec.body);
      if (sec.name == "appenv") files.emplace_back(r + "/scif/env/90-environment.sh", "#!/bin/sh\n" + sec.body);
      if (sec.name == "applabels")
        for (const auto& [k, v] : image::def_labels(sec)) app_labels[k] = v;
    }
    files.emplace_back(r + "/scif/labels.json", app_labels.dump(2) + "\n");
  }
  const json labels = c["Labels"];
  note_step(s, "Apptainer's files in /.singularity.d");
  fs_step(s, "apptainer files", json(files).dump() + labels.dump(), [&] {
    layout(s.root.get());
    for (const auto& dir : dirs) dirs_in_tree(s.root.get(), dir);
    for (const auto& [path, text] : files)
      put_in_tree(s.root.get(), path, text,
                  path.ends_with(".help") || path.ends_with("Singularity") || path.ends_with(".json") ? 0644 : 0755);
    json all = labels;
    if (auto added = read_in_tree(s.root.get(), kPostLabels)) {
      for (const auto& l : util::split(*added, '\n')) {
        const std::string t = util::trim(l);
        if (t.empty()) continue;
        const size_t sp = t.find_first_of(" \t");
        all[t.substr(0, sp)] = sp == std::string::npos ? "" : util::trim(t.substr(sp));
      }
      ::unlinkat(util::open_in_root(s.root.get(), "/", O_RDONLY | O_DIRECTORY).fd.get(), kPostLabels + 1, 0);
    }
    put_in_tree(s.root.get(), "/.singularity.d/labels.json", all.dump(2) + "\n", 0644);
  });
}

// %test: the image's test script, after the build, as `apptainer test`
// runs it; a failure fails the build (--notest skips it).
void Builder::def_test(Stage& s) {
  note_step(s, "%test");
  materialize(s);
  RunExtras read_only;  // what it writes must not reach the image
  read_only.read_only = true;
  const int status = run_container(s, run::after_apptainer_env({run::kApptainerTest}), &read_only);
  if (status != 0) {
    std::string tail;
    for (const auto& l : last_lines_) tail += "\n  | " + l;
    throw Error(file_shown_ + ": %test failed with status " + std::to_string(status) +
                    (tail.empty() ? "" : "; its last lines:" + tail),
                "the image is not stored; --notest builds it without the test", 1);
  }
}

}  // namespace rt::builder
