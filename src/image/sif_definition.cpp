// A SIF file's definition and labels, from the image's config (host).
#include "image/sif_definition.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

using nlohmann::json;

// `s` as one word for /bin/sh.
std::string sh_word(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The strings of `j[key]` (a list), or none.
std::vector<std::string> strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (auto it = j.find(key); it != j.end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

// A name /bin/sh can export.
bool sh_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); });
}

std::string words(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& w : v) out += (out.empty() ? "" : " ") + sh_word(w);
  return out;
}

// One line of a definition's %labels: its value on one line.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

SifMetadata sif_metadata(const std::string& config, const std::string& shown, const std::string& from) {
  const json doc = json::parse(config, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) throw Error("`" + shown + "` is not a JSON object");
  const json c = doc.value("config", json::object());
  json labels = json::object();
  if (auto it = c.find("Labels"); it != c.end() && it->is_object())
    for (const auto& [k, v] : it->items())
      if (v.is_string()) labels[k] = v;

  // The environment and the runscript as Apptainer's own files hold
  // them; the definition shows them indented in its sections.
  std::string environment, runscript;
  for (const auto& kv : strings(c, "Env")) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || !sh_name(kv.substr(0, eq))) continue;
    environment += "export " + kv.substr(0, eq) + "=" + sh_word(kv.substr(eq + 1)) + "\n";
  }
  // As Apptainer runs a Docker image: arguments replace Cmd, Entrypoint
  // stays; with neither, a shell.
  const std::string entry = words(strings(c, "Entrypoint")), cmd = words(strings(c, "Cmd"));
  const std::string given = entry.empty() ? "\"$@\"" : entry + " \"$@\"";
  const std::string fallback =
      entry.empty() && cmd.empty() ? "/bin/sh" : entry + (entry.empty() || cmd.empty() ? "" : " ") + cmd;
  runscript = "if [ $# -gt 0 ]; then\n    exec " + given + "\nfi\nexec " + fallback + "\n";
  auto indented = [](const std::string& text) {
    std::string out;
    for (const auto& line : util::split(text, '\n'))
      if (!line.empty()) out += "    " + line + "\n";
    return out;
  };

  std::string d = "Bootstrap: docker\nFrom: " + one_line(from) + "\n";
  d += "# Written by rt convert from the image's configuration.\n";
  if (!labels.empty()) {
    d += "\n%labels\n";
    for (const auto& [k, v] : labels.items()) d += "    " + one_line(k) + " " + one_line(v.get<std::string>()) + "\n";
  }
  if (!environment.empty()) d += "\n%environment\n" + indented(environment);
  d += "\n%runscript\n" + indented(runscript);
  return {d, labels.dump(2) + "\n", environment, "#!/bin/sh\n" + runscript};
}

}  // namespace rt::image
