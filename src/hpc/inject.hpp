// Host libraries injected into a container: the host MPI with its full
// dependency and plugin closure, the NVIDIA driver's user-space side, the
// InfiniBand/fabric stack (host). The result is a list of binds and
// environment changes that the mount plan and the environment take in.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hpc/elf_cache.hpp"
#include "hpc/site_config.hpp"

namespace rt::hpc {

// Where injected files appear inside the container.
inline constexpr const char* kLibDir = "/run/rt-host/lib";
inline constexpr const char* kBinDir = "/run/rt-host/bin";

struct InjectRequest {
  std::string mpi;            // "", "openmpi", "mpich", or the path of a host libmpi
  bool gpu = false;           // --gpu, or the image asks (NVIDIA_VISIBLE_DEVICES)
  bool gpu_required = false;  // asked on the command line: a missing driver is an error
  bool ib = false;
  bool ib_required = false;
  // --fabric: only the host's fabric provider (libfabric, its providers,
  // xpmem), under the image's own MPI.
  bool fabric = false;
  // Where injected objects need a newer glibc than the image's, the host's
  // glibc takes the image's place (else the injection is refused).
  bool glibc_replace = true;
  std::vector<std::string> devices;  // CDI names: vendor.com/class=name|all
  // The program to run (argv[0]): the MPI it links chooses the host MPI of
  // a plain --mpi and must agree with an explicit one. "" when unknown.
  std::string program;
  // Anything to inject at all.
  bool any() const { return !mpi.empty() || gpu || ib || fabric || !devices.empty(); }
};

// Read access to the image's files, for the checks.
class ImageView {
public:
  virtual ~ImageView() = default;
  virtual const std::string& name() const = 0;
  // A regular file's content (symlinks inside followed); nullopt if absent.
  virtual std::optional<std::string> read(const std::string& path, size_t limit) const = 0;
  // Names in a directory; empty if it is absent.
  virtual std::vector<std::string> list(const std::string& dir) const = 0;
  // An identity of the file at `path` that changes when it does ("" if
  // absent), so that facts about it may be cached.
  virtual std::string stamp(const std::string& path) const = 0;
  // stamp(), for a name whose presence its directory's recorded stamp
  // already answers for (a directory's identity changes when a name in it
  // comes or goes): not recorded as an input of its own.
  virtual std::string probe(const std::string& path) const { return stamp(path); }
  // An identity of the whole image that changes when any file in it does
  // (a SquashFS or SIF file's), or "" where only stamp() tells (a directory).
  virtual std::string identity() const { return ""; }
};

// What a plan was made from: paths with their identity when they were
// consulted (host_stamp; ImageView::stamp, "-" for absent), so that the
// plan can be reused while they stay as they were (PlanCache).
struct PlanInputs {
  std::map<std::string, std::string> host;
  std::map<std::string, std::string> image;  // none for an image with an identity()
};

struct Injection {
  struct File {
    std::string host;       // path on the host
    std::string container;  // path inside
    bool operator==(const File&) const = default;
  };
  std::vector<File> files;            // libraries and programs, into kLibDir and kBinDir
  std::vector<File> over;             // host files bound over the image's own (its glibc replaced)
  std::vector<std::string> dirs;      // host directories bound read-only at the same path
  std::vector<File> cdi_mounts;       // from CDI specs
  std::vector<File> cdi_links;        // links a CDI spec's hook asks for: host = target, container = link
  std::vector<std::string> env_set;   // K=V
  std::vector<std::string> env_list;  // K=V: V put before the colon-separated list K holds
  std::vector<std::string> lib_path;  // prepended to LD_LIBRARY_PATH
  std::vector<std::string> bin_path;  // prepended to PATH
  std::vector<std::string> notes;     // for -v
  std::vector<std::string> warnings;  // automatic parts left out, and why
  std::string cuda_compat_host;       // a CDI enable-cuda-compat hook's host driver version
  bool gpu = false;                   // the NVIDIA driver is injected
  std::string gpu_procfs = "/proc/driver/nvidia/gpus";  // the driver's GPUs (site config gpu.procfs)
  std::string gpu_dev = "/dev";                         // their device nodes (site config gpu.dev)
};

// Plans the injection and checks it against the image (MPI ABI, glibc);
// throws rt::Error saying which library needs what. Automatic parts (not
// gpu_required / ib_required) that fail are left out and said in
// `warnings`. Host ELF files are read through `elf` when given; every host
// and image file the plan depends on is recorded in `inputs` when given.
Injection plan_injection(const InjectRequest& req, const SiteConfig& conf, const ImageView& image,
                         ElfCache* elf = nullptr, PlanInputs* inputs = nullptr);

// The verbs devices that make the InfiniBand stack automatic: the names
// matching the site's `ib.devices` patterns (DIR/PREFIX*; by default
// /dev/infiniband/uverbs* and /sys/class/infiniband/*). None where
// /dev/infiniband holds only rdma_cm.
std::vector<std::string> verbs_devices(const SiteConfig& conf);

// The NVIDIA driver's control device (`gpu.dev`/nvidiactl), without which
// an image's NVIDIA_VISIBLE_DEVICES injects nothing.
std::string nvidia_control_device(const SiteConfig& conf);

// Soname families of MPI ABIs: "openmpi" (libmpi.so.40), "mpich"
// (libmpi.so.12 / libmpich.so.12: MPICH, Intel MPI, Cray MPICH, MVAPICH);
// "" for anything else.
std::string mpi_abi(const std::string& soname);

// A GPU of the host's NVIDIA driver (gpus_dir/BUS/information).
struct HostGpu {
  std::string bus;   // PCI address, the directory's name
  std::string uuid;  // "GPU-..."; "" if unknown
  int minor = -1;    // /dev/nvidiaMINOR; -1 if unknown
};
// The driver's GPUs in PCI bus order (nvidia-smi's numbering).
std::vector<HostGpu> host_gpus(const std::string& gpus_dir);

// True for no selection, "all" and "void": every GPU, nothing to map.
bool selects_all_gpus(const std::string& nvidia_visible);

// CUDA_VISIBLE_DEVICES for an NVIDIA_VISIBLE_DEVICES selection, so that CUDA
// sees the devices the image or the user selected: GPU and MIG UUIDs as
// they are, indices (the driver's PCI bus order, as nvidia-smi numbers
// them) as the UUIDs `gpus_dir` (/proc/driver/nvidia/gpus/BUS/information)
// gives them (`gpus`: host_gpus), or as they are where it is unreadable.
// nullopt for "all" and for no selection.
std::optional<std::string> cuda_visible_devices(const std::string& nvidia_visible, const std::vector<HostGpu>& gpus);

// What an NVIDIA_VISIBLE_DEVICES selection leaves out, to hide as NVIDIA's
// container toolkit does: the device nodes (names under `dev_dir`,
// "nvidiaN") and the driver's directories (bus addresses) of the GPUs of
// `gpus` (host_gpus) not selected. GPUs are selected by index or
// UUID; "none" selects none. Nothing is hidden for no selection, "all",
// "void", a selection naming a MIG device (its GPU's node must stay), or
// where the driver's directory is unreadable.
struct GpuMask {
  std::vector<std::string> nodes;
  std::vector<std::string> buses;
};
GpuMask gpu_mask(const std::string& nvidia_visible, const std::vector<HostGpu>& gpus, const std::string& dev_dir);

}  // namespace rt::hpc
