// An image's root filesystem as `rt exec` uses it, a directory or a
// SquashFS file alike (host -> namespace): what is read of it on the host
// (for the plan and the injection checks), and how a container gets it.
//
// A directory is read through an O_PATH descriptor with in-root
// resolution (its symlinks cannot lead out). A SquashFS file is opened
// only when something must be read from inside it: what every run needs
// (its configuration, /etc/passwd, /etc/group) comes from the store's copy
// (run/sqfs_facts), and containers get the image from its server
// (run/image_server).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "hpc/inject.hpp"
#include "run/image.hpp"
#include "run/plan.hpp"

namespace rt::run {

class ImageRoot : public hpc::ImageView {
public:
  // Locates IMAGE (run/image.hpp) and opens what every run needs of it;
  // `storage` is --storage (empty: the default store); `any_directory`:
  // ExecOptions::any_directory. Throws rt::Error.
  static std::unique_ptr<ImageRoot> open(const std::string& ref, const std::string& cwd, const std::string& storage,
                                         bool any_directory = false);
  // ... an image open_image (or open_site_image) located.
  static std::unique_ptr<ImageRoot> open(Image image, const std::string& storage);

  const std::string& name() const override { return image_.name; }
  const Image& image() const { return image_; }
  const ImageConfig* config() const { return image_.config ? &*image_.config : nullptr; }
  virtual bool has(const std::string& path) const = 0;
  // The image's /etc/passwd and /etc/group ("" when it has none).
  virtual std::string passwd() const = 0;
  virtual std::string group() const = 0;
  // Apptainer's files in the image (/.singularity.d).
  virtual ApptainerFiles apptainer() const = 0;
  // Where a SIF file's ext3 overlay partition starts; -1 for none.
  virtual int64_t sif_overlay() const { return -1; }
  // The host directory the staging tmpfs covers ("": the root filesystem).
  virtual std::string staging() const = 0;
  // Lets go of what was opened on the host (before a holder could keep it).
  virtual void close() = 0;
  // Namespace: enters a user + mount namespace and builds the tree of
  // `plan` there; a SquashFS image through its server, whose socket name
  // is keyed with `secret()` (the user's).
  virtual void build(const MountPlan& plan, const std::function<const std::string&()>& secret) const = 0;

protected:
  explicit ImageRoot(Image image) : image_(std::move(image)) {}
  Image image_;
};

}  // namespace rt::run
