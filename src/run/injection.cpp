// The host injection of an exec (host); see injection.hpp.
#include "run/injection.hpp"

#include <cstdlib>

#include "hpc/site_config.hpp"
#include "rt/error.hpp"
#include "run/launch.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::run {
namespace {

bool image_env_asks_gpu(const ImageConfig* config) {
  if (!config) return false;
  for (const auto& kv : config->env)
    if (kv.starts_with("NVIDIA_VISIBLE_DEVICES=")) {
      std::string v = kv.substr(23);
      return !v.empty() && v != "void" && v != "none";
    }
  return false;
}

}  // namespace

hpc::Injection plan_injection(const ExecOptions& o, const ImageConfig* config, const hpc::ImageView& view) {
  hpc::InjectRequest req;
  req.mpi = o.mpi;
  req.gpu_required = o.gpu == ExecOptions::Inject::On;
  req.gpu = req.gpu_required || (o.gpu == ExecOptions::Inject::Auto && image_env_asks_gpu(config));
  req.ib_required = o.ib == ExecOptions::Inject::On;
  req.ib = req.ib_required || (o.ib == ExecOptions::Inject::Auto && util::path_exists("/dev/infiniband"));
  req.devices = o.devices;
  if (!o.mpi.empty()) {
    try {
      auto argv = command_for(o.mode, o.command, config, "", "/bin/sh");
      req.program = argv.front();
    } catch (const Error&) {  // no program: exec says so later
    }
  }
  if (req.mpi.empty() && !req.gpu && !req.ib && req.devices.empty()) return {};
  hpc::SiteConfig conf = hpc::load_site_config();
  // Every rank of a job reads the same host plugins: remember what they are.
  hpc::ElfCache elf(store::Root::user(o.storage).fd(), store::kElfCacheFile);
  hpc::Injection inj = hpc::plan_injection(req, conf, view, &elf);
  elf.save();
  for (const auto& w : inj.warnings) util::warn(w);
  return inj;
}

// An NVIDIA_VISIBLE_DEVICES selection, as NVIDIA's container toolkit
// applies it: the device nodes and driver directories of the GPUs it
// leaves out are hidden (returned, to end the mount plan), and CUDA sees
// what it selects, unless the launcher or the user set
// CUDA_VISIBLE_DEVICES (Slurm does for --gres=gpu).
std::vector<Mount> select_gpus(const hpc::Injection& inj, std::vector<std::string>& env) {
  std::string selection;
  bool cuda_set = false;
  for (const auto& kv : env) {
    if (kv.starts_with("CUDA_VISIBLE_DEVICES=")) cuda_set = true;
    if (kv.starts_with("NVIDIA_VISIBLE_DEVICES=")) selection = kv.substr(23);
  }
  if (hpc::selects_all_gpus(selection)) return {};
  auto gpus = hpc::host_gpus(inj.gpu_procfs);
  if (!cuda_set)
    if (auto cuda = hpc::cuda_visible_devices(selection, gpus)) env.push_back("CUDA_VISIBLE_DEVICES=" + *cuda);
  hpc::GpuMask mask = hpc::gpu_mask(selection, gpus, inj.gpu_dev);
  std::vector<Mount> hide;
  if (!mask.nodes.empty())
    hide.push_back(
        {.kind = Mount::Kind::Hide, .src = util::join(mask.nodes, '/'), .dst = "/dev", .why = "GPUs not selected"});
  if (!mask.buses.empty()) {
    // The kernel may refuse a mount inside /proc: then only a warning.
    hide.push_back({.kind = Mount::Kind::Hide,
                    .src = util::join(mask.buses, '/'),
                    .dst = "/proc/driver/nvidia/gpus",
                    .optional = true,
                    .why = "GPUs not selected",
                    .if_target = true});
  }
  return hide;
}

std::vector<Mount> injected_mounts(const hpc::Injection& inj) {
  std::vector<Mount> out;
  for (const auto& f : inj.files)
    out.push_back(
        {.kind = Mount::Kind::Bind, .src = f.host, .dst = f.container, .readonly = true, .why = "host library"});
  for (const auto& d : inj.dirs)
    out.push_back({.kind = Mount::Kind::Bind,
                   .src = d,
                   .dst = d,
                   .readonly = true,
                   .optional = true,
                   .why = "host MPI/fabric files"});
  for (const auto& f : inj.cdi_mounts)
    out.push_back({.kind = Mount::Kind::Bind, .src = f.host, .dst = f.container, .readonly = true, .why = "CDI"});
  for (const auto& l : inj.cdi_links)
    out.push_back({.kind = Mount::Kind::Symlink, .src = l.host, .dst = l.container, .why = "CDI hook"});
  return out;
}

void apply_injected_env(const hpc::Injection& inj, std::vector<std::string>& env) {
  auto prepend = [&](const char* name, const std::vector<std::string>& dirs) {
    if (dirs.empty()) return;
    std::string value = util::join(dirs, ':');
    std::string prefix = std::string(name) + "=";
    for (auto& kv : env)
      if (kv.starts_with(prefix)) {
        std::string old = kv.substr(prefix.size());
        kv = prefix + value + (old.empty() ? "" : ":" + old);
        return;
      }
    env.push_back(prefix + value);
  };
  prepend("LD_LIBRARY_PATH", inj.lib_path);
  prepend("PATH", inj.bin_path);
  for (const auto& kv : inj.env_set) {
    std::string key = kv.substr(0, kv.find('='));
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(key + "="); });
    env.push_back(kv);
  }
}

}  // namespace rt::run
