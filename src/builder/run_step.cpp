// rt build: RUN: its user, its container, its flags, its output (host).
#include "builder/builder.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "image/child.hpp"

namespace rt::builder {
namespace {

// Where RUN <<EOF of a #! script finds it (a file bound read-only for the
// step; the empty mount point is removed after it, as --mount targets are).
constexpr const char* kHeredocScript = "/.rt-heredoc";

}  // namespace

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
  e.write = !(extras && extras->read_only);
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
  if (extras) env.insert(env.end(), extras->env.begin(), extras->env.end());
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

// What RUN --mount's from= and source= name: a path in an earlier stage's
// tree or (without from=) in the context, its symlinks kept inside it;
// `digest` (when given) gets what the step's key holds of it.
std::string Builder::mount_source(Stage& s, std::map<std::string, std::string>& m, const std::string& what,
                                  std::string* digest) {
  const std::string source = m.count("source") ? m["source"] : m.count("src") ? m["src"] : ".";
  const std::string rel = util::normalize_path("/" + source, "/").substr(1);  // never above the root
  std::string host;
  if (m.count("from")) {
    Stage* from = earlier_stage(m["from"], s.index);
    if (!from) throw Error(what + ": from= names no earlier stage", "name a stage of this Dockerfile");
    materialize(*from);
    host = from->rootfs + (rel.empty() ? "" : "/" + rel);
    if (digest) *digest = from->state.key;
  } else {
    host = context_->path() + (rel.empty() ? "" : "/" + rel);
    if (digest) *digest = context_->digest(context_->match(rel.empty() ? "." : rel, what));
  }
  char real[PATH_MAX], top[PATH_MAX];
  const std::string root = m.count("from") ? host.substr(0, host.size() - rel.size()) : context_->path();
  if (!::realpath(host.c_str(), real) || !::realpath(root.c_str(), top))
    throw Error(what + ": `" + source + "` is not there");
  if (std::string(real) != top && !std::string(real).starts_with(std::string(top) + "/"))
    throw Error(what + ": `" + source + "` leads out of where it lies");
  return real;
}

// `from` copied to `to` as it is (cp -a: modes, times, links), for a step.
void Builder::copy_for_step(const std::string& from, const std::string& to, const std::string& what) {
  if (image::run_program({"cp", "-a", "--reflink=auto", "--", from, to}) != 0)
    throw Error(what + ": copying `" + from + "` for the step failed");
}

// --ssh default | ID=SOCKET: SSH agents RUN --mount=type=ssh binds for a
// step. An agent's socket must be the caller's own: one another user made
// could answer with keys of theirs.
void Builder::read_agents() {
  for (const auto& spec : o_.ssh) {
    const size_t eq = spec.find('=');
    const std::string id = spec.substr(0, eq);
    std::string socket = eq == std::string::npos ? "" : spec.substr(eq + 1);
    if (id.empty()) throw Error("--ssh " + spec + ": it needs an ID (default, or ID=SOCKET)");
    if (socket.empty()) {
      const char* env = std::getenv("SSH_AUTH_SOCK");
      if (!env || !*env)
        throw Error("--ssh " + spec + ": no agent socket given and SSH_AUTH_SOCK is not set",
                    "start one (eval $(ssh-agent); ssh-add) or give --ssh " + id + "=SOCKET");
      socket = env;
    }
    struct stat st;
    if (::stat(socket.c_str(), &st) != 0) throw SysError{errno, "stat", "--ssh " + id + ": " + socket};
    if (!S_ISSOCK(st.st_mode))
      throw Error("--ssh " + id + ": `" + socket + "` is not a socket",
                  "give an SSH agent's socket; keys go to the agent with ssh-add");
    if (st.st_uid != ::getuid())
      throw Error("--ssh " + id + ": `" + socket + "` belongs to uid " + std::to_string(st.st_uid) + ", not to you");
    agents_[id] = socket;
  }
}

// RUN --mount=type=cache|bind|tmpfs|secret|ssh,... and --network=none|host|default.
Builder::RunExtras Builder::run_extras(Stage& s, const Instruction& ins) {
  RunExtras x;
  json key = json::array();
  int agents = 0;  // ssh mounts without a target: /run/buildkit/ssh_agent.N
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
    if (type != "cache" && type != "bind" && type != "tmpfs" && type != "secret" && type != "ssh")
      throw Error(what + ": --mount type=" + type + " is not supported",
                  "rt build takes cache, bind, tmpfs, secret and ssh");
    if (type == "ssh") {
      const std::string id = m.count("id") ? m["id"] : "default";
      auto given = agents_.find(id);
      if (given == agents_.end()) {
        if (m.count("required") && truthy(m["required"]))
          throw Error(what + ": no SSH agent `" + id + "` was given",
                      "give it with --ssh " + (id == "default" ? std::string("default") : id + "=SOCKET"));
        continue;  // not given, not required: nothing mounted, as Docker does
      }
      if (target.empty()) target = "/run/buildkit/ssh_agent." + std::to_string(agents++);
      target = util::normalize_path(target, "/");
      x.binds.push_back({given->second, target, false});
      if (x.env.empty()) x.env.push_back("SSH_AUTH_SOCK=" + target);
      key.push_back("ssh:" + id + ":" + target);  // which agent, never what it holds
      continue;
    }
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
      // One directory per user and cache id (default: the target), kept
      // in the store across builds, never in a layer; a new one seeded
      // from= a stage (its source= directory) when asked. As Docker, by id;
      // unlike Docker, a base image's ONBUILD trigger gets caches of its
      // own, keyed with that base too: someone else's image must not fill
      // the caches the user's other projects read.
      const std::string id = m.count("id") ? m["id"] : target;
      const bool trigger =
          std::any_of(triggers_.begin(), triggers_.end(), [&](const Instruction& t) { return &t == &ins; });
      const std::string scope = trigger ? "onbuild " + s.base_digest + " " + id : id;
      const std::string rel = std::string(store::kRunCacheDir) + "/" + image::sha256_digest(scope).substr(7, 32);
      store_.dir().dir(store::kRunCacheDir, true);
      const std::string dir = store_.dir().sub(rel);
      std::optional<std::string> seed;
      if (m.count("from")) seed = mount_source(s, m, what, nullptr);
      if (::mkdir(dir.c_str(), 0755) == 0) {
        if (seed) copy_for_step(*seed + (util::is_directory(*seed) ? "/." : ""), dir, what);
      } else if (errno != EEXIST) {
        throw SysError{errno, "mkdir", dir};
      }
      x.binds.push_back({dir, target, m.count("readonly") || m.count("ro")});
      key.push_back("cache:" + id + ":" + target);
    } else {  // bind
      std::string digest;
      std::string host = mount_source(s, m, what, &digest);
      const bool rw = m.count("rw") || m.count("readwrite");
      if (rw) {
        // Writable for the step, its writes dropped after it (as Docker
        // does): a private copy is bound.
        x.scratch.push_back(std::make_unique<app::WorkDir>(store_.tmp_dir(), "bind"));
        const std::string copy = x.scratch.back()->path() + "/copy";
        copy_for_step(host, copy, what);
        host = copy;
      }
      x.binds.push_back({host, target, !rw});
      key.push_back("bind:" + target + ":" + digest + (rw ? ":rw" : ""));
    }
  }
  x.key = key.dump();
  return x;
}

void Builder::do_run(Stage& s, const Instruction& ins) {
  std::vector<std::string> argv;
  std::optional<app::WorkDir> script_dir;  // RUN <<EOF of a #! script: the file run
  std::string script_key;
  if (ins.exec_form) {
    argv = ins.argv;
  } else if (!ins.heredocs.empty()) {
    // RUN <<EOF: the body is the script. RUN CMD <<EOF: the line and its
    // heredocs as the shell reads them (quoting and <<- included).
    const auto& first = ins.heredocs.front();
    std::string marker = util::trim(ins.args);
    for (const char* q : {"\"", "'"}) marker.erase(std::remove(marker.begin(), marker.end(), q[0]), marker.end());
    const bool alone = ins.heredocs.size() == 1 && (marker == "<<" + first.word || marker == "<<-" + first.word);
    if (alone && first.body.starts_with("#!")) {
      // A script of its own (#!/usr/bin/python3 ...): a file the step
      // runs, as Docker does; bound read-only below / for the step.
      script_dir.emplace(store_.tmp_dir(), "heredoc");
      const std::string file = script_dir->path() + "/script";
      util::UniqueFd fd = util::open_fd(file, O_WRONLY | O_CREAT | O_EXCL, 0755);
      util::write_all(fd.get(), first.body, file);
      argv = {std::string(kHeredocScript)};
      script_key = "\nscript:" + first.body;
    } else {
      std::string script = alone ? first.body : ins.args + "\n";
      if (!alone)
        for (const auto& d : ins.heredocs) script += d.body + d.word + "\n";
      argv = s.state.shell;
      argv.push_back(script);
    }
  } else {
    argv = s.state.shell;
    argv.push_back(ins.args);
  }
  if (argv.empty()) throw Error(where(ins) + ": RUN has an empty command");
  std::string shown = ins.exec_form ? "RUN " + json(ins.argv).dump() : "RUN " + ins.args;
  for (auto it = ins.flags.rbegin(); it != ins.flags.rend(); ++it)
    shown = "RUN --" + it->first + "=" + it->second + shown.substr(3);
  note_step(s, shown);
  RunExtras extras = run_extras(s, ins);
  if (script_dir) extras.binds.push_back({script_dir->path() + "/script", kHeredocScript, true});
  json args = json::object();
  for (const auto& [k, v] : s.args)
    if (v) args[k] = *v;
  fs_step(s, shown, args.dump() + "\n" + json(argv).dump() + (ins.flags.empty() ? "" : "\n" + extras.key) + script_key,
          [&] {
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

}  // namespace rt::builder
