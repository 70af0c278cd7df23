// The task side of the Slurm plugin (host); see include/rt/slurm.hpp.
#include "rt/slurm.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "hpc/pyxis.hpp"
#include "rt/error.hpp"
#include "store/root.hpp"
#include "store/staged.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

constexpr const char* kTaskVar = "RT_SLURM_TASK";

std::optional<std::string> host_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? std::optional<std::string>(v) : std::nullopt;
}

// The options, and argv0 (the task's program) when the plugin gave one.
hpc::PyxisTask read_task(std::string& argv0) {
  const char* text = std::getenv(kTaskVar);
  std::string lines = text ? text : "";
  std::string kept;
  for (const auto& line : util::split(lines, '\n'))
    if (line.starts_with("argv0="))
      argv0 = line.substr(6);
    else
      kept += line + "\n";
  return hpc::translate_pyxis(hpc::parse_pyxis_lines(kept), host_env);
}

// The job's writable container NAME on this node, made from `image` when
// missing (mode auto or create): STORE/staged/JOB/NAME.container, so that
// rt stage --clean and rt prune remove it with the job's other copies.
std::string container_dir(const hpc::PyxisTask& t, const std::string& name, const std::string& mode,
                          const store::SlurmPlace& where, const FullProgram& full) {
  if (where.job.empty())
    throw Error("--container-name=" + name + ": a named container belongs to a Slurm job, and this is none");
  const store::Root& root = store::Root::user(t.storage);
  const std::string rel = store::staged_dir(where.job);
  util::UniqueFd dir = root.dir(rel, true);
  const std::string path = root.sub(rel) + "/" + name + ".container";
  // The node's tasks take turns: the first makes it, the others find it.
  util::UniqueFd lock(::openat(dir.get(), (name + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock || ::flock(lock.get(), LOCK_EX) != 0) throw SysError{errno, "lock", path + ".lock"};
  struct stat st;
  bool exists = ::fstatat(dir.get(), (name + ".container").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists) {
    // pyxis refuses to create a container that exists; the tasks of the
    // step that made it are not refused.
    auto made_by = util::read_file_if_exists(path + ".step", 64);
    if (mode == "create" && made_by != where.step)
      throw Error("--container-name=" + name + ":create: the job already has a container `" + name + "` on " +
                  where.host);
    return path;
  }
  if (mode == "exec")
    throw Error("--container-name=" + name + ":exec: the job has no container `" + name + "` on " + where.host,
                "create it in an earlier step with --container-image");
  if (t.image.empty())
    throw Error("--container-name=" + name + ": the job has no container `" + name + "` on " + where.host +
                    ", and no --container-image to make it from",
                "give --container-image in the step that first uses the name");
  std::vector<std::string> convert{"convert", "-q", "--to", "dir"};
  if (!t.storage.empty()) convert.insert(convert.end(), {"--storage", t.storage});
  convert.insert(convert.end(), {t.image, path + ".part"});
  ::unlinkat(dir.get(), (name + ".container.part").c_str(), 0);
  if (full(convert) != 0)
    throw Error("--container-name=" + name + ": could not make the container from `" + t.image + "` on " +
                where.host + " (rt convert said why, above)");
  util::write_file_atomic_at(dir.get(), name + ".container.step", where.step);
  if (::renameat(dir.get(), (name + ".container.part").c_str(), dir.get(), (name + ".container").c_str()) != 0)
    throw SysError{errno, "rename", path};
  return path;
}

}  // namespace

std::optional<SlurmTask> slurm_task(const std::vector<std::string>& args, const FullProgram& full) {
  if (!std::getenv(kTaskVar)) return std::nullopt;
  std::string argv0;
  hpc::PyxisTask t = read_task(argv0);
  ::unsetenv(kTaskVar);
  if (argv0.empty()) throw Error("the Slurm plugin passed no program");
  SlurmTask out;
  std::string image = t.image;
  bool writable_dir = false;
  const store::SlurmPlace where = store::slurm_place();
  if (!t.name.empty()) {
    image = container_dir(t, t.name, t.name_mode, where, full);
    writable_dir = !t.readonly;
    out.on_host = t.name_mode == "no_exec";
  } else if (!t.save.empty()) {
    // Unnamed: a copy of this step's own, written from once the program ends.
    image = container_dir(t, "step-" + where.step, "create", where, full);
    writable_dir = true;
  }
  if (!t.save.empty()) {
    out.save = t.save;
    out.container = image;
  }
  if (out.on_host) {
    out.words.push_back(argv0);
  } else {
    out.words = {t.run ? "run" : "exec"};
    out.words.insert(out.words.end(), t.options.begin(), t.options.end());
    if (writable_dir) out.words.push_back("--write");
    out.words.insert(out.words.end(), {image, "--", argv0});
  }
  out.words.insert(out.words.end(), args.begin(), args.end());
  return out;
}

void slurm_check() {
  std::string argv0;
  read_task(argv0);
}

}  // namespace rt
