// What a rootless tree cannot hold on disk, kept beside it (host): the
// set-user-id and set-group-id bits and the extended attributes (file
// capabilities from setcap, user.* attributes) an image's layers give its
// files. rt never sets them on disk (an unprivileged user cannot write
// security.*, and a set-id file of the user's in a tree others may reach
// would run as that user); exports put them back: a tree made into a layer,
// a SquashFS file, a Docker or OCI archive has them as the image's layers
// had them.
//
// A bundle keeps them in `file-attrs` beside rootfs/: records of
//   PATH \0 SETID (octal) \0 COUNT \0 (NAME \0 HEX(VALUE) \0)*
// so that any name a file system holds (newlines included) round-trips.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct archive_entry;

namespace rt::image {

using Xattrs = std::vector<std::pair<std::string, std::string>>;  // name, value; in the layer's order

struct FileAttrs {
  unsigned setid = 0;  // S_ISUID | S_ISGID
  Xattrs xattrs;
  bool empty() const { return setid == 0 && xattrs.empty(); }
  bool operator==(const FileAttrs&) const = default;
};

// Key: a path in the image, no leading '/' (as image/merge keys it).
using AttrMap = std::map<std::string, FileAttrs>;

inline constexpr const char* kAttrsFile = "file-attrs";

std::string encode_attrs(const AttrMap& attrs);
// Throws rt::Error naming `shown` when the bytes are not such records.
AttrMap decode_attrs(const std::string& bytes, const std::string& shown);

// BUNDLE/file-attrs: empty when the bundle has none.
AttrMap read_attrs(const std::string& bundle);
// Writes BUNDLE/file-attrs whole (renamed into place), or removes it when
// `attrs` is empty.
void write_attrs(const std::string& bundle, const AttrMap& attrs);

// A tar entry's set-id bits and extended attributes.
FileAttrs attrs_of(::archive_entry* e);

// A libarchive entry, freed with its owner.
struct EntryDeleter {
  void operator()(::archive_entry* e) const;
};
using EntryPtr = std::unique_ptr<::archive_entry, EntryDeleter>;
// Adds `a` to a tar entry: its set-id bits to the mode, its attributes.
void add_attrs(::archive_entry* e, const FileAttrs& a);

// A tree private to a build holds set-id bits on disk, so that its steps
// see them as a root filesystem has them (find -perm, chmod a-s, a write
// by root keeps them): records' bits go to the files of the tree at
// `rootfd` (and leave the records). Throws rt::SysError naming `shown`.
void setid_to_disk(int rootfd, const std::string& shown, AttrMap& attrs);
// The reverse, before such a tree becomes a store image: the set-id bits
// of `paths` go from the disk into the records.
void setid_from_disk(int rootfd, const std::string& shown, const std::vector<std::string>& paths, AttrMap& attrs);

// The key of a tar entry's path ("./usr/bin/" -> "usr/bin").
std::string attr_key(std::string path);

// security.capability as a layer carries it: version 3 (written in a user
// namespace, naming the host uid of that namespace's root) becomes version
// 2, which means the image's own root wherever the image runs.
std::string portable_capability(const std::string& value);

// The extended attributes of the file open at `fd` (O_PATH will do; never
// a symlink), capabilities made portable; none where the file system keeps
// none.
Xattrs read_xattrs(int fd);

}  // namespace rt::image
