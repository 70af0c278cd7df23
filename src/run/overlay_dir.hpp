// Persistent --overlay directories and images (host, before the
// namespaces): each checked to be the user's alone, the writable one given
// its upper/ and work/ (a directory's) and locked while a container uses it.
//
// The lock is a directory, DIR/.rt-lock, made with mkdir (atomic on every
// file system rt's users keep overlays on, NFS, Lustre and GPFS included,
// where flock may be local to a node or absent), holding `holder`: the
// host, the pid and that process's start time. rt execs into the
// container's program, so the lock is never removed at exit: it is stale
// once that process is gone, which only its own host can tell, and is then
// taken over in place (the holder renamed to a claim of the taker's, which
// only one taker can make, then replaced). A lock of another host is
// therefore an error that names the holder. A holder line may end in a
// state: "closing" (an image being written out after its container) or
// "held" (a directory's holder, run/overlay_server, which keeps it mounted
// for the next container a while).
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "run/plan.hpp"

namespace rt::run {

// Throws rt::Error naming the directory (and, when locked, the holder).
// An image file (layer.image) is checked the same way, and locked by
// .NAME.rt-lock beside it. `held`: the writable directory is locked by its
// holder (run/overlay_server), not here.
void prepare_overlays(const std::vector<OverlayLayer>& layers, bool held = false);

// The writable directory's lock, taken by this process: for a directory's
// holder (run/overlay_server), `held` (others ask it to go and wait), else
// as prepare_overlays takes it.
void lock_overlay(const OverlayLayer& layer, bool held);

// How long a directory's holder keeps it mounted after its container:
// RT_OVERLAY_LINGER (seconds), else the site's overlay.linger, else 10 s;
// 0: none, each container mounts its own.
std::chrono::milliseconds overlay_linger();

// A read-only directory layer as overlayfs reads it: DIR/upper where a
// writable use filled it (upper/ and work/ there), else DIR itself.
std::string overlay_read_dir(const std::string& dir);

// The lock's holder line for this process: "HOST PID STARTTIME".
std::string overlay_holder_line();

// For the process that keeps an image's file systems (run/overlay_image):
// the lock names it instead of the process that took it, and it removes
// the lock when the image is written out (only while it still names it).
// Between the two, "closing": the container is gone, the image is being
// written out (a next run waits for it rather than refusing).
void take_over_overlay_lock(const OverlayLayer& layer);
void closing_overlay_lock(const OverlayLayer& layer);
void release_overlay_lock(const OverlayLayer& layer);

}  // namespace rt::run
