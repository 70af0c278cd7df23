// Entering the user + mount namespace (host -> namespace).
#pragma once
#include <sys/types.h>

namespace rt::run {

// unshare(CLONE_NEWUSER | CLONE_NEWNS) in the calling process, then map
// exactly one id each way: outer -> inner. No helper, no setuid: an
// unprivileged process may write a one-line map of its own ids after
// denying setgroups (user_namespaces(7), "Defining user and group ID mappings").
void enter_user_namespace(uid_t outer_uid, uid_t inner_uid, gid_t outer_gid, gid_t inner_gid);

} // namespace rt::run
