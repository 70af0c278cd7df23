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
LayerWritten write_tree_layer(int rootfd, const std::string& shown, TreeSnapshot& before, int out_fd);

}  // namespace rt::image
