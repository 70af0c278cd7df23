// The FUSE operations that serve a SquashFS image (namespace, server side).
#pragma once
extern "C" {
#include <squashfuse/ll.h>
}

namespace rt::squash {

// The operations, for fuse_session_new with `ll` as userdata. Requests may
// come from several threads. Set up once per process.
fuse_lowlevel_ops server_ops(sqfs_ll* ll);

// The session is mounted; called before any request is served (pages are
// pushed through its device once INIT says the kernel takes them).
void serving(fuse_session* se);

}  // namespace rt::squash
