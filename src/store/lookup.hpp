// Finding images in the user's store (host). Light: no network or archive
// code, so the exec path can use it.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/layout.hpp"

namespace rt::store {

// The directory name for an image name: '/' becomes '+' (never part of a
// reference). Throws rt::Error for names that cannot be stored safely.
std::string escape_name(std::string_view name);
std::string unescape_name(std::string_view dir);

// The image directory (a bundle: rootfs/ + image-config.json) for a name as
// given or as its canonical reference ("ubuntu" -> docker.io/library/ubuntu:latest).
// An image's directory is a real directory (no symlink) below the checked
// store's images/.
class Root;
std::optional<std::string> find_image(const Root& store, const std::string& name);
// The names `name` is found under, in the order tried: itself, its
// canonical reference, and Docker's other spellings of a docker.io name
// (busybox, busybox:latest, library/busybox, docker.io/library/busybox:latest).
std::vector<std::string> name_forms(const std::string& name);

// How every command reads an image argument, so that a file another user
// planted under the caller's working directory never runs in place of the
// image meant:
//   Path       begins with `/`, `./` or `../` (or is `.` or `..`)
//   Reference  a bare name (no `/`), `docker://REF`, or a name whose first
//              component is a registry host (has a `.` or `:`, or is
//              `localhost`): never a path
//   Either     any other name with a `/` (`library/ubuntu`, `imgs/app.sqfs`):
//              the stored image when the store has it, else the path
enum class NameKind { Path, Reference, Either };
NameKind name_kind(std::string_view name);
// `name` without a leading `docker://`.
std::string without_scheme(std::string_view name);

// Why an image at `path` (absolute) may not be the caller's: it, or a
// directory above it, is another user's, or lies in a directory others
// can write and could replace it (a sticky one such as /tmp protects only
// entries of the caller's or root's). Empty when only root and the caller
// can change it.
std::string foreign_path(const std::string& path);

// Stored names that are `name` with a tag (myapp -> myapp:1.0; ubuntu ->
// docker.io/library/ubuntu:24.04), for the error when `name` itself is
// not there.
std::vector<std::string> similar_images(const Root& store, const std::string& name);

}  // namespace rt::store
