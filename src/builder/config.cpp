// The image config's fields and history (host).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>

#include "builder/builder.hpp"
#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::builder {

std::string now_utc() { return util::utc_time(::time(nullptr)); }

// A history entry with "created" when the time is known (a base without
// one has none: an empty string is not a time, and loaders refuse it).
json with_created(json h, const std::string& created) {
  if (!created.empty()) h["created"] = created;
  return h;
}

std::string seconds_since(std::chrono::steady_clock::time_point t0) {
  char t[32];
  std::snprintf(t, sizeof t, "%.1f s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return t;
}

std::string lower(std::string s) {
  return util::ascii_lower(std::move(s));
}

json& cfg_of(State& s) {
  if (!s.config.contains("config") || !s.config["config"].is_object()) s.config["config"] = json::object();
  return s.config["config"];
}

std::string cfg_string(const State& s, const char* key) {
  if (!s.config.contains("config") || !s.config["config"].is_object()) return {};
  const json& c = s.config["config"];
  return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : std::string();
}

std::vector<std::string> cfg_env(const State& s) {
  std::vector<std::string> out;
  if (s.config.contains("config") && s.config["config"].is_object() && s.config["config"].contains("Env") &&
      s.config["config"]["Env"].is_array())
    for (const auto& e : s.config["config"]["Env"])
      if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

// A history entry for each base layer that has none (an image imported
// from a tree), so that its non-empty entries match its layers.
void base_history(State& st, const std::string& base) {
  json& h = st.config["history"];
  if (!h.is_array()) h = json::array();
  size_t with_layer = 0;
  for (const auto& e : h)
    if (!e.is_object() || !e.value("empty_layer", false)) ++with_layer;
  for (; with_layer < st.layers.size(); ++with_layer)
    h.push_back(with_created({{"created_by", "the tree of " + base}, {"comment", "rt build (base)"}}, st.created));
}

namespace {

// Go durations as Docker writes them (30s, 1m30s, 500ms) in nanoseconds.
int64_t duration_ns(const std::string& v, const std::string& where) {
  int64_t total = 0;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j < v.size() && (std::isdigit(static_cast<unsigned char>(v[j])) || v[j] == '.')) ++j;
    size_t u = j;
    while (u < v.size() && std::isalpha(static_cast<unsigned char>(v[u]))) ++u;
    static const std::map<std::string, double> units = {{"ns", 1},  {"us", 1e3}, {"ms", 1e6},
                                                        {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
    auto unit = units.find(v.substr(j, u - j));
    if (j == i || unit == units.end()) throw Error(where + ": `" + v + "` is not a duration (30s, 1m30s, 500ms)");
    total += static_cast<int64_t>(std::stod(v.substr(i, j - i)) * unit->second);
    i = u;
  }
  return total;
}

}  // namespace

// HEALTHCHECK [--interval=D --timeout=D --start-period=D --start-interval=D
// --retries=N] CMD ... | NONE, as Docker's config records it.
json healthcheck(const Instruction& ins, const std::string& where) {
  static const std::map<std::string, std::string> names = {{"interval", "Interval"},
                                                           {"timeout", "Timeout"},
                                                           {"start-period", "StartPeriod"},
                                                           {"start-interval", "StartInterval"},
                                                           {"retries", "Retries"}};
  json h = json::object();
  for (const auto& [f, v] : ins.flags) {
    auto n = names.find(f);
    if (n == names.end()) throw Error(where + ": HEALTHCHECK has no flag --" + f);
    if (f == "retries")
      h[n->second] = std::atoi(v.c_str());
    else
      h[n->second] = duration_ns(v, where + ": --" + f);
  }
  const std::string rest = util::trim(ins.args);
  if (lower(rest) == "none") {
    h["Test"] = {"NONE"};
    return h;
  }
  const size_t sp = rest.find_first_of(" \t");
  if (sp == std::string::npos || lower(rest.substr(0, sp)) != "cmd")
    throw Error(where + ": HEALTHCHECK takes CMD COMMAND or NONE");
  const std::string cmd = util::trim(rest.substr(sp));
  auto j = json::parse(cmd, nullptr, false);
  if (j.is_array() && !j.empty() && std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_string(); })) {
    h["Test"] = json::array({"CMD"});
    for (const auto& e : j) h["Test"].push_back(e);
  } else {
    h["Test"] = {"CMD-SHELL", cmd};
  }
  return h;
}

}  // namespace rt::builder
