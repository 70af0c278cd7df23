// Applying a mount plan and entering the new root (namespace -> container root).
#pragma once
#include "run/plan.hpp"

namespace rt::run {

// Must run inside the new user + mount namespace. Builds the container's
// mount tree around plan.rootfs without writing to the image (missing mount
// points are made on a tmpfs "underlay"), pivots into it and changes to the
// planned working directory. Throws SysError naming the mount.
void apply_plan(const MountPlan& plan);

} // namespace rt::run
