// SquashFS images: open, read a file from inside, and serve them over FUSE
// in-process with libsquashfuse_ll (host -> namespace).
#pragma once
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "squash/lazy.hpp"
#include "squash/sif.hpp"
#include "squash/verify.hpp"

struct sqfs_ll;

namespace rt::squash {

// Where an image's OCI configuration travels inside a SquashFS image, so
// that `rt run img.sqfs` works wherever the file is copied.
inline constexpr const char* kConfigPath = "/.rt/image-config.json";

// What a file holds: a SquashFS image, a SIF file (whose primary partition
// is one), or something else.
enum class FileKind { Other, Squashfs, Sif };
FileKind file_kind(const std::string& path);
// A SquashFS image or a SIF file: what squash::Image opens.
bool is_squashfs(const std::string& path);
// A Singularity 2 image (.simg): one "#!" line, then a SquashFS image.
// Where that image lies in the file at `fd`; nullopt for any other file.
std::optional<Span> simg_span(int fd);

class Image {
public:
  // Opens the image and checks its metadata (squash/verify.hpp); throws
  // rt::Error naming the file and what is wrong (not SquashFS, truncated,
  // unsupported compression, corrupt). A SIF file is opened at its primary
  // partition (squash/sif.hpp), in place. `source`, when given, provides
  // the file's bytes as they are read (a lazy file, squash/lazy.hpp): the
  // head and all the metadata at once, each data block when it is read.
  explicit Image(const std::string& path, std::unique_ptr<Source> source = nullptr);
  ~Image();
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;

  // A regular file's content from inside the image; nullopt if absent.
  // Symlinks inside the image are followed.
  std::optional<std::string> read_file(const std::string& path, size_t limit = 1 << 22);
  bool has(const std::string& path);
  // Names in a directory inside the image; empty if it is absent.
  std::vector<std::string> list(const std::string& dir);

  // Namespace: mounts the image read-only at `mountpoint` through /dev/fuse
  // (no fusermount, no helper process) and serves it from threads of this
  // process, which must outlive every user of the mount (the image's
  // server, run/image_server).
  void mount_in_background(const std::string& mountpoint, uid_t uid, gid_t gid);

  // The SIF file's header and objects, when the image is one.
  const std::optional<SifFile>& sif() const { return sif_; }

private:
  int mount(const std::string& mountpoint, uid_t uid, gid_t gid);
  void fetch_head(int fd, uint64_t size);
  void need(uint64_t offset, uint64_t length, const std::string& what);
  std::string path_;
  std::unique_ptr<Source> source_;
  std::optional<SifFile> sif_;
  int fd_ = -1;
  sqfs_ll* ll_ = nullptr;
};

}  // namespace rt::squash
