// pyxis's srun options, as the Slurm plugin (slurm/rt_spank.c) hands them
// to a task's rt, turned into rt exec's (host, pure).
//
// The plugin passes what the user gave as "key=value" lines (RT_SLURM_TASK;
// "mounts" may come more than once: the site's, the user's, the plugin's):
// image, mounts, workdir, env, mount_home, writable, remap_root, entrypoint,
// name, save (pyxis's option names without "container-"), and the site's
// storage.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rt::hpc {

struct PyxisTask {
  bool run = false;                  // --container-entrypoint: rt run (ENTRYPOINT + the task's command)
  std::vector<std::string> options;  // rt exec options, before IMAGE
  std::string image;                 // rt's form of --container-image; "" with a name alone
  std::string name;                  // --container-name NAME
  std::string name_mode = "auto";    // its :MODE: create, exec, no_exec or auto
  bool readonly = false;             // --container-readonly (a named container is otherwise writable)
  std::string save;                  // --container-save PATH
  std::string storage;               // the site's store (plugstack storage=)
};

// The plugin's lines; throws rt::Error naming a line that is no key=value
// or a key rt does not know.
std::map<std::string, std::string> parse_pyxis_lines(const std::string& text);

// The task's rt exec: throws rt::Error naming the option and why for
// anything rt cannot honour. `host_env` reads the task's environment
// (--container-env takes values from it).
PyxisTask translate_pyxis(const std::map<std::string, std::string>& values,
                          const std::function<std::optional<std::string>(const std::string&)>& host_env);

// enroot's image forms in rt's: "docker://X" and "REGISTRY#IMAGE[:TAG]"
// become references, paths stay paths; "USER@..." (credentials in the
// name) is refused.
std::string pyxis_image(const std::string& image);

// One --container-mounts item, "SRC[:DST[:FLAGS]]" with FLAGS joined by
// '+', as rt's --bind value "SRC:DST[:ro]".
std::string pyxis_mount(const std::string& item);

}  // namespace rt::hpc
