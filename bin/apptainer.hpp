// Apptainer's command line (rt started as `apptainer` or `singularity`):
// its words read by a parser of their own and turned into rt's (pure), so
// that workflow managers, HTCondor and `singularity exec` job scripts run
// rt unmodified. man rt-apptainer lists every option and what it becomes.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace rt::cli {

// The command-line level of Apptainer that rt speaks, as `apptainer
// --version` prints it (clients read the last word of that line).
inline constexpr const char* kApptainerVersion = "1.3.0";

// True when argv[0]'s last component is apptainer or singularity.
bool apptainer_personality(const char* argv0);

// What one Apptainer command line becomes.
struct ApptainerPlan {
  // rt command lines (the words after "rt"), run in this order; the last
  // one of exec/run/shell/test replaces the process.
  std::vector<std::vector<std::string>> steps;
  // Set for `test` (rt exec runs the image's test script) and for every
  // action: a directory given as a path is the root filesystem even
  // without bin, usr or etc.
  bool test = false;
  std::vector<std::string> make_dirs;  // made (0700) before the steps run: -W's tmp and var_tmp
  std::string print;                   // printed instead of running anything (version, help)
  std::string refuse_if_exists;        // pull/build: the output file, unless --force
};

// Reads Apptainer's words (after the program name); `env` is the caller's
// environment as NAME=VALUE (APPTAINERENV_*, SINGULARITYENV_*,
// APPTAINER_BIND). Throws rt::Error naming an option rt does not know or
// cannot honour, and why.
ApptainerPlan translate_apptainer(const std::vector<std::string>& words, const std::vector<std::string>& env);

// The program started as apptainer/singularity: translate and run.
int apptainer_main(const std::vector<std::string>& words);

}  // namespace rt::cli
