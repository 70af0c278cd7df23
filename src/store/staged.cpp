// Images staged on a node's local disk for one Slurm job (host); see
// staged.hpp.
#include "store/staged.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "rt/error.hpp"
#include "store/ref.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::store {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool all_digits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

int number(const std::string& s, int otherwise) { return all_digits(s) && s.size() < 9 ? std::stoi(s) : otherwise; }

// A regular file of the caller's named `name` in `dir`.
bool owned_file_at(int dir, const std::string& name, struct stat* st) {
  return ::fstatat(dir, name.c_str(), st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st->st_mode) &&
         st->st_uid == ::getuid();
}

}  // namespace

SlurmPlace slurm_place() {
  SlurmPlace p;
  if (std::string job = env("SLURM_JOB_ID"); all_digits(job)) p.job = job;
  if (p.job.empty()) return p;
  if (std::string step = env("SLURM_STEP_ID"); all_digits(step)) {
    p.step = step;
    p.nodes = number(env("SLURM_STEP_NUM_NODES"), 0);
    p.node = number(env("SLURM_NODEID"), -1);
    p.nodelist = env("SLURM_STEP_NODELIST");
  }
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) == 0) p.host = host;
  return p;
}

std::string staged_key_for_file(const std::string& path, const struct stat& st) {
  // Not st_dev: a network file system's device number differs between
  // the nodes that mount it.
  return util::hash_hex("file\n" + path + "\n" + std::to_string(st.st_size) + "\n" + std::to_string(st.st_ino) +
                        "\n" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec));
}

std::string staged_key_for_name(const std::string& name) {
  std::string canonical = name;
  try {
    canonical = parse_reference(name).str();
  } catch (const Error&) {
    // A stored name that is no reference: itself.
  }
  return util::hash_hex("name\n" + canonical);
}

std::string staged_key_for_path(const std::string& path) { return util::hash_hex("path\n" + path); }

std::string staged_ref_note(const std::string& key, const std::string& ext) {
  return "rt-staged-ref 1\n" + key + "\n" + ext + "\n";
}

std::optional<std::string> find_staged_by_path(const Root& root, const std::string& job, const std::string& path,
                                               std::string* ext) {
  if (job.empty()) return std::nullopt;
  util::UniqueFd dir = root.dir(staged_dir(job), false);
  if (!dir) return std::nullopt;
  auto note = util::read_owned_at(dir.get(), staged_key_for_path(path) + ".ref", 256);
  if (!note) return std::nullopt;
  const auto lines = util::split(*note, '\n');
  if (lines.size() < 3 || lines[0] != "rt-staged-ref 1" || lines[1].size() != 32 || !util::is_hex(lines[1]) ||
      (lines[2] != "sqfs" && lines[2] != "sif"))
    return std::nullopt;
  auto copy = find_staged(root, job, lines[1], lines[2]);
  if (copy && ext) *ext = lines[2];
  return copy;
}

std::string staged_dir(const std::string& job) { return std::string(kStagedDir) + "/" + job; }

std::string staged_ready_note(uint64_t size, const std::string& ext) {
  return "rt-staged 1\n" + std::to_string(size) + "\n" + ext + "\n";
}

std::optional<std::string> find_staged(const Root& root, const std::string& job, const std::string& key,
                                       const std::string& ext) {
  if (job.empty()) return std::nullopt;
  util::UniqueFd dir = root.dir(staged_dir(job), false);
  if (!dir) return std::nullopt;
  const std::string name = key + "." + ext;
  const std::string path = root.sub(staged_dir(job) + "/" + name);
  struct stat st;
  if (owned_file_at(dir.get(), name, &st)) return path;
  // Delivered by sbcast: whole once KEY.ready says so and the size agrees.
  auto note = util::read_owned_at(dir.get(), key + ".ready", 256);
  if (!note) return std::nullopt;
  auto lines = util::split(*note, '\n');
  if (lines.size() < 3 || lines[0] != "rt-staged 1" || lines[2] != ext || !all_digits(lines[1])) return std::nullopt;
  struct stat part;
  if (!owned_file_at(dir.get(), key + ".part", &part) || std::to_string(part.st_size) != lines[1]) {
    // Renamed by another rank of this node meanwhile?
    return owned_file_at(dir.get(), name, &st) ? std::optional(path) : std::nullopt;
  }
  if (::renameat(dir.get(), (key + ".part").c_str(), dir.get(), name.c_str()) != 0 && errno != ENOENT)
    throw SysError{errno, "rename", path};
  return owned_file_at(dir.get(), name, &st) ? std::optional(path) : std::nullopt;
}

bool staged_sent(const Root& root, const SlurmPlace& where, const std::string& key) {
  util::UniqueFd dir = root.dir(staged_dir(where.job), false);
  if (!dir) return false;
  auto sent = util::read_owned_at(dir.get(), key + ".sent", 65536);
  return sent && *sent == where.nodelist;
}

std::string wait_staged(const Root& root, const SlurmPlace& where, const std::string& key, const std::string& ext,
                        const std::string& image, int timeout_s) {
  util::UniqueFd dir = root.dir(staged_dir(where.job), true);
  const std::string on = "on " + (where.host.empty() ? "node " + std::to_string(where.node) : where.host);
  const auto start = std::chrono::steady_clock::now();
  bool said = false;
  for (;;) {
    if (auto path = find_staged(root, where.job, key, ext)) return *path;
    // Whole once it ends its line (sbcast may be writing it).
    if (auto why = util::read_owned_at(dir.get(), key + ".failed-" + where.step, 4096); why && why->ends_with('\n'))
      throw Error("image `" + image + "` " + on + ": it was not staged here: " + util::trim(*why),
                  "the first node of the step fetches the image once for the job and sends it to the others");
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > std::chrono::seconds(timeout_s))
      throw Error("image `" + image + "` " + on + ": not in this node's store, and no copy came from the step's " +
                      "first node within " + std::to_string(timeout_s) + " s",
                  "rt stage IMAGE in the job script sends an image to every node before the steps; "
                  "RT_STAGE_TIMEOUT=SECONDS waits longer");
    if (!said && waited > std::chrono::seconds(10)) {
      util::note("`" + image + "` " + on + ": waiting for the copy the step's first node fetches and sends");
      said = true;
    }
    ::poll(nullptr, 0, 25);
  }
}

}  // namespace rt::store
