// The mount plan: a value built from the options and host facts (pure),
// printed at -v, then applied by mount_apply (namespace).
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "rt/exec.hpp"
#include "run/hostinfo.hpp"
#include "util/log.hpp"

namespace rt::run {

// Where HostFile mounts appear inside the container (hpc/inject's
// /run/rt-host/lib and /run/rt-host/bin are below it).
inline constexpr const char* kHostFilesRoot = "/run/rt-host";

struct Mount {
  enum class Kind {
    Bind,      // src: host path
    Tmpfs,     // a fresh private tmpfs
    Staged,    // src: name of a StagedFile, bound read-only
    Hide,      // dst: a directory; src: names of entries to leave out, '/'-separated
               // (a copy of the directory, each other entry bound from the original)
    Symlink,   // dst: a link to make, pointing to src, unless dst exists in the image
    HostFile,  // src: a host file (its real path), dst: below kHostFilesRoot. All of
               // them together are one tree there: a read-only bind per distinct host
               // directory (hidden, at .d/INDEX) and each dst a link into it
               // (host_files_tree), not a bind per file.
  };
  Kind kind = Kind::Bind;
  std::string src;
  std::string dst;  // absolute, inside the container
  bool readonly = false;
  bool optional = false;   // skip quietly when src does not exist on the host
  std::string why;         // for -v: "default", "--bind", "home", ...
  bool if_target = false;  // skip quietly when dst does not exist in the image
};

enum class RootMode {
  ReadOnly,  // default
  Writable,  // --write
  Overlay,   // --write-tmpfs or --overlay: writes go to a tmpfs (discarded at exit) or an overlay's upper
};

// An --overlay directory or ext3 image file: read-only layers stack on the
// image in the order given; the writable one (at most one) takes the
// writes in its upper/, with overlayfs's work directory work/ beside it.
struct OverlayLayer {
  std::string path;  // absolute, host
  bool writable = false;
  bool image = false;  // an ext3 image (run/overlay_image), not a directory
  // A SquashFS file (read-only), served by squashfuse (run/overlay_image):
  // where its file system starts (a SIF file's primary partition); -1 for
  // none.
  int64_t squash_offset = -1;
  // An ext3 image inside the file: where it starts (a SIF file's overlay
  // partition, the image's own: `embedded`).
  int64_t ext_offset = 0;
  bool embedded = false;
  // Served by a FUSE program, not read as a directory.
  bool fuse() const { return image || squash_offset >= 0; }
};

struct StagedFile {
  std::string name;
  std::string content;
};

// The tree the HostFile mounts make at kHostFilesRoot: the distinct host
// directories, bound read-only at .d/INDEX (one inside another is reached
// through that one), and a link per file.
struct HostFilesTree {
  struct Link {
    std::string path;    // relative to kHostFilesRoot: "lib/libibverbs.so.1"
    std::string target;  // relative to the link: "../.d/0/libibverbs.so.1.14.0"
    std::string host;    // the host file, for -v and errors
    size_t dir = 0;      // the bound directory it lies in: an index into dirs
  };
  std::vector<std::string> dirs;     // host directories bound, in order of first use
  std::vector<std::string> subdirs;  // directories the links sit in, parents first: "lib", "bin"
  std::vector<Link> links;
};

struct MountPlan {
  std::string rootfs;     // host path
  bool squashfs = false;  // rootfs is a SquashFS file, served over FUSE by its server (run/image_server)
  std::string staging;    // host directory the staging tmpfs covers (rootfs for directories)
  RootMode root_mode = RootMode::ReadOnly;
  std::vector<OverlayLayer> overlays;  // with RootMode::Overlay
  // The FUSE programs of overlays the kernel cannot mount (run/overlay_image),
  // found on the host when there are overlays; "" when missing.
  std::string fuse2fs, fuse_overlayfs, squashfuse;
  // Overlays only read, and no writes wanted (a SIF file's own overlay,
  // without --write or --write-tmpfs): the root stays read-only.
  bool overlays_read_only = false;
  // A plain exec whose overlays their holder keeps mounted
  // (run/overlay_server): the image comes with them, as one tree.
  bool overlays_held = false;
  std::vector<Mount> mounts;
  // The tree of the HostFile mounts (build_plan: host_files_tree), and
  // where it is kept made in the store (kept_host_files_tree): bound as it
  // is, where "" has it made on the staging tmpfs at each start.
  HostFilesTree host_files;
  std::string host_files_kept;
  std::vector<StagedFile> staged;
  uid_t outer_uid = 0, inner_uid = 0;
  gid_t outer_gid = 0, inner_gid = 0;
  std::string cwd;            // inside the container
  bool cwd_explicit = false;  // from --cd or the image's WorkingDir: failing is an error
};

struct PlanInputs {
  const ExecOptions* options = nullptr;
  const HostInfo* host = nullptr;
  std::string rootfs;
  bool squashfs = false;
  int64_t sif_overlay = -1;  // where the SIF file's ext3 overlay partition starts
  std::string staging;
  std::string image_workdir;  // WorkingDir, used by `rt run` only
  std::string passwd;         // the synthesized files' contents
  std::string group;
  // Root emulation (--seccomp): the image's own passwd and group (useradd
  // edits them); apt told not to switch users where the image has apt.
  bool root_emulation = false;
  bool apt = false;
  // Host paths the launcher's ranks need at the same path (PMIx), and
  // injected host files (HPC): bound after the defaults, before --bind.
  std::vector<std::string> launcher_paths;
  std::vector<Mount> injected;
  // Entries hidden after every other mount (GPUs not selected).
  std::vector<Mount> hidden;
};

// --home SRC[:DST] read (DST defaults to SRC); nullopt without --home.
// Throws rt::Error when malformed.
std::optional<BindSpec> home_spec(const ExecOptions& o);
// The home directory inside the container: --home's DST, "/" with
// --no-home, else the caller's.
std::string home_inside(const ExecOptions& o, const HostInfo& h);

MountPlan build_plan(const PlanInputs& in);

// Host directories never bound as the working directory: binding the host's
// /usr over the image's would replace the image.
bool is_system_dir(const std::string& path);

// The tree of the HostFile mounts of `mounts`. Throws rt::Error for a dst
// outside kHostFilesRoot or in .d.
HostFilesTree host_files_tree(const std::vector<Mount>& mounts);

// One line per fact, for -v and --dry-run; HostFile mounts as one line, and
// with `each_link` (-vv) a line per bound directory and per link too.
std::vector<std::string> describe(const MountPlan& plan, bool each_link = util::log_enabled(util::Level::Debug));

}  // namespace rt::run
