// The host injection of an exec (host): what to inject, and its share of
// the mount plan and of the environment. hpc/inject decides what the
// host's libraries are; this glues it to the options and the plan.
#pragma once
#include <string>
#include <vector>

#include "hpc/inject.hpp"
#include "rt/exec.hpp"
#include "run/image_config.hpp"
#include "run/plan.hpp"

namespace rt::run {

// What of the host to inject; empty when nothing is asked for and nothing
// is automatic (--gpu auto: the image's NVIDIA_VISIBLE_DEVICES, on a node
// with the driver's control device; --ib auto: a verbs device). Automatic injection that cannot work is skipped with a
// note; asked-for injection that cannot work is an error. Host ELF facts
// are kept in STORE/elf-cache.
hpc::Injection plan_injection(const ExecOptions& o, const ImageConfig* config, const hpc::ImageView& view);

// The injection's binds and links, for PlanInputs::injected.
std::vector<Mount> injected_mounts(const hpc::Injection& inj);

// The tree `t` (lib/, bin/, the .d/N mount points and the links), made once
// in the store (STORE/host-trees/HASH, HASH of what it holds) and bound at
// every start that injects the same files: no start makes the links again.
// Returns its path; "" where the store is not on a local file system (a
// tree on NFS or Lustre would be read over the network at every library
// load), or the tree cannot be made (the start then makes it).
std::string kept_host_files_tree(const HostFilesTree& t, const std::string& storage);
// rt prune: removes the trees of `dir` (STORE/host-trees) no start used for
// a week, and what an interrupted start left; returns how many.
size_t prune_host_trees(int dir, const std::string& shown);

// LD_LIBRARY_PATH and PATH with the injected directories first, and the
// CDI environment.
void apply_injected_env(const hpc::Injection& inj, std::vector<std::string>& env);

// An NVIDIA_VISIBLE_DEVICES selection, as NVIDIA's container toolkit
// applies it: the mounts that hide the GPUs it leaves out (for
// PlanInputs::hidden), and CUDA_VISIBLE_DEVICES added to `env` unless the
// launcher or the user set it.
std::vector<Mount> select_gpus(const hpc::Injection& inj, std::vector<std::string>& env);

}  // namespace rt::run
