// The container's environment, computed on the host (pure).
#pragma once
#include <string>
#include <vector>

namespace rt::run {

struct EnvInputs {
  std::vector<std::string> host;   // the caller's environment
  bool clean = false;              // --clean-env
  std::vector<std::string> image;  // the image config's Env
  std::vector<std::string> unset;  // --unset-env globs
  std::vector<std::string> files;  // --env-file entries, already parsed, in order
  std::vector<std::string> set;    // --env K=V, in order
  std::string container;           // value of RT_CONTAINER
  std::string home;                // overrides HOME when not empty
};

// Order: host (or its essentials with --clean-env) -> image Env, except that
// launcher variables the host has are kept -> --unset-env -> --env-file ->
// --env -> RT_CONTAINER. Throws rt::Error on a malformed K=V.
// `changes`, when given, receives one human-readable line per change.
std::vector<std::string> compute_env(const EnvInputs& in, std::vector<std::string>* changes = nullptr);

// Launcher variables: set by Slurm, PMI/PMIx, Open MPI, MPICH/Hydra and the
// fabric libraries; an image never overrides them (MPI ranks need them).
bool is_launcher_var(const std::string& name);

// Parses an --env-file: "K=V" per line, blank lines and "#" comments
// skipped, values taken literally (as docker --env-file). Throws rt::Error
// naming the file and line.
std::vector<std::string> parse_env_file(const std::string& text, const std::string& file);

// Sets K=V in `env`, replacing any earlier K.
void set_var(std::vector<std::string>& env, const std::string& kv);
// Puts `dirs` (':'-joined) in front of the list variable `name`, or sets it.
void prepend_list(std::vector<std::string>& env, const std::string& name, const std::string& dirs);

inline constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

}  // namespace rt::run
