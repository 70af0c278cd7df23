// The holder of a writable --overlay directory (host -> namespace): the
// overlay stays mounted between containers, as a SquashFS image's server
// keeps its image.
//
// A container's own overlay mount costs its start the mount (overlayfs
// makes and checks its work directory each time), lookups through a cold
// overlay for every mount point, and the unmount at its end. Instead, the
// first `rt exec --overlay DIR` of a directory image starts a holder
// (run/holder.hpp) that takes DIR's lock in its own name ("held"), enters
// a user namespace, mounts the overlay once and hands each container a
// detached copy of it, which becomes that container's root. One container
// at a time: the holder refuses another while one lives, naming it, as the
// lock does. Once the last container (and every process it left) is gone,
// the holder waits overlay_linger() for the next, then unmounts and lets
// the lock go.
//
// Only for the plain case: a directory image, directory layers, one of
// them writable, no instance or shared container (they hold their own
// mounts for their lifetime), and a linger above 0. Elsewhere, and where
// the kernel refuses the overlay, each container mounts its own
// (run/mount_apply, run/overlay_image).
#pragma once
#include "run/holder.hpp"
#include "run/plan.hpp"
#include "util/fd.hpp"

namespace rt::run {

// Whether `plan`'s overlays can be held (above).
bool overlay_holdable(const MountPlan& plan);

// Enters the holder's user namespace and a new copy of this process's
// mount namespace owned by it, starting the holder when none serves, and
// returns the image under its overlays as a detached mount (for
// build_tree). Empty, having entered nothing and with the writable
// directory locked by this process, where no holder can serve (the kernel
// refuses the overlay, other users hold every socket name): the caller
// mounts its own. Throws rt::Error when the overlay is in use.
HeldTree attach_overlay(const MountPlan& plan, const std::string& secret);

}  // namespace rt::run
