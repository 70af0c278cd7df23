// Which launcher started this process, from its environment (host).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace rt::hpc {

struct Launcher {
  enum class Kind { None, Slurm, OpenMpi, Hydra, Pmix };
  Kind kind = Kind::None;
  std::string name;    // "slurm", "openmpi", ... for -v
  std::string job;     // the job (step) all ranks of this launch share; "" if unknown
  int local_size = 0;  // ranks on this node, 0 if unknown
  int local_rank = -1;
  // Host paths the ranks must see at the same path (PMIx server rendezvous,
  // its shared-memory store).
  std::vector<std::string> paths;
};

// Reads variables through `get` (getenv in production; a map in tests).
Launcher detect_launcher(const std::function<const char*(const char*)>& get);

// SLURM_STEP_TASKS_PER_NODE ("2(x3),1") for node index `node`; 0 if unknown.
int slurm_tasks_on_node(const std::string& spec, int node);

}  // namespace rt::hpc
