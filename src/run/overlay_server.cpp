// The holder of a writable --overlay directory; see overlay_server.hpp.
#include "run/overlay_server.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "rt/error.hpp"
#include "run/holder.hpp"
#include "run/overlay_dir.hpp"
#include "run/userns.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace rt::run {
namespace {

// The start of a holder's error when the kernel refused the overlay.
constexpr const char kRefused[] = "overlayfs refused the overlay: ";

const OverlayLayer* writable_layer(const MountPlan& plan) {
  for (const auto& l : plan.overlays)
    if (l.writable) return &l;
  return nullptr;
}

}  // namespace

bool overlay_holdable(const MountPlan& plan) {
  if (plan.squashfs || plan.root_mode != RootMode::Overlay || plan.overlays_read_only || !writable_layer(plan))
    return false;
  for (const auto& l : plan.overlays)
    if (l.fuse()) return false;
  return overlay_linger().count() > 0;
}

HeldTree attach_overlay(const MountPlan& plan, const std::string& secret) {
  const OverlayLayer& kept = *writable_layer(plan);
  // One holder per image version, layers and id mapping: another image
  // over the same directory waits for this one's holder to go (the lock).
  struct stat st;
  if (::stat(plan.rootfs.c_str(), &st) != 0) throw SysError{errno, "stat", plan.rootfs};
  std::string lower;  // the read-only layers above the image, each with ":"
  std::string text = std::string("overlay") + '\0' + plan.rootfs + '\0' + util::file_stamp(st) + '\0' +
                     std::to_string(plan.outer_uid) + ':' + std::to_string(plan.inner_uid) + ':' +
                     std::to_string(plan.outer_gid) + ':' + std::to_string(plan.inner_gid);
  for (const auto& l : plan.overlays) {
    text += std::string(1, '\0') + (l.writable ? "w " : "r ") + l.path;
    if (!l.writable) lower = overlay_read_dir(l.path) + ":" + lower;  // the last given on top
  }
  HolderKey key{"rt-ovl", secret, text};
  HolderPolicy policy;
  policy.entry = HolderPolicy::Entry::Tree;
  policy.tree = plan.rootfs;  // covered in the holder's namespace only
  policy.what = "the holder of overlay `" + kept.path + "`";
  policy.comm = "rt-ovl";
  policy.title = "rt-ovl " + kept.path;
  policy.exclusive = true;
  policy.leave_when_asked = true;
  policy.busy = "overlay `" + kept.path + "` is in use by process";
  policy.hint = "one container at a time may write an overlay; give it as " + kept.path + ":ro to read it meanwhile";
  std::chrono::milliseconds linger{0};
  policy.linger = [&linger](int) { return linger; };
  policy.at_exit = [&] {
    ::umount2(plan.rootfs.c_str(), 0);  // synced while the lock still names this process
    release_overlay_lock(kept);
  };
  auto build = [&] {
    linger = overlay_linger();
    lock_overlay(kept, /*held=*/true);
    try {
      enter_user_namespace(plan.outer_uid, plan.inner_uid, plan.outer_gid, plan.inner_gid);
      // The image by its descriptor: its path may hold what overlayfs's
      // options cannot (the layers' paths were refused for it).
      const util::UniqueFd image = util::open_fd(plan.rootfs, O_PATH | O_DIRECTORY);
      // userxattr (Linux 5.11) is what makes an unprivileged overlay mount possible.
      const std::string opts = "lowerdir=" + lower + "/proc/self/fd/" + std::to_string(image.get()) +
                               ",upperdir=" + kept.path + "/upper,workdir=" + kept.path + "/work,userxattr";
      if (::mount("overlay", plan.rootfs.c_str(), "overlay", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
        throw Error(kRefused + std::string(std::strerror(errno)));
    } catch (...) {
      release_overlay_lock(kept);
      throw;
    }
  };
  HeldTree tree;
  try {
    if (enter_holder(key, policy, build, &tree)) return tree;
    util::info("other users hold the names of `" + kept.path + "`'s holder: mounting it for this container alone");
  } catch (const Error& e) {
    if (!std::string_view(e.what()).starts_with(kRefused)) throw;
    util::debug(std::string(e.what()) + ": mounted by this container");
  }
  lock_overlay(kept, /*held=*/false);  // by this process, which becomes the program
  return {};
}

}  // namespace rt::run
