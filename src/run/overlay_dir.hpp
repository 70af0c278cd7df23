// Persistent --overlay directories (host, before the namespaces): each
// checked to be the user's alone, the writable one given its upper/ and
// work/ and locked while a container uses it.
//
// The lock is a directory, DIR/.rt-lock, made with mkdir (atomic on every
// file system rt's users keep overlays on, NFS, Lustre and GPFS included,
// where flock may be local to a node or absent), holding `holder`: the
// host, the pid and that process's start time. rt execs into the
// container's program, so the lock is never removed at exit: it is stale
// once that process is gone, which only its own host can tell. A lock of
// another host is therefore an error that names the holder.
#pragma once
#include <string>
#include <vector>

#include "run/plan.hpp"

namespace rt::run {

// Throws rt::Error naming the directory (and, when locked, the holder).
void prepare_overlays(const std::vector<OverlayLayer>& layers);

// The lock's holder line for this process: "HOST PID STARTTIME".
std::string overlay_holder_line();

}  // namespace rt::run
