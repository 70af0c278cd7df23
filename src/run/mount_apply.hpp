// Applying a mount plan and entering the new root (namespace -> container root).
#pragma once
#include <string>

#include "run/holder.hpp"
#include "run/plan.hpp"

namespace rt::run {

// Must run inside the new user + mount namespace. Builds the container's
// mount tree around plan.rootfs without writing to the image (missing mount
// points are made on a tmpfs "underlay") and enters it, leaving the
// caller at "/". Throws SysError naming the mount. `image_tree`, when given,
// is the image as its holder handed it over (a SquashFS image from its
// server), used instead of plan.rootfs; `overlays_in_tree`: it is the image
// under its overlays already (run/overlay_server), the root as it comes.
void build_tree(const MountPlan& plan, const HeldTree* image_tree = nullptr, bool overlays_in_tree = false);
// Then the planned working directory (all a rank joining a shared
// container does).
void enter_cwd(const MountPlan& plan);

}  // namespace rt::run
