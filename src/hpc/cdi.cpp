// CDI spec reader (host): JSON and YAML specs (nvidia-ctk writes
// /etc/cdi/nvidia.yaml), both read into one JSON tree.
#include "hpc/cdi.hpp"

#include <fcntl.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/strings.hpp"

namespace rt::hpc {
namespace {

using nlohmann::json;

// A spec is read whole into memory only up to this size, and its tree is
// bounded: YAML aliases can make a cycle (a stack overflow when walked) or
// an exponential tree from a few lines ("billion laughs").
constexpr size_t kMaxSpecBytes = 4 << 20;
constexpr int kMaxDepth = 64;
constexpr size_t kMaxNodes = 1 << 20;

// Every field rt reads from a spec is a string, a list or a map: scalars
// stay strings.
json from_yaml(const YAML::Node& n, const std::string& file, int depth, size_t& nodes) {
  if (depth > kMaxDepth)
    throw Error("CDI spec `" + file + "` is nested deeper than " + std::to_string(kMaxDepth) +
                " levels (a YAML alias that refers to itself?)");
  if (++nodes > kMaxNodes)
    throw Error("CDI spec `" + file + "` expands to more than " + std::to_string(kMaxNodes) +
                " values (YAML aliases repeated?)");
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = from_yaml(kv.second, file, depth + 1, nodes);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& v : n) a.push_back(from_yaml(v, file, depth + 1, nodes));
      return a;
    }
    case YAML::NodeType::Scalar:
      return n.as<std::string>();
    default:
      return nullptr;
  }
}

// A spec file's tree; throws naming the file when it does not parse.
json parse_spec(const std::string& file, const std::string& text) {
  if (file.ends_with(".json")) return util::parse_json_object(text, "CDI spec `" + file + "`");
  try {
    size_t nodes = 0;
    return from_yaml(YAML::Load(text), file, 0, nodes);
  } catch (const YAML::Exception& e) {
    throw Error("CDI spec `" + file + "` is not valid YAML: " + e.what());
  }
}

// The values of option `name` in `args` ("--name V" or "--name=V").
std::vector<std::string> option_values(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size())
      out.push_back(args[++i]);
    else if (args[i].starts_with(name + "="))
      out.push_back(args[i].substr(name.size() + 1));
  }
  return out;
}

// Hooks would write the container's root, which rt keeps read-only; the two
// that NVIDIA's specs rely on (`nvidia-ctk hook NAME` or `nvidia-cdi-hook
// NAME`) are carried out by rt instead: create-symlinks becomes links made
// in the container's copy of their directory, update-ldcache puts its
// folders on the library path, enable-cuda-compat puts the image's CUDA
// compatibility libraries first when they are newer than the host's driver.
// Others are reported at -v.
void apply_hook(const json& hook, const std::string& spec, Injection& out) {
  const std::string what = "CDI spec `" + spec + "` hook";
  if (!hook.is_object()) throw Error(what + " is not an object");
  std::vector<std::string> args = util::json_strings(hook, "args", what);
  size_t at = args.size() > 1 && args[1] == "hook" ? 2 : 1;
  std::string name = at < args.size() ? args[at] : "";
  std::string path = util::json_string(hook, "path", what);
  if (name == "create-symlinks") {
    for (const auto& link : option_values(args, "--link")) {
      size_t sep = link.find("::");
      if (sep == std::string::npos || sep == 0 || link.size() < sep + 3 || link[sep + 2] != '/')
        throw Error("CDI spec `" + spec + "`: create-symlinks --link `" + link + "`: expected TARGET::/ABSOLUTE/LINK");
      out.cdi_links.push_back({link.substr(0, sep), link.substr(sep + 2)});
    }
  } else if (name == "update-ldcache") {
    for (const auto& dir : option_values(args, "--folder"))
      if (!dir.empty() && dir.front() == '/' &&
          std::find(out.lib_path.begin(), out.lib_path.end(), dir) == out.lib_path.end())
        out.lib_path.push_back(dir);
  } else if (name == "enable-cuda-compat") {
    // Needs the image: plan_injection does it (the image's compat libraries).
    for (const auto& v : option_values(args, "--host-driver-version")) out.cuda_compat_host = v;
  } else {
    out.notes.push_back("CDI spec `" + spec + "`: hook `" + path + (name.empty() ? "" : " " + name) + "` is not run");
  }
}

void apply_edits(const json& edits, const std::string& spec, Injection& out) {
  const std::string what = "CDI spec `" + spec + "` containerEdits";
  for (auto& e : util::json_strings(edits, "env", what)) out.env_set.push_back(std::move(e));
  for (const auto& d : util::json_array(edits, "deviceNodes", what)) {
    std::string in = util::json_string(d, "path", what + " deviceNodes");
    std::string path = util::json_string(d, "hostPath", what + " deviceNodes");
    if (path.empty()) path = in;
    if (path.empty()) throw Error("CDI spec `" + spec + "`: a device node without a path");
    if (!path.starts_with("/dev/")) out.cdi_mounts.push_back({path, in.empty() ? path : in});
    // Nodes under /dev come with the host's /dev.
  }
  for (const auto& m : util::json_array(edits, "mounts", what)) {
    std::string host = util::json_string(m, "hostPath", what + " mounts"),
                in = util::json_string(m, "containerPath", what + " mounts");
    if (host.empty() || in.empty() || in.front() != '/')
      throw Error("CDI spec `" + spec + "`: a mount needs hostPath and an absolute containerPath");
    out.cdi_mounts.push_back({host, in});
    // Libraries mounted by a spec are found through the library path
    // (specs leave that to an ldconfig hook).
    if (in.find(".so") != std::string::npos) {
      std::string dir = in.substr(0, in.rfind('/'));
      if (std::find(out.lib_path.begin(), out.lib_path.end(), dir) == out.lib_path.end()) out.lib_path.push_back(dir);
    }
  }
  for (const auto& h : util::json_array(edits, "hooks", what)) apply_hook(h, spec, out);
}

}  // namespace

void apply_cdi(const std::vector<std::string>& names, const std::vector<std::string>& dirs, Injection& out) {
  // The kinds asked for; specs are read in order only until each is found.
  std::map<std::string, std::vector<std::string>> wanted;  // kind -> device names
  for (const auto& name : names) {
    size_t eq = name.find('=');
    if (eq == std::string::npos)
      throw Error("--device `" + name + "`: expected VENDOR/CLASS=NAME (e.g. nvidia.com/gpu=all)");
    wanted[name.substr(0, eq)].push_back(name.substr(eq + 1));
  }
  std::map<std::string, std::pair<std::string, json>> specs;  // kind -> (file, spec)
  std::vector<std::string> unreadable;                         // "FILE: why", for the error
  for (const auto& dir : dirs) {
    if (specs.size() == wanted.size() || !util::is_directory(dir)) continue;
    std::vector<std::string> files;
    for (const auto& n : util::list_names(util::open_fd(dir, O_PATH | O_DIRECTORY).get(), dir))
      if (n.ends_with(".json") || n.ends_with(".yaml") || n.ends_with(".yml")) files.push_back(dir + "/" + n);
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      if (specs.size() == wanted.size()) break;
      try {
        auto text = util::read_file_if_exists(f, kMaxSpecBytes);
        if (!text) continue;
        json j = parse_spec(f, *text);
        std::string kind = util::json_string(j, "kind", "CDI spec `" + f + "`");
        if (kind.empty()) throw Error("CDI spec `" + f + "` has no `kind`");
        if (wanted.count(kind)) specs.try_emplace(kind, f, std::move(j));
      } catch (const Error& e) {
        unreadable.push_back(e.what());
      }
    }
  }
  for (const auto& [kind, devices] : wanted) {
    auto it = specs.find(kind);
    if (it == specs.end()) {
      std::string why;
      for (const auto& u : unreadable) why += "\n  " + u;
      throw Error("--device `" + kind + "=" + devices.front() + "`: no CDI spec for `" + kind + "` in " +
                  (dirs.empty() ? std::string("(no directories)") : util::join(dirs, ", ")) +
                  (why.empty() ? "" : "; specs that could not be read:" + why));
    }
    const auto& [file, spec] = it->second;
    const std::string what = "CDI spec `" + file + "`";
    apply_edits(util::json_object(spec, "containerEdits", what), file, out);
    for (const auto& dev : devices) {
      bool found = false;
      for (const auto& d : util::json_array(spec, "devices", what))
        if (dev == "all" || util::json_string(d, "name", what + " devices") == dev) {
          apply_edits(util::json_object(d, "containerEdits", what + " device"), file, out);
          found = true;
        }
      if (!found) throw Error("--device `" + kind + "=" + dev + "`: `" + file + "` has no device `" + dev + "`");
      out.notes.push_back("CDI: " + kind + "=" + dev + " from `" + file + "`");
    }
  }
}

}  // namespace rt::hpc
