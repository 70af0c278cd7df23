// What a SIF file rt writes says of its image beside the root filesystem
// (host): a definition file, as `apptainer inspect --deffile` shows it,
// and the labels, as JSON; and inside it, as Apptainer's own images hold
// them in /.singularity.d, an environment script and the runscript. All
// made from the image's OCI configuration.
#pragma once
#include <string>

namespace rt::image {

struct SifMetadata {
  std::string definition;
  std::string labels;       // a JSON object of strings
  std::string environment;  // export lines, for /bin/sh (an environment script)
  std::string runscript;    // #!/bin/sh, then the %runscript section's lines
};

// `config`: the image's configuration document, named `shown` in errors;
// `from`: the image's name, for the definition's header. The definition's
// %environment exports the config's Env, its %runscript runs Entrypoint
// and Cmd as Apptainer runs a Docker image (arguments replace Cmd), its
// %labels hold Labels. Throws rt::Error when the document is not JSON.
SifMetadata sif_metadata(const std::string& config, const std::string& shown, const std::string& from);

}  // namespace rt::image
