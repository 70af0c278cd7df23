// Locating an image (host).
#include "run/image.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>

#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "squash/lazy.hpp"
#include "squash/sqfs.hpp"
#include "store/lookup.hpp"
#include "store/root.hpp"
#include "store/site.hpp"
#include "store/staged.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace rt::run {
namespace {

bool is_dir_at(const std::string& path) { return util::is_directory(path); }

bool looks_like_rootfs(const std::string& dir) {
  for (const char* entry : {"/bin", "/usr", "/etc"}) {
    struct stat st;
    // lstat: a root filesystem may well have bin -> usr/bin.
    if (::lstat((dir + entry).c_str(), &st) == 0) return true;
  }
  return false;
}

}  // namespace

namespace {

[[noreturn]] void not_found(const std::string& ref, const std::string& shown_path, const store::Root* root,
                            const std::string& storage) {
  const std::vector<std::string> similar = root ? store::similar_images(*root, ref) : std::vector<std::string>{};
  std::string hint = "rt pull " + ref + " from a registry, or rt import FILE " + ref;
  if (!similar.empty()) {
    std::string list;
    for (size_t i = 0; i < similar.size() && i < 5; ++i) list += (i ? ", " : "") + similar[i];
    hint = "the store has " + list + ": name one of them, with its tag";
  }
  std::string site;
  for (const auto& dir : hpc::load_site_config().get("store.site"))
    site += (site.empty() ? "" : ", ") + ("`" + dir + "`");
  throw ImageNotFound(ref, !similar.empty(),
                      "image `" + ref + "` not found: " + (shown_path.empty() ? "" : "no `" + shown_path + "`, and ") +
                          "no image of that name in store `" + (root ? root->path() : store::store_path(storage)) +
                          "`" + (site.empty() ? "" : " nor in the site store " + site),
                      hint);
}

// The Slurm job of this process, "" outside one.
const std::string& slurm_job() {
  static const std::string job = store::slurm_place().job;
  return job;
}

// This node's staged copy for the Slurm job, if any.
std::optional<std::string> staged_copy(const store::Root* root, const std::string& key, const char* ext) {
  if (slurm_job().empty() || !root) return std::nullopt;
  return store::find_staged(*root, slurm_job(), key, ext);
}
// ... of an image staged by name: a SquashFS file, or a SIF file (a site
// store's stays one).
std::optional<std::string> staged_copy(const store::Root* root, const std::string& key) {
  if (auto copy = staged_copy(root, key, "sqfs")) return copy;
  return staged_copy(root, key, "sif");
}

// The key and place of a reference image in a step over several nodes;
// empty key when the image is none or the step is not one.
struct StepImage {
  store::SlurmPlace where;
  std::string key;
};
StepImage step_image(const ExecOptions& o) {
  StepImage s;
  // oras:// is read by range into each node's cache: nothing to send.
  if (o.image.starts_with("instance://") || o.image.starts_with("oras://") ||
      store::name_kind(o.image) != store::NameKind::Reference)
    return s;
  s.where = store::slurm_place();
  if (s.where.nodes < 2 || s.where.node < 0) return s;
  s.key = store::staged_key_for_name(store::without_scheme(o.image));
  return s;
}

}  // namespace

Image open_image(const std::string& given, const std::string& cwd, const std::string& storage, bool any_directory) {
  if (given.empty()) throw Error("no image given");
  Image img;
  img.name = given;
  if (given.starts_with("oras://")) {
    const store::Root* root = store::Root::user_if_exists(storage);
    if (auto e = root ? squash::find_lazy_entry(*root, given) : std::nullopt) {
      img.rootfs = e->dir + "/" + squash::lazy::kFile;
      img.squashfs = img.sif = true;
      img.lazy = !e->complete;
      return img;
    }
    throw ImageNotFound(given, false,
                        "image `" + given + "` is not in the node cache of store `" +
                            (root ? root->path() : store::store_path(storage)) + "`",
                        "rt exec fetches it, or rt pull " + given + " FILE.sif");
  }
  const store::NameKind taken = store::name_kind(given);
  const std::string ref = store::without_scheme(given);
  std::string path = util::normalize_path(ref, cwd);
  // A file the job staged by this path (rt stage FILE): its copy on this
  // node, found with no call on the (shared) file system the file lies on.
  if (taken == store::NameKind::Path && !slurm_job().empty())
    if (const store::Root* r = store::Root::user_if_exists(storage)) {
      std::string ext;
      if (auto copy = store::find_staged_by_path(*r, slurm_job(), path, &ext)) {
        img.path = path;
        img.rootfs = *copy;
        img.squashfs = img.staged = true;
        img.sif = ext == "sif";
        return img;
      }
    }
  struct stat st;
  bool from_path = false;
  if (taken != store::NameKind::Reference) {
    if (::stat(path.c_str(), &st) == 0)
      from_path = true;
    else if (errno != ENOENT)
      throw SysError(errno, "stat", path);
    else if (taken == store::NameKind::Path)
      throw Error("image `" + given + "`: no file or directory `" + path + "`");
  }
  const store::Root* root = nullptr;
  std::optional<std::string> stored;
  if (!from_path || taken == store::NameKind::Either) {
    root = store::Root::user_if_exists(storage);
    stored = root ? store::find_image(*root, ref) : std::nullopt;
  }
  if (stored) {
    if (from_path)
      util::warn("image `" + given + "`: using the stored image of that name, not the path `" + path +
                 "` (write ./" + ref + " for the path)");
    from_path = false;
    path = *stored;
    if (::stat(path.c_str(), &st) != 0) throw SysError{errno, "stat", path};
  } else if (!from_path && !slurm_job().empty() && (stored = staged_copy(root, store::staged_key_for_name(ref)))) {
    // Staged on this node for the job (rt stage, or a step's first node).
    img.rootfs = *stored;
    img.squashfs = true;
    img.sif = stored->ends_with(".sif");
    return img;
  } else if (auto site = from_path ? std::nullopt : open_site_image(given, storage)) {
    // The site's store, after the user's own.
    return *site;
  } else if (!from_path) {
    // A bare name is never a path; a file of the caller's by that name is
    // what they most likely meant, so say so rather than pull.
    struct stat here;
    if (taken == store::NameKind::Reference && given.find('/') == std::string::npos &&
        ::lstat(path.c_str(), &here) == 0) {
      if (here.st_uid == ::getuid())
        throw Error("image `" + given + "` is not in store `" + (root ? root->path() : store::store_path(storage)) +
                        "`; a bare name is never a path",
                    "write ./" + given + " to run the " + (S_ISDIR(here.st_mode) ? "directory" : "file") + " here");
      util::warn("image `" + given + "`: `" + path + "` (owner uid " + std::to_string(here.st_uid) +
                 ") is not used: a bare name names an image, never a path");
    }
    not_found(ref, taken == store::NameKind::Either ? path : "", root, storage);
  } else {
    img.path = path;
  }
  if (S_ISREG(st.st_mode)) {
    img.squashfs = true;
    // A copy on this node's disk, staged for the job, is read instead: the
    // file itself (on a shared file system, every rank's open a request to
    // its metadata server) is not opened at all.
    if (!img.path.empty() && !slurm_job().empty()) {
      const store::Root* r = store::Root::user_if_exists(storage);
      const std::string key = store::staged_key_for_file(path, st);
      for (const char* ext : {"sqfs", "sif"})
        if (auto staged = staged_copy(r, key, ext)) {
          img.rootfs = *staged;
          img.sif = std::string_view(ext) == "sif";
          img.staged = true;
          return img;
        }
    }
    const squash::FileKind kind = squash::file_kind(path);
    if (kind == squash::FileKind::Other)
      throw Error("image `" + ref + "`: `" + path + "` is neither a directory, a SquashFS file nor a SIF file");
    img.rootfs = path;
    img.sif = kind == squash::FileKind::Sif;
    return img;
  }
  if (!S_ISDIR(st.st_mode)) throw Error("image `" + ref + "`: `" + path + "` is not a directory");

  // A store image kept as one SquashFS file (--format sqfs).
  if (std::string file = path + "/" + store::kSquashFile;
      !util::is_directory(path + "/" + kBundleRootfs) && util::path_exists(file) && squash::is_squashfs(file)) {
    img.rootfs = file;
    img.squashfs = true;
    return img;
  }
  std::string bundle_rootfs = path + "/" + kBundleRootfs;
  std::string bundle_config = path + "/" + kBundleConfig;
  if (auto text = util::read_regular_if_exists(bundle_config)) {
    if (!is_dir_at(bundle_rootfs))
      throw Error("image `" + ref + "`: has `" + kBundleConfig + "` but no `" + kBundleRootfs + "/` directory");
    img.rootfs = bundle_rootfs;
    img.config = parse_image_config(*text, bundle_config);
    return img;
  }
  if (!any_directory && !looks_like_rootfs(path)) {
    if (is_dir_at(bundle_rootfs) && looks_like_rootfs(bundle_rootfs)) {
      img.rootfs = bundle_rootfs;
      return img;
    }
    throw Error("image `" + ref + "`: `" + path + "` is not a root filesystem (it has no bin, usr or etc)");
  }
  img.rootfs = path;
  return img;
}

std::optional<store::SiteImage> find_site_image(const std::string& name) {
  const std::vector<std::string> dirs = hpc::load_site_config().get("store.site");
  if (dirs.empty()) return std::nullopt;
  return store::find_site_image(dirs, store::without_scheme(name));
}

std::optional<Image> open_site_image(const std::string& name, const std::string& storage) {
  auto site = find_site_image(name);
  if (!site) return std::nullopt;
  Image img;
  img.name = name;
  img.rootfs = store::verify_site_image(store::Root::user(storage), *site);
  const squash::FileKind kind = squash::file_kind(img.rootfs);
  if (kind != (site->format == "sif" ? squash::FileKind::Sif : squash::FileKind::Squashfs))
    throw Error("site image `" + site->name + "`: `" + img.rootfs + "` is not a " +
                (site->format == "sif" ? "SIF" : "SquashFS") + " file, as the index `" + site->index() + "` says");
  util::info("image `" + name + "`: `" + img.rootfs + "` of the site store `" + site->dir + "`");
  img.squashfs = true;
  img.sif = kind == squash::FileKind::Sif;
  return img;
}

void warn_if_foreign(const Image& image) {
  if (image.path.empty() || image.staged) return;  // a staged copy is the user's, on this node
  if (std::string why = store::foreign_path(image.path); !why.empty())
    util::warn("image `" + image.name + "`: " + why + "; another user may have placed or changed it");
}

}  // namespace rt::run

namespace rt {

bool step_image_to_send(const ExecOptions& o) {
  const run::StepImage s = run::step_image(o);
  if (s.key.empty()) return false;
  const store::Root& root = store::Root::user(o.storage);
  root.dir(store::staged_dir(s.where.job), true);  // sbcast writes into it
  return s.where.node == 0 && !store::staged_sent(root, s.where, s.key);
}

bool wait_for_step_image(const ExecOptions& o) {
  const run::StepImage s = run::step_image(o);
  if (s.key.empty() || s.where.node == 0) return false;
  int timeout = 600;
  if (const char* t = std::getenv("RT_STAGE_TIMEOUT"); t && std::atoi(t) > 0) timeout = std::atoi(t);
  store::wait_staged(store::Root::user(o.storage), s.where, s.key, "sqfs", o.image, timeout);
  return true;
}

}  // namespace rt

namespace rt {

bool stored_image(const std::string& name, const std::string& storage) {
  const store::Root* root = store::Root::user_if_exists(storage);
  return (root && store::find_image(*root, name).has_value()) || run::find_site_image(name).has_value();
}

}  // namespace rt
