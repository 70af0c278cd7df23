// What COPY and ADD read and write (host): the files a source pattern
// names below a root (a build context with its .dockerignore, or another
// stage's tree), a digest of their content for the build cache, and
// copying them into an image tree. Sources resolve inside their root and
// destinations inside the image (util/inroot): no symlink of either leads
// out.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "image/dockerfile.hpp"
#include "image/file_attrs.hpp"
#include "util/fd.hpp"

namespace rt::image {

class SourceTree {
public:
  // `path`: an existing directory. `ignore`: what is left out of it.
  SourceTree(const std::string& path, std::optional<DockerIgnore> ignore = std::nullopt);

  // The paths (relative, "" for the root itself) that `pattern` names: one
  // path, or a glob (* ? [...] within a component) matched against every
  // entry. Throws rt::Error naming `where` when nothing matches.
  std::vector<std::string> match(const std::string& pattern, const std::string& where) const;
  // Is this relative path a directory (following symlinks inside the root)?
  bool is_dir(const std::string& rel) const;
  // A digest of the names, types, modes and contents below each path.
  std::string digest(const std::vector<std::string>& rels) const;

  const std::string& path() const { return path_; }
  int fd() const { return root_.get(); }
  bool excluded(const std::string& rel) const { return ignore_ && !rel.empty() && ignore_->excluded(rel); }
  // The same for what `rel` names once its symlinks are followed inside
  // the root: a link to a left-out file is left out with it.
  bool excluded_target(const std::string& rel) const;
  // May an excluded directory hold entries that are not (a `!` pattern)?
  bool look_inside_excluded() const { return ignore_ && ignore_->reincludes(); }

private:
  std::string path_;
  util::UniqueFd root_;
  std::optional<DockerIgnore> ignore_;
};

struct CopyOptions {
  std::optional<unsigned> chmod;  // --chmod: the mode of every file and directory copied
};

// Copies `rel` of `src` to `dest` (an absolute path in the image rooted at
// `tree`): a directory's contents into the directory `dest`; a file to
// `dest`, or into it when `into_dir`. Missing directories are made; what
// is in the way (but a directory to merge into) is replaced. Modes and
// modification times are kept. Returns the bytes copied.
uint64_t copy_into(const SourceTree& src, const std::string& rel, int tree, const std::string& dest, bool into_dir,
                   const CopyOptions& options, const std::string& where);

// ADD's archives: when `rel` of `src` is a tar (plain, gzip or zstd),
// unpacks it into `scratch` (an empty directory) with the tree writer's
// hardening, copies that into the image's directory `dest` and returns
// true; returns false for any other file. The archive's set-id bits go
// onto the disk; its extended attributes into `xattrs` (when given), by
// the entries' paths in the image (as write_tree_layer's `given` takes
// them: the disk cannot hold security.*).
bool add_archive(const SourceTree& src, const std::string& rel, int tree, const std::string& dest,
                 const std::string& scratch, const CopyOptions& options, const std::string& where,
                 AttrMap* xattrs = nullptr);

// True when the image has a directory at `path` (symlinks followed inside it).
bool dir_in_tree(int tree, const std::string& path);

}  // namespace rt::image
