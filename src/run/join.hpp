// One container per node (host -> namespace): the ranks of one launch on
// one node share a user + mount namespace, so shared memory, single-copy
// transfers (CMA, process_vm_readv) and /proc/PID/fd opens work between them.
//
// The first rank forks a holder, detached from it, that enters a new user +
// mount namespace, builds the tree (and serves a SquashFS image), then
// listens on an abstract unix socket named after the key. Every rank, the
// first included, connects, gets the namespaces' fds (SCM_RIGHTS), enters
// them with setns(2) and execs in place. The holder watches each rank
// through a pidfd and exits when the expected ranks have come and every
// process of the container is gone. Nothing is written to any filesystem:
// a crashed rank or holder leaves nothing behind, and a rank that finds no
// live holder simply starts one.
#pragma once
#include <functional>
#include <string>

#include "hpc/launcher.hpp"
#include "run/holder.hpp"
#include "run/plan.hpp"

namespace rt::run {

// The socket name: the uid, the launch (the launcher's job step; under
// Hydra, which names none, the hydra_pmi_proxy above; else the parent
// process) and a hash of everything the plan mounts, so ranks that would
// build different trees never share one. Wrapper shells between the
// launcher and rt do not split a launch.
// Keyed with the user's `secret` (run/holder.hpp).
HolderKey join_key(const MountPlan& plan, const hpc::Launcher& launcher, const std::string& secret);

// Enters the shared container for `key`, starting a holder that runs
// `build` when none is serving. `build` runs in the holder, must enter the
// namespaces and build the tree; its rt::Error is reported by the rank that
// started the holder. `expected` is the number of ranks on this node (0:
// unknown). Returns inside the container, at its root; the caller must be
// single-threaded (setns(2) into a user namespace). False, with nothing
// entered, when other users hold every name of the key: the caller runs
// unshared. `image` (its path) names the holder's process (rt-join IMAGE).
bool join_container(const HolderKey& key, int expected, const std::string& image, const std::function<void()>& build);

}  // namespace rt::run
