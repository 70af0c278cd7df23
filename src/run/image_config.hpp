// The parts of an OCI image configuration that running needs (pure).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rt::run {

// From the OCI image spec's "config" object (image-spec config.md):
// Env, Entrypoint, Cmd, WorkingDir, User.
struct ImageConfig {
  std::vector<std::string> env;  // "K=V"
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string working_dir;
  std::string user;
};

// Parses an OCI/Docker image configuration document. `source` names it in
// errors. Throws rt::Error on malformed JSON or wrongly typed fields.
ImageConfig parse_image_config(std::string_view json, const std::string& source);

}  // namespace rt::run
