// An image's root filesystem, a directory or a SquashFS file (host ->
// namespace); see image_root.hpp.
#include "run/image_root.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include "rt/error.hpp"
#include "run/image_server.hpp"
#include "run/mount_apply.hpp"
#include "run/overlay_server.hpp"
#include "run/sqfs_facts.hpp"
#include "run/userns.hpp"
#include "squash/sif.hpp"
#include "squash/sqfs.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/inroot.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::run {
namespace {

constexpr size_t kEtcLimit = 1 << 22;

class DirectoryRoot final : public ImageRoot {
public:
  explicit DirectoryRoot(Image image)
      : ImageRoot(std::move(image)), root_(util::open_fd(image_.rootfs, O_PATH | O_DIRECTORY)) {}

  std::optional<std::string> read(const std::string& path, size_t limit) const override {
    auto r = util::open_in_root(root_.get(), path, O_RDONLY | O_NONBLOCK);
    if (!r.fd) return std::nullopt;
    return util::read_regular_fd(r.fd.get(), image_.name + ":" + path, limit);
  }
  std::vector<std::string> list(const std::string& dir) const override {
    auto r = util::open_in_root(root_.get(), dir, O_RDONLY | O_DIRECTORY);
    if (!r.fd) return {};
    return util::list_names(r.fd.get(), dir);
  }
  std::string stamp(const std::string& path) const override {
    struct stat st;
    auto r = util::open_in_root(root_.get(), path, O_PATH);
    if (!r.fd || ::fstat(r.fd.get(), &st) != 0) return "";
    return util::file_stamp(st);
  }
  bool has(const std::string& path) const override {
    return !path.empty() && static_cast<bool>(util::open_in_root(root_.get(), path, O_PATH).fd);
  }
  std::string passwd() const override { return read("/etc/passwd", kEtcLimit).value_or(""); }
  std::string group() const override { return read("/etc/group", kEtcLimit).value_or(""); }
  ApptainerFiles apptainer() const override { return apptainer_files(*this); }
  std::string staging() const override { return ""; }
  void close() override { root_.reset(); }
  void build(const MountPlan& plan, const std::function<const std::string&()>& secret) const override {
    if (plan.overlays_held) {
      if (HeldTree tree = attach_overlay(plan, secret())) {
        util::timing("overlay holder");
        build_tree(plan, &tree, /*overlays_in_tree=*/true);
        return;
      }
    }
    enter_user_namespace(plan.outer_uid, plan.inner_uid, plan.outer_gid, plan.inner_gid);
    util::timing("user namespace");
    build_tree(plan);
  }

private:
  util::UniqueFd root_;
};

class SquashRoot final : public ImageRoot {
public:
  SquashRoot(Image image, const std::string& storage) : ImageRoot(std::move(image)) {
    // The staging tmpfs needs a host directory to cover: rt's own, in the store.
    const store::Root& store = store::Root::user(storage);
    store.dir(store::kMountDir, true);
    staging_ = store.sub(store::kMountDir);
    facts_ = squash_facts(image_.rootfs, store.dir(store::kSqfsFactsDir, true).get(),
                          [this]() -> squash::Image& { return opened(); });
    if (facts_.config) image_.config = parse_image_config(*facts_.config, image_.rootfs + ":" + squash::kConfigPath);
    if (image_.sif && util::log_enabled(util::Level::Info)) note_signatures();
  }

  std::optional<std::string> read(const std::string& path, size_t limit) const override {
    return opened().read_file(path, limit);
  }
  std::vector<std::string> list(const std::string& dir) const override { return opened().list(dir); }
  std::string stamp(const std::string& path) const override {
    struct stat st;
    if (!has(path) || ::stat(image_.rootfs.c_str(), &st) != 0) return "";
    return util::file_stamp(st) + ":" + image_.rootfs + ":" + path;
  }
  std::string identity() const override {
    struct stat st;
    return ::stat(image_.rootfs.c_str(), &st) == 0 ? util::file_stamp(st) + ":" + image_.rootfs : "";
  }
  bool has(const std::string& path) const override { return !path.empty() && opened().has(path); }
  std::string passwd() const override { return facts_.passwd.value_or(""); }
  std::string group() const override { return facts_.group.value_or(""); }
  ApptainerFiles apptainer() const override { return facts_.apptainer; }
  int64_t sif_overlay() const override {
    return facts_.sif_overlay ? std::strtoll(facts_.sif_overlay->c_str(), nullptr, 10) : -1;
  }
  std::string staging() const override { return staging_; }
  void close() override { opened_.reset(); }
  void build(const MountPlan& plan, const std::function<const std::string&()>& secret) const override {
    HeldTree tree = attach_squashfs([this]() -> squash::Image& { return opened(true); }, plan, secret());
    util::timing("image server");
    build_tree(plan, &tree);
  }

private:
  // -v: a signed SIF file runs, its signatures unchecked.
  void note_signatures() const {
    util::UniqueFd fd = util::open_fd(image_.rootfs, O_RDONLY);
    const size_t n = squash::read_sif(fd.get(), image_.rootfs).signatures();
    if (n)
      util::info("image `" + image_.rootfs + "` is signed (" + std::to_string(n) + " signature" + (n == 1 ? "" : "s") +
                 "), but rt exec does not verify SIF signatures (rt verify does): it runs unverified");
  }

  // Opened on first use only (a server that starts opens it for itself).
  // A server's lazy source gets ready to fetch (a process, a connection,
  // the registry's authentication) while the image is checked.
  squash::Image& opened(bool serving = false) const {
    if (!opened_) {
      std::unique_ptr<squash::LazySource> source;
      if (image_.lazy) source = std::make_unique<squash::LazySource>(util::dir_name(image_.rootfs));
      if (source && serving) source->serving();
      opened_ = std::make_unique<squash::Image>(image_.rootfs, std::move(source));
    }
    return *opened_;
  }
  mutable std::unique_ptr<squash::Image> opened_;
  SquashFacts facts_;
  std::string staging_;
};

}  // namespace

std::unique_ptr<ImageRoot> ImageRoot::open(const std::string& ref, const std::string& cwd, const std::string& storage,
                                           bool any_directory) {
  return open(open_image(ref, cwd, storage, any_directory), storage);
}

std::unique_ptr<ImageRoot> ImageRoot::open(Image image, const std::string& storage) {
  if (image.squashfs) return std::make_unique<SquashRoot>(std::move(image), storage);
  return std::make_unique<DirectoryRoot>(std::move(image));
}

}  // namespace rt::run
