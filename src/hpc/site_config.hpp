// The site configuration, /etc/rt/rt.conf (or $RT_CONF): where the host's
// MPI, GPU driver and fabric libraries are, the way admins describe them.
//   # comment
//   key = value words...
// Keys: ld_cache, openmpi.library, openmpi.paths, mpich.library,
// mpich.paths, gpu.libraries, gpu.binaries, gpu.paths, gpu.procfs, gpu.dev,
// ib.libraries, ib.paths, ib.devices, fabric.libraries, fabric.paths,
// glibc.replace (yes|no), cdi.dirs, squashfs.linger, image.policy (the trust
// policy file in place of /etc/containers/policy.json), sif.keys (OpenPGP
// keys every SIF image run must verify with), store.site (directories of
// the site's read-only image store, searched in order after the user's
// store: store/site.hpp), lazy.cache-size (the node cache of oras://
// images: squash/lazy.hpp), overlay.linger (how long an --overlay
// directory stays mounted for the next container: run/overlay_dir.hpp).
// Unknown keys are an error (a typo must not pass).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace rt::hpc {

struct SiteConfig {
  std::string file;  // where it came from, for messages; "" for built-in defaults
  std::map<std::string, std::vector<std::string>> values;
  // The words of `key`, or `fallback` when the file does not set it.
  std::vector<std::string> get(const std::string& key, std::vector<std::string> fallback = {}) const;
};

// Parses text; throws rt::Error naming file and line.
SiteConfig parse_site_config(const std::string& text, const std::string& file);

// $RT_CONF, else /etc/rt/rt.conf, else built-in defaults only; read once
// per process.
const SiteConfig& load_site_config();

}  // namespace rt::hpc
