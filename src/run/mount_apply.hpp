// Applying a mount plan and entering the new root (namespace -> container root).
#pragma once
#include <functional>
#include <string>

#include "run/plan.hpp"

namespace rt::run {

// Must run inside the new user + mount namespace. Builds the container's
// mount tree around plan.rootfs without writing to the image (missing mount
// points are made on a tmpfs "underlay"), pivots into it and changes to the
// planned working directory. Throws SysError naming the mount.
// mount_image, when given, mounts the image at the directory it is handed
// (a SquashFS served over FUSE) and returns in a forked child; building
// continues there, in a mount namespace of its own.
void apply_plan(const MountPlan& plan, const std::function<void(const std::string&)>& mount_image = {});

// apply_plan in two steps: the tree and the pivot (left at "/"), then the
// working directory (a rank joining a shared container does only this).
void build_tree(const MountPlan& plan, const std::function<void(const std::string&)>& mount_image = {});
void enter_cwd(const MountPlan& plan);

} // namespace rt::run
