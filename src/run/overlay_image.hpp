// Overlays the kernel's overlayfs cannot mount (namespace, before the root
// is built): ext3 overlay images, and directories on file systems it
// refuses as a layer.
//
// An overlay image is an ext3 file holding upper/ and work/ (Apptainer's
// format: `rt overlay create`, `apptainer overlay create`). fuse2fs serves
// it without privilege; the kernel's overlayfs will not take a FUSE file
// system as its upper layer, so the container's root is then
// fuse-overlayfs's, as Apptainer makes it without setuid.
//
// Both programs run in a mount namespace of their own, beside the
// container's, under a keeper process that is no child of the container's
// program (one that waits for any child would wait for them). The keeper
// mounts them, hands the merged tree to the container as a detached mount
// (through a socket) and keeps no mount of theirs: when the container's
// mount namespace ends, fuse-overlayfs finds its file system gone and
// exits, which releases the images; each fuse2fs then writes its image
// out and exits, and the keeper releases the overlay's lock (which it
// holds from the start: the writes are the image's only once it ends).
// Before Linux 5.2 (no open_tree) the keeper mounts the merged tree in the
// container's namespace itself, before it leaves it, and fuse-overlayfs
// serves that mount through the /dev/fuse descriptor it is given.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "run/holder.hpp"
#include "run/plan.hpp"
#include "util/fd.hpp"

namespace rt::run {

// Whether `path` is an ext2/3/4 file system image: a regular file whose
// superblock has the ext magic.
bool is_ext_image(const std::string& path);

// Where the SquashFS file system of `path` starts: 0 for a SquashFS file,
// the primary partition's offset for a SIF file; -1 for anything else.
// Throws rt::Error for a SIF file without a SquashFS partition.
int64_t squash_offset(const std::string& path);

// A program of the system's (host, before the namespaces, where owners
// are known): in /usr/bin, /bin, /usr/sbin, /sbin, then on PATH; only a
// file that no one but root or the user can change, since it will hold
// the user's overlay in its hands. "" when there is none.
std::string find_system_program(const std::string& name);

// Marks the plan's overlays that are images and finds the programs they
// need (host, after build_plan, which stays pure). Throws rt::Error for an
// image with an id other than the user's inside (--uid, --root).
void find_overlay_programs(MountPlan& plan);

struct FuseRootRequest {
  int image = -1;                       // the image's root directory (any fd that names it)
  std::string staging;                  // the staging tmpfs's path (its fd's /proc path will do)
  std::vector<OverlayLayer> layers;     // as in the plan: read-only ones stack, the writable one takes the writes
  std::string shown;                    // the image, for messages
  std::string fuse2fs, fuse_overlayfs, squashfuse;  // the programs (find_system_program), "" when missing
  bool read_only = false;  // no upper layer: the tree is read-only
};

// The container's root: fuse-overlayfs over the image and the layers
// (writes to the writable layer's upper/, else to the staging tmpfs's
// upper/ and work/, which the caller made), as a detached mount, or
// before Linux 5.2 (no open_tree) mounted on the staging tmpfs's f/m in
// the caller's namespace (`attached`). Throws rt::Error with the
// programs' own messages.
HeldTree fuse_root(const FuseRootRequest& request);

}  // namespace rt::run
