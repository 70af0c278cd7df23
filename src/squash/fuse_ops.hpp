// The FUSE operations that serve a SquashFS image (namespace, server side).
#pragma once
#include <sys/types.h>

extern "C" {
#include <squashfuse/ll.h>
}

namespace rt::squash {

// The operations, for fuse_session_new with `ll` as userdata. Requests may
// come from several threads. Set up once per process. Every entry shows
// `owner` and `group` (the mount's user) as its owner. `source`, when
// given, is asked for each data block before it is read (a lazy file).
class Source;
fuse_lowlevel_ops server_ops(sqfs_ll* ll, uid_t owner, gid_t group, Source* source = nullptr);

// The session is mounted; called before any request is served (pages are
// pushed through its device once INIT says the kernel takes them).
void serving(fuse_session* se);

}  // namespace rt::squash
