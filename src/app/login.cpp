// rt login (host).
#include "image/registry.hpp"
#include "rt/image.hpp"
#include "store/ref.hpp"

namespace rt {

std::string login(const std::string& registry, const std::string& user, const std::string& password) {
  std::string reg = registry;
  if (reg.find('/') != std::string::npos || reg.find('.') == std::string::npos)
    reg = store::parse_reference(reg + "/x").registry;
  image::save_docker_config_credentials(reg, user, password);
  return reg;
}

}  // namespace rt
