// OCI image configuration parsing (pure).
#include "run/image_config.hpp"

#include <nlohmann/json.hpp>

#include "rt/error.hpp"

namespace rt::run {
namespace {

using nlohmann::json;

std::vector<std::string> string_list(const json& obj, const char* key, const std::string& source) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array()) throw Error("`" + source + "`: config." + key + " is not a list");
  for (const auto& v : *it) {
    if (!v.is_string()) throw Error("`" + source + "`: config." + key + " holds a non-string");
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::string string_field(const json& obj, const char* key, const std::string& source) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_string()) throw Error("`" + source + "`: config." + key + " is not a string");
  return it->get<std::string>();
}

}  // namespace

ImageConfig parse_image_config(std::string_view text, const std::string& source) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) throw Error("`" + source + "` is not a JSON image configuration");
  ImageConfig c;
  auto it = doc.find("config");
  if (it == doc.end() || it->is_null()) return c;
  if (!it->is_object()) throw Error("`" + source + "`: `config` is not an object");
  const json& cfg = *it;
  c.env = string_list(cfg, "Env", source);
  c.entrypoint = string_list(cfg, "Entrypoint", source);
  c.cmd = string_list(cfg, "Cmd", source);
  c.working_dir = string_field(cfg, "WorkingDir", source);
  c.user = string_field(cfg, "User", source);
  return c;
}

}  // namespace rt::run
