// The container's environment (pure).
#include "run/env.hpp"

#include <algorithm>
#include <array>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::run {
namespace {

constexpr std::array kLauncherPrefixes = {"SLURM_", "SLURMD_", "PMI",    "OMPI_",  "OPAL_", "PRTE_", "ORTE_",
                                          "HYDRA_", "MPIR_",   "I_MPI_", "MPICH_", "UCX_",  "FI_",   "HWLOC_"};

// Kept by --clean-env besides the launcher variables.
constexpr std::array kEssentials = {"HOME", "USER", "LOGNAME", "TERM", "LANG", "TZ"};

std::string key_of(const std::string& kv) { return kv.substr(0, kv.find('=')); }

bool valid_name(std::string_view k) {
  if (k.empty()) return false;
  return std::all_of(k.begin(), k.end(), [](char c) { return c != '=' && c != '\0'; });
}

// A small ordered map: the environment keeps the order variables were set.
class Env {
public:
  void set(const std::string& kv, std::vector<std::string>* changes, const char* why) {
    std::string k = key_of(kv);
    auto it = find(k);
    if (it != vars_.end()) {
      if (*it == kv) return;
      if (changes)
        changes->push_back("env " + std::string(why) + ": " + kv + " (was " + it->substr(k.size() + 1) + ")");
      *it = kv;
    } else {
      if (changes) changes->push_back("env " + std::string(why) + ": " + kv);
      vars_.push_back(kv);
    }
  }
  bool has(const std::string& k) const { return find(k) != vars_.end(); }
  void unset_glob(const std::string& glob, std::vector<std::string>* changes) {
    std::erase_if(vars_, [&](const std::string& kv) {
      bool hit = util::glob_match(glob, key_of(kv));
      if (hit && changes) changes->push_back("env unset: " + key_of(kv));
      return hit;
    });
  }
  std::vector<std::string> take() { return std::move(vars_); }

private:
  std::vector<std::string>::iterator find(const std::string& k) {
    return std::find_if(vars_.begin(), vars_.end(), [&](const std::string& kv) {
      return kv.size() > k.size() && kv[k.size()] == '=' && kv.compare(0, k.size(), k) == 0;
    });
  }
  std::vector<std::string>::const_iterator find(const std::string& k) const { return const_cast<Env*>(this)->find(k); }
  std::vector<std::string> vars_;
};

void check_kv(const std::string& kv, const std::string& where) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || !valid_name(std::string_view(kv).substr(0, eq)))
    throw Error("bad environment assignment " + util::quoted(kv) + " in " + where + ": expected NAME=VALUE");
}

}  // namespace

bool is_launcher_var(const std::string& name) {
  return std::any_of(kLauncherPrefixes.begin(), kLauncherPrefixes.end(),
                     [&](const char* p) { return name.starts_with(p); });
}

std::vector<std::string> compute_env(const EnvInputs& in, std::vector<std::string>* changes) {
  Env env;
  for (const auto& kv : in.host) {
    if (kv.find('=') == std::string::npos) continue;
    std::string k = key_of(kv);
    if (in.clean && !is_launcher_var(k) && std::find(kEssentials.begin(), kEssentials.end(), k) == kEssentials.end())
      continue;
    env.set(kv, nullptr, "");
  }
  for (const auto& kv : in.image) {
    check_kv(kv, "the image configuration");
    std::string k = key_of(kv);
    if (is_launcher_var(k) && env.has(k)) continue;  // the launcher's value wins
    env.set(kv, changes, "from image");
  }
  if (!env.has("PATH")) env.set(std::string("PATH=") + kDefaultPath, changes, "default");
  if (!in.home.empty()) env.set("HOME=" + in.home, changes, "home");
  for (const auto& g : in.unset) env.unset_glob(g, changes);
  for (const auto& kv : in.files) {
    check_kv(kv, "--env-file");
    env.set(kv, changes, "--env-file");
  }
  for (const auto& kv : in.set) {
    check_kv(kv, "--env");
    env.set(kv, changes, "--env");
  }
  env.set("RT_CONTAINER=" + in.container, changes, "set");
  return env.take();
}

std::vector<std::string> parse_env_file(const std::string& text, const std::string& file) {
  std::vector<std::string> out;
  size_t start = 0;
  int lineno = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line.erase(0, first);
    if (line.starts_with("export ")) line.erase(0, 7);
    size_t eq = line.find('=');
    if (eq == std::string::npos || !valid_name(std::string_view(line).substr(0, eq)) || line.find_first_of(" \t") < eq)
      throw Error("`" + file + "` line " + std::to_string(lineno) + ": expected NAME=VALUE, got " + util::quoted(line));
    out.push_back(line);
  }
  return out;
}

void set_var(std::vector<std::string>& env, const std::string& kv) {
  const size_t eq = kv.find('=');
  const std::string prefix = eq == std::string::npos ? kv + "=" : kv.substr(0, eq + 1);
  std::erase_if(env, [&](const std::string& e) { return e.starts_with(prefix); });
  env.push_back(kv);
}

void prepend_list(std::vector<std::string>& env, const std::string& name, const std::string& dirs) {
  if (dirs.empty()) return;
  const std::string prefix = name + "=";
  for (auto& kv : env)
    if (kv.starts_with(prefix)) {
      const std::string old = kv.substr(prefix.size());
      kv = prefix + dirs + (old.empty() ? "" : ":" + old);
      return;
    }
  env.push_back(prefix + dirs);
}

}  // namespace rt::run
