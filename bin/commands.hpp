// The subcommands of the rt program (CLI side: fill a struct, call librt).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "program.hpp"
#include "rt/exec.hpp"

namespace rt::cli {

// A registered subcommand: `run` is called after parsing and returns the
// exit status.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// cmd_exec.cpp: exec, run, shell. With `only` set, registers just that
// subcommand when it is one of them: building every option of every
// subcommand is wasted work on the per-rank start path.
void add_exec_commands(CLI::App& app, std::vector<Command>& out, const std::string& only = {});

// The verbs the static rt program serves itself; it hands every other
// command line to the full program (rt-image), which links the registry,
// archive and TLS libraries the exec path must not load.
bool is_exec_verb(const std::string& word);

// cmd_instance.cpp: rt instance start|list|stop|logs (words[0] is
// "instance"); prints its own usage.
int instance_command(const std::vector<std::string>& words);

// Replaces this process with the full program, given `words` (after the
// program name). Throws rt::Error when it cannot.
// `argv0`: what it is started as ("apptainer": that personality).
[[noreturn]] void exec_full_program(const std::vector<std::string>& words, const char* argv0 = "rt");

// Runs the full program with `args` and returns its exit status.
int run_full_program(const std::vector<std::string>& args);
// A SIF image that must verify first (--verify-key, or the site's
// sif.keys): rt verify passes it, or rt::Error; rt exec and rt instance
// start call it before the container.
void verify_sif_first(const ExecOptions& options);
// The Slurm plugin made rt a task's program (include/rt/slurm.hpp): turns
// `words` into the task's exec command line, or returns the exit status
// when the task ends here (--slurm-check, --container-save). Called only
// when RT_SLURM_TASK is set.
std::optional<int> slurm_task_command(std::vector<std::string>& words);
// Where the full program may be: beside this one, or in ../libexec/rt/.
std::vector<std::string> full_program_paths();

// exec/run/shell (words[0] is the verb), without building the CLI11 parser
// (the per-rank path). nullopt when help is asked for: CLI11 shows it.
// Throws rt::Error for words it cannot read.
std::optional<int> exec_command(const std::vector<std::string>& words);
// exec with options read (an image reference not stored is pulled, or
// sent from the step's first node); the exit status when exec returns.
int run_exec(const ExecOptions& options);

}  // namespace rt::cli
