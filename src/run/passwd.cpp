// Synthesized /etc/passwd and /etc/group (pure).
#include "run/passwd.hpp"

#include "util/strings.hpp"

namespace rt::run {
namespace {

// Keeps the image's lines except those naming `name` or `id` (fields 0, 2).
std::string without_clashes(const std::string& text, const std::string& name, unsigned long id) {
  std::string out;
  const std::string ids = std::to_string(id);
  util::for_each_line(text, [&](std::string_view line) {
    if (line.empty()) return true;
    auto f = util::split(line, ':');
    if (f.size() >= 3 && (f[0] == name || f[2] == ids)) return true;
    out.append(line);
    out += '\n';
    return true;
  });
  return out;
}

}  // namespace

std::string synth_passwd(const std::string& image_passwd, const Identity& id) {
  std::string out = without_clashes(image_passwd, id.user, id.uid);
  out += id.user + ":x:" + std::to_string(id.uid) + ":" + std::to_string(id.gid) + ":" + id.user + ":" +
         (id.home.empty() ? "/" : id.home) + ":" + (id.shell.empty() ? "/bin/sh" : id.shell) + "\n";
  return out;
}

std::string synth_group(const std::string& image_group, const Identity& id) {
  std::string out = without_clashes(image_group, id.group, id.gid);
  out += id.group + ":x:" + std::to_string(id.gid) + ":\n";
  return out;
}

}  // namespace rt::run
