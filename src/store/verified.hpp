// The store's record of files rt checked once and need not check again
// (host). Light: the per-rank path reads it.
//
//   ROOT/verified/NAME   NAME = keyed_hash(secret, identity): a regular file
//                        of the caller's; its text says what was checked
//
// The identity holds the file's device, inode, size and times of change
// (file_identity) and whatever else the check depended on (the keys a SIF
// file verified with, the digest a site image matched), so a file changed
// since, or a check against something else, finds no record.
#pragma once
#include <sys/stat.h>

#include <string>
#include <string_view>

#include "store/root.hpp"

namespace rt::store {

// "dev:ino:size:mtime:ctime" (nanoseconds): ctime moves with every write,
// chmod or rename, and no program can set it back.
std::string file_identity(const struct stat& st);

// Whether `root` holds a record of `identity`.
bool is_verified(const Root& root, std::string_view identity);

// Records `identity` (with `note` as its text). A cache: where it cannot be
// written, the next start checks again.
void remember_verified(const Root& root, std::string_view identity, std::string_view note);

}  // namespace rt::store
