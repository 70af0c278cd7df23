// pyxis's srun options as rt exec's (host, pure); see pyxis.hpp.
#include "hpc/pyxis.hpp"

#include <unistd.h>

#include <set>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::hpc {
namespace {

const std::set<std::string> kPyxisKeys = {"image",      "mounts",     "workdir", "env",  "mount_home", "writable",
                                          "remap_root", "entrypoint", "name",    "save", "storage"};

bool flag(const std::map<std::string, std::string>& v, const std::string& key) {
  auto it = v.find(key);
  return it != v.end() && it->second == "1";
}

std::string value(const std::map<std::string, std::string>& v, const std::string& key) {
  auto it = v.find(key);
  return it == v.end() ? "" : it->second;
}

}  // namespace

std::map<std::string, std::string> parse_pyxis_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  for (const auto& line : util::split(text, '\n')) {
    if (line.empty()) continue;
    size_t eq = line.find('=');
    std::string key = line.substr(0, eq);
    if (eq == std::string::npos || !kPyxisKeys.count(key))
      throw Error("the Slurm plugin passed `" + line + "`, which this rt does not know",
                  "the plugin and rt must come from the same installation");
    std::string value = line.substr(eq + 1);
    // Mounts come from the site, the user and the plugin: all of them.
    if (key == "mounts" && out.count(key) && !out[key].empty())
      out[key] += "," + value;
    else
      out[key] = value;
  }
  return out;
}

std::string pyxis_image(const std::string& image) {
  if (image.empty()) throw Error("--container-image: no image given");
  if (image.front() == '/' || image.starts_with("./") || image.starts_with("../")) return image;
  std::string ref = image.starts_with("docker://") ? image.substr(9) : image;
  size_t at = ref.find('@'), slash = ref.find('/'), hash = ref.find('#');
  // "USER@REGISTRY#IMAGE" (enroot's credentials user), but not "IMAGE@sha256:...".
  if (at != std::string::npos && (slash == std::string::npos || at < slash) && !ref.substr(at + 1).starts_with("sha256:"))
    throw Error("--container-image=" + image + ": a user name in the image (USER@) is not supported",
                "log in to the registry once with rt login REGISTRY; rt then uses those credentials");
  if (hash != std::string::npos) {
    if (ref.find('#', hash + 1) != std::string::npos)
      throw Error("--container-image=" + image + ": more than one `#` (the form is REGISTRY#IMAGE[:TAG])");
    ref[hash] = '/';
  }
  return ref;
}

std::string pyxis_mount(const std::string& item) {
  auto parts = util::split(item, ':');
  if (parts.empty() || parts.size() > 3 || parts[0].empty())
    throw Error("--container-mounts: `" + item + "` is not SRC[:DST[:FLAGS]]");
  std::string src = parts[0], dst = parts.size() > 1 && !parts[1].empty() ? parts[1] : src;
  if (dst.front() != '/') throw Error("--container-mounts: `" + item + "`: the destination must be an absolute path");
  bool ro = false;
  if (parts.size() == 3)
    for (const auto& f : util::split(parts[2], '+')) {
      if (f == "ro") {
        ro = true;
      } else if (f == "rw" || f == "bind" || f == "rbind" || f == "private" || f == "rprivate" || f == "slave" ||
                 f == "rslave" || f == "nosuid" || f == "nodev" || f.empty()) {
        // rt's binds are recursive, private to the container, and without
        // setuid or device rights (a user namespace gives none).
      } else {
        throw Error("--container-mounts: `" + item + "`: rt cannot honour the flag `" + f + "`",
                    "rt accepts ro, rw, bind, rbind, private, rprivate, slave, rslave, nosuid and nodev");
      }
    }
  return src + ":" + dst + (ro ? ":ro" : "");
}

PyxisTask translate_pyxis(const std::map<std::string, std::string>& v,
                          const std::function<std::optional<std::string>(const std::string&)>& host_env) {
  PyxisTask t;
  std::string image = value(v, "image"), name = value(v, "name");
  if (!name.empty()) {
    size_t colon = name.rfind(':');
    if (colon != std::string::npos) {
      t.name_mode = name.substr(colon + 1);
      name = name.substr(0, colon);
      if (t.name_mode != "create" && t.name_mode != "exec" && t.name_mode != "no_exec" && t.name_mode != "auto")
        throw Error("--container-name=" + value(v, "name") + ": unknown mode `" + t.name_mode + "`",
                    "the modes are create, exec, no_exec and auto");
    }
    if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                            std::string::npos || name.front() == '.')
      throw Error("--container-name=" + value(v, "name") + ": a name is letters, digits, `_`, `.` and `-`");
    t.name = name;
    if (t.name_mode == "create" && image.empty())
      throw Error("--container-name=" + value(v, "name") + ": creating a container needs --container-image");
  }
  if (image.empty() && name.empty()) throw Error("--container-image or --container-name is needed");
  if (!image.empty()) t.image = pyxis_image(image);
  t.run = flag(v, "entrypoint");
  if (flag(v, "remap_root")) t.options.push_back("--root");
  if (v.count("mount_home") && v.at("mount_home") == "0") t.options.push_back("--no-home");
  t.readonly = v.count("writable") && v.at("writable") == "0";
  // A named container and one to save are writable copies of their own
  // (--write); only a plain image takes its writes in memory.
  if (flag(v, "writable") && t.name.empty() && value(v, "save").empty()) t.options.push_back("--write-tmpfs");
  for (const auto& m : util::split(value(v, "mounts"), ','))
    if (!m.empty()) t.options.insert(t.options.end(), {"--bind", pyxis_mount(m)});
  if (std::string w = value(v, "workdir"); !w.empty()) {
    if (w.front() != '/') throw Error("--container-workdir=" + w + ": the directory must be an absolute path");
    t.options.insert(t.options.end(), {"--cd", w});
  }
  for (const auto& n : util::split(value(v, "env"), ','))
    if (!n.empty())
      if (auto val = host_env(n)) t.options.insert(t.options.end(), {"--env", n + "=" + *val});
  t.save = value(v, "save");
  if (!t.save.empty() && t.save.front() != '/')
    throw Error("--container-save=" + t.save + ": the file must be an absolute path");
  // The site's storage=DIR is every user's: each has a store of their own
  // below it, by real uid (a name from the environment could be another's).
  t.storage = value(v, "storage");
  if (!t.storage.empty()) {
    t.storage += "/" + std::to_string(::getuid());
    t.options.insert(t.options.end(), {"--storage", t.storage});
  }
  return t;
}

}  // namespace rt::hpc
