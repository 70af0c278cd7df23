// The server of a SquashFS image (host -> namespace): one per image, user
// and id mapping on a node, shared by every container of that image.
//
// The first `rt exec` of an image starts a holder (run/holder.hpp) that
// enters a user namespace, mounts the image through /dev/fuse and serves it
// from its own threads. Each container then enters that user namespace,
// makes a mount namespace of its own there, gets from the server a
// detached copy of the image's mount and builds its own tree around it,
// exactly as for a directory image; the program is exec'd in place.
//
// Sharing the mount is what makes the kernel's caches work across
// containers: the decompressed pages and the looked-up names stay in memory
// while the server lives, so the next start reads nothing through FUSE.
// The server serves until no process of any of its containers is left
// (daemons included), then waits the linger time for the next container.
#pragma once
#include <chrono>
#include <functional>

#include "run/holder.hpp"
#include "run/plan.hpp"
#include "squash/sqfs.hpp"
#include "util/fd.hpp"

namespace rt::run {

// The linger time: RT_SQUASHFS_LINGER (seconds), else the site
// configuration's squashfs.linger, else 30 s. Read when a server starts.
std::chrono::milliseconds squashfs_linger();

// Enters the server's user namespace and a new copy of this process's
// mount namespace owned by it, starting the server when none runs, and
// returns the image as a detached mount from the server (for build_tree;
// before Linux 5.2, mounted in that copy). plan.rootfs is the file, plan.staging
// the directory the server mounts it on; `image` opens it, called only by a
// server that starts (in the server's process). The server's socket name
// is keyed with the user's `secret`; when other users hold every name of
// it, a server of this container's own is started. Single-threaded callers
// only.
HeldTree attach_squashfs(const std::function<squash::Image&()>& image, const MountPlan& plan,
                         const std::string& secret);

}  // namespace rt::run
