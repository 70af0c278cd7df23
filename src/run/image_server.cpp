// The server of a SquashFS image (host -> namespace); see image_server.hpp.
#include "run/image_server.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "rt/error.hpp"
#include "run/holder.hpp"
#include "run/userns.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace rt::run {

std::chrono::milliseconds squashfs_linger() { return configured_linger("RT_SQUASHFS_LINGER", "squashfs.linger", 30); }

HeldTree attach_squashfs(const std::function<squash::Image&()>& image, const MountPlan& plan,
                         const std::string& secret) {
  // One server per file version, mount point and id mapping.
  struct stat st;
  if (::stat(plan.rootfs.c_str(), &st) != 0) throw SysError{errno, "stat", plan.rootfs};
  // "tree": servers that hand out a copy of their mount have names of their
  // own (an earlier rt's server handed out its mount namespace).
  std::string text = std::string("tree") + '\0' + plan.rootfs + '\0' + plan.staging + '\0' + util::file_stamp(st) +
                     '\0' + std::to_string(plan.outer_uid) + ':' + std::to_string(plan.inner_uid) + ':' +
                     std::to_string(plan.outer_gid) + ':' + std::to_string(plan.inner_gid);
  // Before Linux 5.2 a container's mount namespace is a copy of its
  // server's (run/holder.hpp): one server per mount namespace then, so that
  // a job's own mounts (Slurm's job_container/tmpfs: a private /tmp) are
  // never another's. One call per start finds out.
  if (!kernel_copies_mounts()) text += std::string(1, '\0') + mount_namespace_of("self");
  HolderKey key{"rt-sqfs", secret, text};
  HolderPolicy policy;
  policy.entry = HolderPolicy::Entry::Tree;
  policy.tree = plan.staging;
  policy.what = "the SquashFS server of `" + plan.rootfs + "`";
  policy.comm = "rt-sqfs";
  policy.title = "rt-sqfs " + plan.rootfs;
  // Read by the server only (every rank would pay for the site file).
  std::chrono::milliseconds linger{0};
  policy.linger = [&linger](int) { return linger; };
  policy.daemon_poll = std::chrono::milliseconds(500);
  auto serve = [&] {
    linger = squashfs_linger();
    enter_user_namespace(plan.outer_uid, plan.inner_uid, plan.outer_gid, plan.inner_gid);
    image().mount_in_background(plan.staging, plan.inner_uid, plan.inner_gid);
  };
  // The image comes as a detached copy of the server's mount, never
  // mounted in this container's namespace: a bind source that holds the
  // mount point (the home directory, with the store in it) cannot show it.
  HeldTree tree;
  if (!enter_holder(key, policy, serve, &tree)) {
    // Names nobody else has seen (keyed, like all): this process's own server.
    util::info("other users hold the server names of `" + plan.rootfs + "`: starting one for this container alone");
    key.text += std::string(1, '\0') + "private " + std::to_string(::getpid());
    if (!enter_holder(key, policy, serve, &tree)) throw Error("cannot start " + policy.what + ": every name is taken");
  }
  return tree;
}

}  // namespace rt::run
