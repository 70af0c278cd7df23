// Entering the user + mount namespace (host -> namespace).
#pragma once
#include <sys/types.h>

namespace rt::run {

// unshare(CLONE_NEWUSER | CLONE_NEWNS) in the calling process, then map
// exactly one id each way: outer -> inner. No helper, no setuid: an
// unprivileged process may write a one-line map of its own ids after
// denying setgroups (user_namespaces(7), "Defining user and group ID mappings").
void enter_user_namespace(uid_t outer_uid, uid_t inner_uid, gid_t outer_gid, gid_t inner_gid);

// unshare(CLONE_NEWUSER) below the current user namespace, mapping the
// caller's ids (uid, gid there) to themselves: the caller keeps its ids
// and loses every capability over the namespaces it is in.
void enter_nested_user_namespace(uid_t uid, gid_t gid);

}  // namespace rt::run
