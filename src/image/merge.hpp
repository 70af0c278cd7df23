// Merging image layers (pure): the rules of the OCI image spec's layer
// changesets, once, for every writer of a final tree. The tree writer
// (image/unpack: a directory) and the SquashFS flattener (image/flatten: a
// tar stream for tar2sqfs) both feed each layer's entries through a
// LayerMerge and carry out what it decides.
//
// Rules (OCI image spec, layer.md):
//   - a later entry replaces what is at its path: file, directory, symlink
//     in any combination; a directory over a directory merges with it;
//   - `.wh.NAME` removes NAME and `.wh..wh..opq` empties its directory, but
//     only of what lower layers made: entries of the same layer stay
//     ("Whiteouts", "Opaque Whiteout"), whichever comes first;
//   - paths go through the image's own symlinks, resolved inside the image
//     (as RESOLVE_IN_ROOT does); a symlink to a path the image lacks, or a
//     file where a directory is needed, is an error;
//   - missing parent directories are made (0755);
//   - absolute and `..` paths, and hard links to nothing, to a directory or
//     out of the image, are refused; device nodes and sockets are skipped.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "image/file_attrs.hpp"

namespace rt::image {

// Splits a tar entry path into clean components: "./" and "." dropped.
// Returns false for paths that are absolute or climb with "..".
bool split_entry_path(const std::string& path, std::vector<std::string>& comps);

// One tar entry as the merge sees it.
struct MergeEntry {
  std::string path;      // as written in the tar
  unsigned type = 0;     // AE_IF* (libarchive's file types: S_IF*)
  std::string symlink;   // a symlink's target
  std::string hardlink;  // a hard link's target path, as written; not empty: a hard link
  unsigned perm = 0644;  // with the set-id bits
  int64_t mtime = 0;
  Xattrs xattrs;
};

// What an entry does to the tree, in order: remove the subtrees `remove`,
// then put the entry at `key` (nothing when `key` is empty).
struct MergeStep {
  enum class Kind {
    None,      // the root itself, or a whiteout (its removals only)
    Skipped,   // a device node, socket or unknown type
    Make,      // a new file, directory, symlink, fifo or hard link at `key`
    MergeDir,  // a directory over a directory: it stays, with the new mode
  };
  Kind kind = Kind::None;
  bool whiteout = false;
  std::vector<std::string> remove;  // keys of subtrees, none inside another
  std::string key;                  // where the entry lands: a path inside the image, no leading '/'
  std::string hardlink;             // a hard link's target: the key of a file the tree has
};

class LayerMerge {
public:
  struct Node {
    unsigned type = 0;     // AE_IF*; 0: a hard link to `link`
    std::string link;      // symlink target, or the key a hard link points to
    unsigned perm = 0755;  // with the set-id bits
    int64_t mtime = 0;
    Xattrs xattrs;
    int layer = -1;      // -1: a directory made implicitly
    uint64_t index = 0;  // the entry's place in its layer
  };

  explicit LayerMerge(std::string image_name) : image_(std::move(image_name)) {}

  // Starts the next layer; `name` is for messages.
  void begin_layer(const std::string& name);
  // Applies entry number `index` of the current layer to the model and says
  // what it does. Throws rt::Error naming the image, the layer, the entry
  // and the reason.
  MergeStep apply(const MergeEntry& e, uint64_t index);

  // The final tree: key (no leading '/') -> node. Parents come before
  // their children.
  const std::map<std::string, Node>& nodes() const { return nodes_; }
  int layer() const { return layer_no_; }

private:
  std::string where(const std::string& path) const;
  // `links`: symlinks followed so far in this lookup (40 at most in all,
  // as the kernel allows: a nested chain cannot grow exponentially).
  std::string resolve(const std::vector<std::string>& comps, size_t upto, const std::string& where,
                      int* links = nullptr) const;
  // Removes from the model what lower layers made at or under `key` (or
  // only under it), keeping this layer's entries and the directories that
  // lead to them; returns the subtrees removed.
  std::vector<std::string> remove_lower(const std::string& key, bool keep_key);
  std::vector<std::string> erase_tree(const std::string& key);
  void ensure_parents(const std::string& key, const std::string& where);

  std::string image_;
  std::string layer_name_;
  int layer_no_ = -1;
  std::map<std::string, Node> nodes_;
  std::set<std::string> this_layer_;
};

}  // namespace rt::image
