// Launcher detection (host): Slurm, Open MPI (ORTE/PRRTE), MPICH Hydra, PMIx.
#include "hpc/launcher.hpp"

#include <cstdlib>

#include "util/strings.hpp"

namespace rt::hpc {
namespace {

int to_int(const char* s, int fallback) {
  if (!s || !*s) return fallback;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  return end && *end == '\0' && v >= 0 && v < (1 << 24) ? static_cast<int>(v) : fallback;
}

}  // namespace

int slurm_tasks_on_node(const std::string& spec, int node) {
  // "4", "2(x3),1": counts, each repeated for a number of nodes.
  int index = 0;
  for (const auto& part : util::split(spec, ',')) {
    size_t paren = part.find("(x");
    int count = to_int(part.substr(0, paren).c_str(), -1);
    int times = 1;
    if (paren != std::string::npos) {
      std::string t = part.substr(paren + 2);
      if (t.empty() || t.back() != ')') return 0;
      t.pop_back();
      times = to_int(t.c_str(), -1);
    }
    if (count < 0 || times < 0) return 0;
    if (node < index + times) return count;
    index += times;
  }
  return 0;
}

Launcher detect_launcher(const std::function<const char*(const char*)>& get) {
  auto has = [&](const char* k) { return get(k) != nullptr; };
  auto str = [&](const char* k) -> std::string {
    const char* v = get(k);
    return v ? v : "";
  };
  Launcher l;
  if (has("OMPI_COMM_WORLD_RANK")) {
    l.kind = Launcher::Kind::OpenMpi;
    l.name = "openmpi";
    l.local_size = to_int(get("OMPI_COMM_WORLD_LOCAL_SIZE"), 0);
    l.local_rank = to_int(get("OMPI_COMM_WORLD_LOCAL_RANK"), -1);
    for (const char* k : {"OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"})
      if (has(k)) {
        l.job = str(k);
        break;
      }
  } else if (has("SLURM_STEP_ID") && has("SLURM_JOB_ID") && has("SLURM_PROCID")) {
    l.kind = Launcher::Kind::Slurm;
    l.name = "slurm";
    l.job = str("SLURM_JOB_ID") + "." + str("SLURM_STEP_ID");
    l.local_rank = to_int(get("SLURM_LOCALID"), -1);
    l.local_size = slurm_tasks_on_node(str("SLURM_STEP_TASKS_PER_NODE"), to_int(get("SLURM_NODEID"), 0));
  } else if (has("PMI_RANK") && (has("PMI_FD") || has("PMI_PORT") || has("MPI_LOCALNRANKS"))) {
    l.kind = Launcher::Kind::Hydra;
    l.name = "hydra";
    l.local_size = to_int(get("MPI_LOCALNRANKS"), 0);
    l.local_rank = to_int(get("MPI_LOCALRANKID"), -1);
    l.job = str("PMI_KVSNAME");
  } else if (has("PMIX_RANK") && has("PMIX_NAMESPACE")) {
    l.kind = Launcher::Kind::Pmix;
    l.name = "pmix";
    l.job = str("PMIX_NAMESPACE");
    l.local_size = to_int(get("PMIX_LOCAL_SIZE"), 0);
  }
  // The PMIx server's rendezvous and shared-memory store, wherever the
  // launcher put them (Slurm: its spool directory; Open MPI: the session
  // directory, usually under /tmp).
  for (const char* k : {"PMIX_SERVER_TMPDIR", "PMIX_SYSTEM_TMPDIR", "PMIX_DSTORE_21_BASE_PATH",
                        "PMIX_DSTORE_ESH_BASE_PATH", "PMIX_MCA_gds_ds21_base_path"}) {
    std::string v = str(k);
    if (!v.empty() && v.front() == '/') l.paths.push_back(v);
  }
  return l;
}

}  // namespace rt::hpc
