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

namespace rt::hpc {
namespace {

using nlohmann::json;

// Every field rt reads from a spec is a string, a list or a map: scalars
// stay strings.
json from_yaml(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = from_yaml(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& v : n) a.push_back(from_yaml(v));
      return a;
    }
    case YAML::NodeType::Scalar:
      return n.as<std::string>();
    default:
      return nullptr;
  }
}

// A spec file's tree, or a discarded value if it does not parse.
json parse_spec(const std::string& file, const std::string& text) {
  if (file.ends_with(".json")) return json::parse(text, nullptr, false);
  try {
    return from_yaml(YAML::Load(text));
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
  if (!hook.is_object()) throw Error("CDI spec `" + spec + "`: a hook is not an object");
  std::vector<std::string> args;
  for (const auto& a : hook.value("args", json::array()))
    if (a.is_string()) args.push_back(a.get<std::string>());
  size_t at = args.size() > 1 && args[1] == "hook" ? 2 : 1;
  std::string name = at < args.size() ? args[at] : "";
  std::string path = hook.value("path", "");
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
  if (!edits.is_object()) return;
  for (const auto& e : edits.value("env", json::array()))
    if (e.is_string()) out.env_set.push_back(e.get<std::string>());
  for (const auto& d : edits.value("deviceNodes", json::array())) {
    std::string path = d.value("hostPath", d.value("path", ""));
    if (path.empty()) throw Error("CDI spec `" + spec + "`: a device node without a path");
    if (!path.starts_with("/dev/")) out.cdi_mounts.push_back({path, d.value("path", path)});
    // Nodes under /dev come with the host's /dev.
  }
  for (const auto& m : edits.value("mounts", json::array())) {
    std::string host = m.value("hostPath", ""), in = m.value("containerPath", "");
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
  for (const auto& h : edits.value("hooks", json::array())) apply_hook(h, spec, out);
}

}  // namespace

void apply_cdi(const std::vector<std::string>& names, const std::vector<std::string>& dirs, Injection& out) try {
  // kind -> (spec file, parsed)
  std::map<std::string, std::pair<std::string, json>> specs;
  for (const auto& dir : dirs) {
    if (!util::is_directory(dir)) continue;
    std::vector<std::string> files;
    for (const auto& n : util::list_names(util::open_fd(dir, O_PATH | O_DIRECTORY).get(), dir))
      if (n.ends_with(".json") || n.ends_with(".yaml") || n.ends_with(".yml")) files.push_back(dir + "/" + n);
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto text = util::read_file_if_exists(f, 4 << 20);
      if (!text) continue;
      json j = parse_spec(f, *text);
      if (j.is_discarded() || !j.is_object() || !j.contains("kind") || !j["kind"].is_string())
        throw Error("CDI spec `" + f + "` is not a valid spec with a `kind`");
      std::string kind = j["kind"].get<std::string>();
      specs.emplace(std::move(kind), std::make_pair(f, std::move(j)));
    }
  }
  for (const auto& name : names) {
    size_t eq = name.find('=');
    if (eq == std::string::npos)
      throw Error("--device `" + name + "`: expected VENDOR/CLASS=NAME (e.g. nvidia.com/gpu=all)");
    std::string kind = name.substr(0, eq), dev = name.substr(eq + 1);
    auto it = specs.find(kind);
    if (it == specs.end())
      throw Error("--device `" + name + "`: no CDI spec for `" + kind + "` in " +
                  (dirs.empty() ? std::string("(no directories)") : dirs.front() + " or " + dirs.back()));
    const auto& [file, spec] = it->second;
    apply_edits(spec.value("containerEdits", json::object()), file, out);
    bool found = false;
    for (const auto& d : spec.value("devices", json::array()))
      if (dev == "all" || d.value("name", "") == dev) {
        apply_edits(d.value("containerEdits", json::object()), file, out);
        found = true;
      }
    if (!found) throw Error("--device `" + name + "`: `" + file + "` has no device `" + dev + "`");
    out.notes.push_back("CDI: " + name + " from `" + file + "`");
  }
} catch (const nlohmann::json::exception& e) {
  throw Error(std::string("a CDI spec has a field of the wrong type: ") + e.what());
}

}  // namespace rt::hpc
