// Site configuration file (host).
#include "hpc/site_config.hpp"

#include <cstdlib>
#include <set>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::hpc {
namespace {

const std::set<std::string> kSiteKeys = {
    "ld_cache",     "openmpi.library",  "openmpi.paths", "mpich.library",   "mpich.paths",   "gpu.libraries",
    "gpu.binaries", "gpu.paths",        "gpu.procfs",    "gpu.dev",         "ib.libraries",  "ib.paths",
    "ib.devices",   "fabric.libraries", "fabric.paths",  "glibc.replace",   "cdi.dirs",      "squashfs.linger",
    "image.policy", "sif.keys",         "store.site",    "lazy.cache-size", "overlay.linger"};

std::string trim(const std::string& s) { return util::trim(s, " \t\r"); }

}  // namespace

std::vector<std::string> SiteConfig::get(const std::string& key, std::vector<std::string> fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second;
}

SiteConfig parse_site_config(const std::string& text, const std::string& file) {
  SiteConfig c;
  c.file = file;
  int n = 0;
  for (const auto& raw : util::split(text, '\n')) {
    ++n;
    std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos)
      throw Error("site configuration `" + file + "` line " + std::to_string(n) + ": expected `key = value`");
    std::string key = trim(line.substr(0, eq));
    if (!kSiteKeys.count(key))
      throw Error("site configuration `" + file + "` line " + std::to_string(n) + ": unknown key `" + key + "`");
    std::vector<std::string> words;
    for (const auto& w : util::split(line.substr(eq + 1), ' '))
      if (!trim(w).empty()) words.push_back(trim(w));
    if (key == "glibc.replace" && (words.size() != 1 || (words[0] != "yes" && words[0] != "no")))
      throw Error("site configuration `" + file + "` line " + std::to_string(n) + ": glibc.replace is yes or no");
    if (key == "store.site")
      for (const auto& w : words)
        if (!w.starts_with("/"))
          throw Error("site configuration `" + file + "` line " + std::to_string(n) + ": store.site takes absolute " +
                      "directories, not `" + w + "`");
    c.values[key] = std::move(words);
  }
  return c;
}

namespace {

SiteConfig read_site_config() {
  const char* env = std::getenv("RT_CONF");
  std::string file = env && *env ? env : "/etc/rt/rt.conf";
  auto text = util::read_file_if_exists(file, 1 << 20);
  if (!text) {
    if (env && *env) throw Error("site configuration `" + file + "` (from RT_CONF) does not exist");
    return {};
  }
  return parse_site_config(*text, file);
}

}  // namespace

const SiteConfig& load_site_config() {
  // Read once per process: a start that checks for sif.keys and then
  // injects host libraries reads the file once.
  static const SiteConfig conf = read_site_config();
  return conf;
}

}  // namespace rt::hpc
