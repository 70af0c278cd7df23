// rt stage: images copied once to every node of a Slurm job, by Slurm's
// own tree broadcast (sbcast), for the job's steps to run from local disk;
// and the same for a step whose nodes lack a stored image (host). The
// files on the nodes: store/staged.hpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "app/lock.hpp"
#include "app/store.hpp"
#include "image/child.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "run/image.hpp"
#include "squash/sqfs.hpp"
#include "store/lookup.hpp"
#include "store/staged.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

using Clock = std::chrono::steady_clock;

// What goes to the nodes for one image.
struct Source {
  std::string shown;  // as the user named it
  std::string file;   // the SquashFS or SIF file sent
  std::string key, ext;
  std::string path_key;  // a file's: its PKEY.ref note goes too (store/staged.hpp)
  uint64_t size = 0;
};

uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw SysError{errno, "stat", path};
  return static_cast<uint64_t>(st.st_size);
}

// A stored image (pulled first when it is a reference the store lacks, as
// SquashFS) as one SquashFS file: the store's own, a copy staged here
// earlier, or converted into `work`.
Source named_source(app::Store& store, const std::string& image, const std::string& job, const app::WorkDir& work,
                    const StoreOptions& o) {
  Source s;
  s.shown = image;
  const std::string name = store::without_scheme(image);
  s.key = store::staged_key_for_name(name);
  s.ext = "sqfs";
  std::optional<std::string> dir = store::find_image(store.dir(), name);
  if (!dir) {
    if (auto staged = store::find_staged(store.dir(), job, s.key, s.ext)) {
      s.file = *staged;
      s.size = file_size(s.file);
      return s;
    }
    // The site's store, after the user's, as exec searches them: its file,
    // checked against the index, goes as it is (a SIF file stays one).
    if (auto site = run::open_site_image(name, o.storage)) {
      s.file = site->rootfs;
      s.ext = site->sif ? "sif" : "sqfs";
      s.size = file_size(s.file);
      return s;
    }
    if (store::name_kind(image) != store::NameKind::Reference)
      throw Error("image `" + image + "` is not in store `" + store.root() + "`");
    PullOptions po;
    po.storage = o.storage;
    po.verbosity = o.verbosity;
    po.format = "sqfs";
    po.if_missing = true;
    pull(name, po);
    dir = store::find_image(store.dir(), name);
    if (!dir) throw Error("image `" + image + "`: pulled, yet not in store `" + store.root() + "`");
  }
  if (std::string file = *dir + "/" + store::kSquashFile; util::path_exists(file)) {
    s.file = file;
  } else {
    s.file = work.path() + "/image.sqfs";
    ConvertOptions co;
    co.storage = o.storage;
    co.verbosity = o.verbosity < 0 ? -1 : o.verbosity;
    co.to = "sqfs";
    util::note("`" + image + "` is kept as a directory: making one SquashFS file of it to send");
    convert(name, s.file, co);
  }
  s.size = file_size(s.file);
  return s;
}

// An image file named by a path: sent as it is.
Source file_source(const std::string& image) {
  Source s;
  s.shown = image;
  const std::string path = util::normalize_path(store::without_scheme(image), util::current_dir());
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw SysError{errno, "stat", path};
  if (S_ISDIR(st.st_mode))
    throw Error("image `" + image + "` is a directory: rt stage sends SquashFS and SIF files",
                "rt convert " + image + " IMAGE.sqfs, then rt stage IMAGE.sqfs and run that");
  const squash::FileKind kind = squash::file_kind(path);
  if (!S_ISREG(st.st_mode) || kind == squash::FileKind::Other)
    throw Error("image `" + image + "`: `" + path + "` is neither a SquashFS nor a SIF file");
  if (std::string why = store::foreign_path(path); !why.empty())
    util::warn("image `" + image + "`: " + why + "; another user may have placed or changed it");
  s.file = path;
  s.key = store::staged_key_for_file(path, st);
  s.path_key = store::staged_key_for_path(path);
  s.ext = kind == squash::FileKind::Sif ? "sif" : "sqfs";
  s.size = static_cast<uint64_t>(st.st_size);
  return s;
}

// sbcast FILE to DEST on the nodes of `target` (JOB or JOB.STEP), again
// and again until `deadline` while it fails (a node that has not made its
// directory yet); throws rt::Error with sbcast's last words, which name
// the nodes.
void broadcast(const std::string& file, const std::string& dest, const std::string& target, const app::WorkDir& work,
               Clock::time_point deadline) {
  const std::string log = work.path() + "/sbcast.err";
  for (int attempt = 1;; ++attempt) {
    util::UniqueFd err = util::open_fd(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = image::run_program({"sbcast", "-f", "-j", target, file, dest}, {.err = err.get()});
    if (rc == 0) return;
    if (Clock::now() >= deadline) {
      std::string said = util::trim(util::read_file_if_exists(log, 65536).value_or(""));
      throw Error("sbcast of `" + file + "` to " + dest + " failed (exit " + std::to_string(rc) + ", attempt " +
                  std::to_string(attempt) + ")" + (said.empty() ? "" : ": " + said));
    }
    ::usleep(200 * 1000);
  }
}

// Sends `s` to ROOT/staged/JOB/KEY.part, then its KEY.ready note, and a
// file's PKEY.ref note.
void send(const app::Store& store, const Source& s, const std::string& job, const std::string& target,
          const app::WorkDir& work, Clock::time_point deadline) {
  const std::string dir = store.dir().sub(store::staged_dir(job));
  broadcast(s.file, dir + "/" + s.key + ".part", target, work, deadline);
  auto send_note = [&](const std::string& text, const std::string& name) {
    const std::string note = work.path() + "/" + name;
    util::UniqueFd fd = util::open_fd(note, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    util::write_all(fd.get(), text, note);
    broadcast(note, dir + "/" + name, target, work, deadline);
  };
  send_note(store::staged_ready_note(s.size, s.ext), s.key + ".ready");
  if (!s.path_key.empty()) send_note(store::staged_ref_note(s.key, s.ext), s.path_key + ".ref");
}

// Runs this program with `args` once on every node of the job (a step of
// one task per node).
void on_every_node(const std::vector<std::string>& args, const StoreOptions& o) {
  const char* nodes = std::getenv("SLURM_JOB_NUM_NODES");
  if (!nodes) nodes = std::getenv("SLURM_NNODES");
  std::vector<std::string> argv{"srun", "--overlap", "--mpi=none", "--kill-on-bad-exit=1", "--ntasks-per-node=1"};
  // One task per node, whatever task count the allocation was asked for.
  if (nodes) argv.insert(argv.end(), {std::string("--nodes=") + nodes, std::string("--ntasks=") + nodes});
  argv.push_back(util::self_program());
  argv.insert(argv.end(), args.begin(), args.end());
  if (!o.storage.empty()) argv.insert(argv.end(), {"--storage", o.storage});
  if (int rc = image::run_program(argv); rc != 0)
    throw Error("rt " + util::join(args, ' ') + " on every node of the job failed (srun: exit " + std::to_string(rc) +
                "; it said which node, above)");
}

std::string job_of_allocation() {
  const store::SlurmPlace where = store::slurm_place();
  if (where.job.empty())
    throw Error(
        "rt stage copies images to the nodes of a Slurm job: run it in a job script (sbatch) or an "
        "allocation (salloc), before the steps (srun) that use them");
  return where.job;
}

}  // namespace

void stage(const std::vector<std::string>& images, const StageOptions& o) {
  util::log_init(o.verbosity);
  const std::string job = job_of_allocation();
  if (o.clean) {
    on_every_node({"stage", "--node-clean", job}, o);
    return;
  }
  app::Store store(o.storage);
  app::WorkDir work(store.tmp_dir(), "stage");
  std::vector<Source> sources;
  for (const auto& image : images) {
    const store::NameKind kind = store::name_kind(image);
    const bool is_path =
        kind == store::NameKind::Path || (kind == store::NameKind::Either && !store::find_image(store.dir(), image) &&
                                          util::path_exists(util::normalize_path(image, util::current_dir())));
    sources.push_back(is_path ? file_source(image) : named_source(store, image, job, work, o));
  }
  on_every_node({"stage", "--node-prepare", job}, o);
  for (const auto& s : sources) {
    const auto start = Clock::now();
    send(store, s, job, job, work, start + std::chrono::seconds(30));
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    char took[32];
    std::snprintf(took, sizeof took, "%.1f s", secs);
    util::note("staged `" + s.shown + "` (" + util::human_bytes(s.size) + ") on every node of job " + job + " in " +
               took);
  }
}

void stage_node(const std::string& job, bool clean, const StoreOptions& o) {
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos) throw Error("bad job id `" + job + "`");
  app::Store store(o.storage);
  if (!clean) {
    store.dir().dir(store::staged_dir(job), true);
  } else if (util::UniqueFd staged = store.dir().dir(store::kStagedDir, false)) {
    util::remove_tree_at(staged.get(), job, store.dir().sub(store::staged_dir(job)));
  }
}

void stage_step(const std::string& image, const StoreOptions& o) {
  util::log_init(o.verbosity);
  const store::SlurmPlace where = store::slurm_place();
  if (where.step.empty() || where.nodes < 2) throw Error("rt stage --step: not in a step over several nodes");
  app::Store store(o.storage);
  const std::string key = store::staged_key_for_name(store::without_scheme(image));
  util::UniqueFd dir = store.dir().dir(store::staged_dir(where.job), true);
  // The node's ranks take turns: the first sends, the others find it sent.
  app::FileLock lock(store.dir().sub(store::staged_dir(where.job) + "/" + key + ".lock"),
                     app::FileLock::Mode::Exclusive);
  if (store::staged_sent(store.dir(), where, key)) return;
  // An image of the site's store is read where it lies by every node, as
  // exec finds it there before it would wait for a copy: nothing to send.
  const std::string name = store::without_scheme(image);
  if (!store::find_image(store.dir(), name) && run::find_site_image(name)) {
    util::write_file_atomic_at(dir.get(), key + ".sent", where.nodelist);
    return;
  }
  app::WorkDir work(store.tmp_dir(), "stage");
  const std::string target = where.job + "." + where.step;
  try {
    Source s = named_source(store, image, where.job, work, o);
    send(store, s, where.job, target, work, Clock::now() + std::chrono::seconds(60));
    util::write_file_atomic_at(dir.get(), key + ".sent", where.nodelist);
  } catch (const Error& e) {
    // Said to the other nodes, whose ranks wait for the copy.
    std::string why = where.host + ": " + e.what();
    const std::string note = work.path() + "/failed";
    try {
      util::UniqueFd fd = util::open_fd(note, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      util::write_all(fd.get(), why + "\n", note);
      broadcast(note, store.dir().sub(store::staged_dir(where.job)) + "/" + key + ".failed-" + where.step, target, work,
                Clock::now() + std::chrono::seconds(10));
    } catch (const Error&) {
      // They give up on their own in time.
    }
    throw;
  }
}

namespace app {

// The user's jobs Slurm still knows (pending, running, ending), or nullopt
// when squeue cannot say.
std::optional<std::vector<std::string>> live_jobs(const app::WorkDir& work) {
  const std::string file = work.path() + "/squeue.out";
  util::UniqueFd out = util::open_fd(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  util::UniqueFd null = util::open_fd("/dev/null", O_WRONLY | O_CLOEXEC);
  int rc = 127;
  try {
    rc = image::run_program({"squeue", "--me", "--noheader", "--format=%A"}, {.out = out.get(), .err = null.get()});
  } catch (const SysError&) {
    // No squeue here.
  }
  if (rc != 0) return std::nullopt;
  std::vector<std::string> jobs;
  util::for_each_line(util::read_file_if_exists(file).value_or(""), [&](std::string_view l) {
    jobs.push_back(util::trim(l));
    return true;
  });
  return jobs;
}

size_t prune_staged(Store& store) {
  util::UniqueFd staged = store.dir().dir(store::kStagedDir, false);
  if (!staged) return 0;
  const std::string current = store::slurm_place().job;
  WorkDir work(store.tmp_dir(), "prune");
  const auto live = live_jobs(work);
  size_t removed = 0;
  for (const auto& job : util::list_names(staged.get(), store.dir().sub(store::kStagedDir))) {
    if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos || job == current) continue;
    if (live) {
      if (std::find(live->begin(), live->end(), job) != live->end()) continue;
    } else {
      // Without squeue: what nothing has touched for a day.
      struct stat st;
      if (::fstatat(staged.get(), job.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || ::time(nullptr) - st.st_mtime < 86400)
        continue;
    }
    util::remove_tree_at(staged.get(), job, store.dir().sub(store::staged_dir(job)));
    ++removed;
  }
  return removed;
}

}  // namespace app
}  // namespace rt
