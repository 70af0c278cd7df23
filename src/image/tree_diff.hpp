// Layers from a tree that changed (host): a snapshot of a directory
// tree's metadata, and the OCI layer (an uncompressed tar) of what changed
// since: new and changed entries with the directories above them, and
// whiteouts for what went. rt build makes one of each RUN, COPY and WORKDIR.
//
// A file changed when its inode, ctime, mtime, size or mode did (a write,
// a chmod, a rename over it, a new hard link all move the ctime, which no
// program can set); a directory when its mode or mtime did (its ctime
// moves with every entry made and removed, even when the entries come
// back). Entries are owned by root in the layer: a rootless tree has one
// owner. Device nodes and sockets are left out.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "image/file_attrs.hpp"

namespace rt::image {

struct TreeStat {
  unsigned mode = 0;  // st_mode: type and permissions
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t ino = 0;
};

struct TreeSnapshot {
  // Every entry below the root by relative path ("usr/bin/ls"), the root
  // itself left out. Parents come before their children.
  std::map<std::string, TreeStat> entries;

  // Throws rt::SysError naming `shown` and the entry.
  static TreeSnapshot take(int rootfd, const std::string& shown);
};

struct LayerWritten {
  std::string diff_id;   // "sha256:..." of the tar
  uint64_t bytes = 0;    // of the tar
  uint64_t changes = 0;  // entries and whiteouts; 0: nothing changed
};

// Writes to `out_fd` the layer that takes `before` to the tree as it is
// now, and sets `before` to the tree now. `before` empty: the whole tree.
// `attrs` (may be null): what is kept beside the tree (image/file_attrs).
// Entries take their set-id bits and extended attributes from the disk;
// one the layer holds without a change (a directory above a change, or
// any entry of a whole tree) takes its kept ones too. The map is updated
// to the tree now: a changed entry's are what the disk holds, a removed
// entry's go. `given` (may be null): extended attributes the step gave
// entries that their disk cannot hold (an ADD archive's capabilities),
// taken for a changed entry whose disk holds none.
LayerWritten write_tree_layer(int rootfd, const std::string& shown, TreeSnapshot& before, int out_fd,
                              AttrMap* attrs = nullptr, const AttrMap* given = nullptr);

}  // namespace rt::image
