// rt login (host).
#include "image/registry.hpp"
#include "rt/image.hpp"
#include "store/ref.hpp"

namespace rt {

std::string login(const std::string& registry, const std::string& user, const std::string& password,
                  const LoginOptions& o) {
  std::string reg = registry;
  if (reg.find('/') != std::string::npos || reg.find('.') == std::string::npos)
    reg = store::parse_reference(reg + "/x").registry;
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

}  // namespace rt
