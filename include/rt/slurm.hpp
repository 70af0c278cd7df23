// The task side of the Slurm plugin (slurm/rt_spank.c): srun
// --container-image and pyxis's other options.
//
// In each task, just before Slurm executes the program, the plugin puts
// the options in RT_SLURM_TASK ("key=value" lines, see src/hpc/pyxis.hpp,
// then "argv0=PROG") and makes rt the program: Slurm then runs
// `rt ARGS...` with the task's own arguments, after its task prolog and
// limits, and rt runs PROG ARGS... as `rt exec` would.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace rt {

struct SlurmTask {
  std::vector<std::string> words;  // rt's command line: exec|run OPTIONS IMAGE -- PROG ARGS...
  bool on_host = false;            // --container-name=NAME:no_exec: the container is made, PROG runs on the host
  std::string save;                // --container-save: the SquashFS file to write once PROG has ended
  std::string container;           // the writable container directory it is written from
};

// Runs `rt-image ARGS...` and returns its exit status (the rt program's).
using FullProgram = std::function<int(const std::vector<std::string>&)>;

// nullopt when RT_SLURM_TASK is not set; otherwise removes it from the
// environment and returns the task's command. `args` are the task's
// arguments after PROG. A named container (or the writable copy that
// --container-save writes from) is made here, once per node and job,
// by `rt-image convert` through `full`. Throws rt::Error naming the
// option, the image and this node.
std::optional<SlurmTask> slurm_task(const std::vector<std::string>& args, const FullProgram& full);

// The plugin's check in srun, before any task starts: RT_SLURM_TASK's
// options are translated and nothing is run. Throws rt::Error.
void slurm_check();

}  // namespace rt
