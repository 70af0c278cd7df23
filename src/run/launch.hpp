// Choosing and starting the container's program (container root).
#pragma once
#include <string>
#include <vector>

#include "rt/exec.hpp"
#include "run/image.hpp"
#include "run/image_config.hpp"

namespace rt::run {

// The argv to run (pure). Exec: `args` as given. Run: Docker semantics,
// ENTRYPOINT + (args, or CMD when there are none); with neither, an
// Apptainer image's runscript + args. Shell: `shell`. Throws rt::Error
// when there is nothing to run.
std::vector<std::string> command_for(ExecMode mode, const std::vector<std::string>& args, const ImageConfig* config,
                                     const std::string& image_name, const std::string& shell,
                                     const ApptainerFiles& apptainer = {});

// `argv` run by the image's /bin/sh after it sources Apptainer's
// environment scripts (/.singularity.d/env/*.sh, in glob order, then a
// SCIF app's, $SCIF_APPENV/*.sh, when --app set it), as
// Apptainer's action scripts do. The script is a constant: no name reaches
// the shell but through "$@".
std::vector<std::string> after_apptainer_env(std::vector<std::string> argv);

// For an image without /bin/sh (a static program, as HTCondor's images
// are): the plain `export NAME=value` lines of an environment script, as
// NAME=value (pure). Values bare or in quotes without expansions; any other
// line is skipped and counted in `skipped`.
std::vector<std::string> plain_exports(const std::string& script, int* skipped = nullptr);

// True when `prog` is an executable file, found as exec_program would find
// it (in the container).
bool program_found(const std::string& prog, const std::vector<std::string>& env);

// execve(2) with PATH search in the *container's* environment (execvpe(3)
// would search the caller's PATH). Never returns: on failure it prints why
// and exits 127 (not found) or 126 (found, not executable).
[[noreturn]] void exec_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                               const std::string& image_name);

}  // namespace rt::run
