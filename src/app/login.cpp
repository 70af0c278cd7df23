// rt login (host).
#include "image/registry.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "store/ref.hpp"

namespace rt {
namespace {

// "ghcr.io", "localhost:5000"; a name without a dot ("docker", a Hub
// repository) as a reference would have it ("docker.io").
std::string registry_host(const std::string& registry) {
  if (registry.find('/') != std::string::npos || registry.find('.') == std::string::npos)
    return store::parse_reference(registry + "/x").registry;
  return registry;
}

}  // namespace

std::string login(const std::string& registry, const std::string& user, const std::string& password,
                  const LoginOptions& o) {
  const std::string reg = registry_host(registry);
  if (o.check) {
    image::RegistryOptions ro;
    ro.ca_file = o.ca_file;
    ro.insecure = o.insecure;
    ro.plain_http = o.plain_http;
    ro.username = user;
    ro.password = password;
    image::Registry(store::parse_reference(reg + "/x"), ro).check_credentials();
  }
  image::save_docker_config_credentials(reg, user, password);
  return reg;
}

std::vector<std::string> logout(const std::string& registry) {
  if (registry.empty()) return image::remove_docker_config_credentials("");
  const std::string reg = registry_host(registry);
  auto removed = image::remove_docker_config_credentials(reg);
  if (removed.empty())
    throw Error("no credentials for `" + reg + "` in `" + image::home_docker_config() + "`",
                "rt login " + reg + " saves some");
  return removed;
}

}  // namespace rt
