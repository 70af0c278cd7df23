// The mount plan (pure).
#include "run/plan.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <map>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::run {

bool is_system_dir(const std::string& path) {
  static constexpr std::array kSystem = {"/bin",    "/boot", "/dev", "/etc",  "/lib", "/lib32", "/lib64",
                                         "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr",   "/var"};
  if (path == "/") return true;
  if (util::path_within(path, "/var/tmp")) return false;  // node-local scratch, not system
  for (const char* s : kSystem)
    if (util::path_within(path, s)) return true;
  return false;
}

namespace {

// True when an earlier mount already covers path `p`: a bind showing the
// host path at the same path, or a private tmpfs the user asked for (with
// --private-tmp, a working directory in /tmp is not brought back).
bool covered(const std::vector<Mount>& mounts, const std::string& p) {
  for (const auto& m : mounts)
    if (((m.kind == Mount::Kind::Bind && m.src == m.dst) || m.kind == Mount::Kind::Tmpfs) &&
        util::path_within(p, m.dst))
      return true;
  return false;
}

}  // namespace

std::optional<BindSpec> home_spec(const ExecOptions& o) {
  if (o.home.empty()) return std::nullopt;
  BindSpec b = parse_bind(o.home);
  if (b.readonly || std::count(o.home.begin(), o.home.end(), ':') > 1)
    throw Error("bad --home " + util::quoted(o.home) + ": expected SRC[:DST]");
  if (b.dst.empty()) b.dst = b.src;
  return b;
}

std::string home_inside(const ExecOptions& o, const HostInfo& h) {
  if (auto b = home_spec(o)) return util::normalize_path(b->dst);
  return o.no_home ? "/" : h.home;
}

MountPlan build_plan(const PlanInputs& in) {
  const ExecOptions& o = *in.options;
  const HostInfo& h = *in.host;
  if (o.write && o.write_tmpfs) throw Error("--write and --write-tmpfs exclude each other");
  if (o.write && in.squashfs && in.sif_overlay < 0)
    throw Error("--write: image `" + in.rootfs + "` is a SquashFS or SIF file, which cannot be written",
                "keep the writes in an overlay (--overlay DIR, an image from rt overlay create, or an overlay "
                "partition added to a SIF file by rt overlay create FILE.sif), or in memory with --write-tmpfs");

  MountPlan p;
  p.rootfs = in.rootfs;
  p.squashfs = in.squashfs;
  p.staging = in.staging.empty() ? in.rootfs : in.staging;
  p.root_mode = o.write_tmpfs || !o.overlays.empty() || in.sif_overlay >= 0 ? RootMode::Overlay
                : o.write                                                   ? RootMode::Writable
                                                                            : RootMode::ReadOnly;
  // A SIF file's overlay partition (Apptainer's): the lowest layer, written
  // with --write (Apptainer's --writable), else read.
  if (in.sif_overlay >= 0) {
    OverlayLayer l;
    l.path = in.rootfs;
    l.image = l.embedded = true;
    l.ext_offset = in.sif_overlay;
    l.writable = o.write;
    p.overlays.push_back(std::move(l));
    p.overlays_read_only = !o.write && !o.write_tmpfs && o.overlays.empty();
  }
  for (const auto& spec : o.overlays) {
    OverlayLayer l;
    l.path = spec;
    if (spec.ends_with(":ro")) {
      l.path = spec.substr(0, spec.size() - 3);
    } else {
      l.writable = true;
      if (o.write || o.write_tmpfs)
        throw Error("--overlay " + spec + ": a writable overlay and " + (o.write ? "--write" : "--write-tmpfs") +
                        " exclude each other",
                    "give the overlay as " + spec + ":ro, or leave the other out");
      for (const auto& other : p.overlays)
        if (other.writable)
          throw Error("--overlay " + spec + ": only one overlay takes the writes (`" + other.path + "` does)",
                      "give the others with :ro");
    }
    if (l.path.empty()) throw Error("--overlay needs a directory or an overlay image");
    l.path = util::normalize_path(l.path, h.cwd.empty() ? "/" : h.cwd);
    p.overlays.push_back(std::move(l));
  }
  if (o.write && !o.overlays.empty()) throw Error("--write and --overlay exclude each other");
  p.outer_uid = h.uid;
  p.outer_gid = h.gid;
  p.inner_uid = o.uid.value_or(h.uid);
  p.inner_gid = o.gid.value_or(h.gid);

  auto bind = [&](std::string src, std::string dst, const char* why, bool optional = false, bool ro = false) {
    p.mounts.push_back({.kind = Mount::Kind::Bind,
                        .src = std::move(src),
                        .dst = std::move(dst),
                        .readonly = ro,
                        .optional = optional,
                        .why = why});
  };
  // Host devices, processes and kernel state; /dev brings /dev/shm and
  // /dev/pts (MPI shared memory needs the host's /dev/shm).
  bind("/dev", "/dev", "default");
  bind("/proc", "/proc", "default");
  bind("/sys", "/sys", "default");
  auto tmpfs = [&](std::string dst, const char* why) {
    p.mounts.push_back({.kind = Mount::Kind::Tmpfs, .src = "tmpfs", .dst = std::move(dst), .why = why});
  };
  if (o.private_tmp || o.contain)
    tmpfs("/tmp", o.contain ? "--contain" : "--private-tmp");
  else if (!o.image_tmp)
    bind("/tmp", "/tmp", "default");  // Open MPI's session directory lives here
  // Without /etc/hosts MPI_Init stalls on a DNS timeout, so these two are
  // provided even where the image lacks them; machine-id only where it has one.
  for (const char* f : {"/etc/hosts", "/etc/resolv.conf", "/etc/machine-id"}) bind(f, f, "default", /*optional=*/true);
  p.mounts.back().if_target = true;
  if (!in.root_emulation) {
    p.staged = {{"passwd", in.passwd}, {"group", in.group}};
    p.mounts.push_back(
        {.kind = Mount::Kind::Staged, .src = "passwd", .dst = "/etc/passwd", .readonly = true, .why = "synthesized"});
    p.mounts.push_back(
        {.kind = Mount::Kind::Staged, .src = "group", .dst = "/etc/group", .readonly = true, .why = "synthesized"});
  } else if (in.apt) {
    // apt drops privileges to _apt for downloads and then checks that it
    // cannot regain them: emulated calls change nothing, so it stays root.
    p.staged = {{"apt.conf", "APT::Sandbox::User \"root\";\n"}};
    p.mounts.push_back({.kind = Mount::Kind::Staged,
                        .src = "apt.conf",
                        .dst = "/etc/apt/apt.conf.d/00rt-root-emulation",
                        .readonly = true,
                        .why = "--seccomp"});
  }

  if (o.contain) tmpfs("/var/tmp", "--contain");
  for (const auto& d : o.tmpfs) {
    if (d.empty() || d.front() != '/') throw Error("--tmpfs " + util::quoted(d) + ": not an absolute path");
    tmpfs(util::normalize_path(d), "--tmpfs");
  }
  const std::optional<BindSpec> home_bind = home_spec(o);
  if (home_bind) {
    // Bound after --bind's: a bind below it would hide it.
  } else if (!o.no_home && !h.home.empty() && h.home.front() == '/') {
    std::string home = util::normalize_path(h.home);
    if (o.contain && !is_system_dir(home))
      tmpfs(home, "--contain (an empty home)");
    else if (!is_system_dir(home) && !covered(p.mounts, home))
      bind(home, home, "home", /*optional=*/true);
  }
  std::string cwd = h.cwd.empty() ? std::string("/") : util::normalize_path(h.cwd);
  if (!o.contain && !is_system_dir(cwd) && !covered(p.mounts, cwd) &&
      !(o.no_home && !h.home.empty() && util::path_within(cwd, util::normalize_path(h.home))))
    bind(cwd, cwd, "working directory", /*optional=*/true);

  for (const auto& path : in.launcher_paths) {
    std::string n = util::normalize_path(path);
    if (!covered(p.mounts, n)) bind(n, n, "launcher", /*optional=*/true);
  }
  for (const auto& m : in.injected) p.mounts.push_back(m);

  for (const auto& b : o.binds) {
    std::string src = util::normalize_path(b.src, h.cwd.empty() ? "/" : h.cwd);
    std::string dst = b.dst.empty() ? src : util::normalize_path(b.dst);
    bind(std::move(src), std::move(dst), "--bind", false, b.readonly);
  }
  if (home_bind)
    bind(util::normalize_path(home_bind->src, h.cwd.empty() ? "/" : h.cwd), util::normalize_path(home_bind->dst),
         "--home");
  for (const auto& m : in.hidden) p.mounts.push_back(m);

  if (!o.cd.empty()) {
    p.cwd = util::normalize_path(o.cd, "/");
    p.cwd_explicit = true;
  } else if (!in.image_workdir.empty()) {
    p.cwd = util::normalize_path(in.image_workdir, "/");
    p.cwd_explicit = true;
  } else {
    p.cwd = o.contain ? home_inside(o, h) : cwd;
  }
  p.host_files = host_files_tree(p.mounts);
  return p;
}

HostFilesTree host_files_tree(const std::vector<Mount>& mounts) {
  static const std::string root = kHostFilesRoot, hidden = root + "/.d";
  // Views into the mounts' own strings (a start's plan holds some 40 of
  // these: copies of each part were most of the time this took).
  struct File {
    std::string_view rel, dir, name;
    const std::string* src;
  };
  std::vector<File> files;
  files.reserve(mounts.size());
  std::deque<std::string> normalized;  // a dst that was not, made so
  std::vector<std::string_view> dirs;  // distinct, in order of first use
  for (const auto& m : mounts) {
    if (m.kind != Mount::Kind::HostFile) continue;
    std::string_view dst = m.dst;
    if (!util::is_normal_path(dst)) dst = normalized.emplace_back(util::normalize_path(dst));
    if (!util::path_within(dst, root) || dst == root || util::path_within(dst, hidden))
      throw Error("host file `" + m.src + "`: its place `" + m.dst + "` is not below `" + root + "` (or is in .d)");
    const size_t slash = m.src.rfind('/');
    if (m.src.empty() || m.src.front() != '/' || slash + 1 == m.src.size())
      throw Error("host file `" + m.src + "`: not an absolute path of a file");
    const std::string_view src = m.src, dir = slash == 0 ? src.substr(0, 1) : src.substr(0, slash);
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    files.push_back({dst.substr(root.size() + 1), dir, src.substr(slash + 1), &m.src});
  }
  // A directory inside another one is reached through that one's bind (a
  // recursive bind: what is mounted below comes along): UCX's plugins in
  // /usr/lib/x86_64-linux-gnu/ucx cost no mount of their own.
  HostFilesTree t;
  struct Via {
    std::string_view dir;
    size_t index;
    std::string_view below;  // the path below the bound one: "" or "/ucx"
  };
  std::vector<Via> via;
  for (const auto& d : dirs) {
    bool inner = false;
    for (const auto& o : dirs) inner |= o.size() < d.size() && util::path_within(d, o);
    if (!inner) {
      via.push_back({d, t.dirs.size(), ""});
      t.dirs.emplace_back(d);
    }
  }
  for (const auto& d : dirs)
    if (std::none_of(via.begin(), via.end(), [&](const Via& v) { return v.dir == d; }))
      for (size_t i = 0; i < t.dirs.size(); ++i)
        if (util::path_within(d, t.dirs[i])) via.push_back({d, i, d.substr(t.dirs[i] == "/" ? 0 : t.dirs[i].size())});
  std::map<std::string_view, size_t> link_at;  // path -> index in t.links: the last of one name wins, as stacked binds did
  t.links.reserve(files.size());
  for (const auto& f : files) {
    // The link's directories, parents first; and "../" for each of them.
    std::string target;
    for (size_t p = f.rel.find('/'); p != std::string_view::npos; p = f.rel.find('/', p + 1)) {
      const std::string_view sub = f.rel.substr(0, p);
      if (std::find(t.subdirs.begin(), t.subdirs.end(), sub) == t.subdirs.end()) t.subdirs.emplace_back(sub);
      target += "../";
    }
    const Via& v = *std::find_if(via.begin(), via.end(), [&](const Via& x) { return x.dir == f.dir; });
    ((((target += ".d/") += std::to_string(v.index)) += v.below) += '/') += f.name;
    HostFilesTree::Link link{std::string(f.rel), std::move(target), *f.src, v.index};
    if (auto [it, added] = link_at.emplace(f.rel, t.links.size()); added)
      t.links.push_back(std::move(link));
    else
      t.links[it->second] = std::move(link);
  }
  return t;
}

std::vector<std::string> describe(const MountPlan& p, bool each_link) {
  std::vector<std::string> out;
  std::string mode = p.root_mode == RootMode::ReadOnly   ? "read-only"
                    : p.root_mode == RootMode::Writable ? "writable"
                                                        : "writable tmpfs overlay (discarded)";
  if (!p.overlays.empty()) {
    mode = "under overlays";
    bool kept = false;
    for (const auto& l : p.overlays) {
      const char* how = l.embedded               ? " (its overlay partition, through fuse2fs and fuse-overlayfs)"
                        : l.image                  ? " (ext3 image, through fuse2fs and fuse-overlayfs)"
                        : l.squash_offset >= 0     ? " (SquashFS, through squashfuse and fuse-overlayfs)"
                                                   : "";
      mode += std::string(" `") + l.path + "`" + how + (l.writable ? " (writes kept in its upper/)" : " (ro)");
      kept |= l.writable;
    }
    if (p.overlays_read_only)
      mode += ", read-only";
    else if (!kept)
      mode += ", writes to a tmpfs (discarded)";
  }
  out.push_back("image root `" + p.rootfs + "` " + (p.squashfs ? "(SquashFS, served by its rt-sqfs server) " : "") +
                mode + ", nosuid, nodev");
  out.push_back("uid map: " + std::to_string(p.inner_uid) + " -> " + std::to_string(p.outer_uid) +
                ", gid map: " + std::to_string(p.inner_gid) + " -> " + std::to_string(p.outer_gid) + " (one id each)");
  bool host_files_shown = false;
  for (const auto& m : p.mounts) {
    std::string line;
    if (m.kind == Mount::Kind::HostFile) {
      // One tree for all of them, made where the first one stands.
      if (host_files_shown) continue;
      host_files_shown = true;
      const HostFilesTree& t = p.host_files;
      out.push_back("host files: " + std::to_string(t.links.size()) + (t.links.size() == 1 ? " link" : " links") +
                    " into `" + kHostFilesRoot + "` from " + std::to_string(t.dirs.size()) +
                    (t.dirs.size() == 1 ? " directory" : " directories") + " (one bind each, ro) [" + m.why + "]");
      if (!each_link) continue;
      for (size_t i = 0; i < t.dirs.size(); ++i)
        out.push_back("  mount bind `" + t.dirs[i] + "` on `" + kHostFilesRoot + "/.d/" + std::to_string(i) + "` ro");
      for (const auto& l : t.links)
        out.push_back("  link `" + std::string(kHostFilesRoot) + "/" + l.path + "` -> `" + l.target + "` (`" + l.host +
                      "`)");
      continue;
    }
    switch (m.kind) {
      case Mount::Kind::Bind:
        line = "mount bind `" + m.src + "` on";
        break;
      case Mount::Kind::Tmpfs:
        line = "mount tmpfs on";
        break;
      case Mount::Kind::Staged:
        line = "mount synthesized " + m.src + " on";
        break;
      case Mount::Kind::Hide:
        line = "hide `" + m.src + "` in";
        break;
      case Mount::Kind::Symlink:
        line = "link `" + m.src + "` as";
        break;
      case Mount::Kind::HostFile:
        break;
    }
    line += " `" + m.dst + "`";
    if (m.readonly) line += " ro";
    if (m.optional) line += " (if on the host)";
    if (m.if_target) line += " (if in the image)";
    line += " [" + m.why + "]";
    out.push_back(line);
  }
  out.push_back("working directory `" + p.cwd + "`" + (p.cwd_explicit ? "" : " (falls back to /)"));
  return out;
}

}  // namespace rt::run
