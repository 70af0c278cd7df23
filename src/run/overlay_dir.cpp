// Persistent --overlay directories: see overlay_dir.hpp.
#include "run/overlay_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "rt/error.hpp"
#include "run/holder.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::run {
namespace {

constexpr const char* kLockDir = ".rt-lock";

std::string host_name() {
  char h[256] = {};
  if (::gethostname(h, sizeof h - 1) != 0) return "unknown-host";
  return h;
}

// Field 22 of /proc/PID/stat (clock ticks after boot), "" when the
// process is gone or has exited (a zombie its parent has not reaped).
std::string start_time(long pid) {
  auto text = util::read_file_if_exists("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!text) return "";
  const size_t paren = text->rfind(')');
  if (paren == std::string::npos) return "";
  const auto fields = util::split(text->substr(paren + 2), ' ');
  if (fields.size() <= 19 || fields[0] == "Z" || fields[0] == "X") return "";
  return fields[19];
}

// DIR (and what rt makes in it) must be a directory of the user's that
// no one else can write: another user could otherwise swap upper/ or
// the lock.
void check_own(const std::string& path, const std::string& what) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) throw SysError{errno, "stat", what + " `" + path + "`"};
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 022))
    throw Error(what + " `" + path + "` is not a directory of yours that only you can write",
                "make it with mkdir -m 0755 (an overlay holds what the container wrote)");
}

void make_own(const std::string& path, const std::string& what) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", what + " `" + path + "`"};
  check_own(path, what);
}

// Where a layer's lock is: in a directory, beside an image.
std::string lock_of(const OverlayLayer& l) {
  if (!l.image) return l.path + "/" + kLockDir;
  return util::dir_name(l.path) + "/." + util::base_name(l.path) + kLockDir;
}

// Writes this process's holder line into `lock` (held), with a state.
void write_holder(const std::string& lock, const char* state = "") {
  const std::string holder = lock + "/holder", tmp = holder + ".new";
  util::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw SysError{errno, "create", tmp};
  util::write_all(fd.get(), overlay_holder_line() + (*state ? " " : "") + state + "\n", tmp);
  fd.reset();
  if (::rename(tmp.c_str(), holder.c_str()) != 0) throw SysError{errno, "rename", tmp, holder};
}

// An image file of the user's that no one else can write (its content
// becomes the container's files).
void check_own_file(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) throw SysError{errno, "stat", "overlay image `" + path + "`"};
  if (!S_ISREG(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 022))
    throw Error("overlay image `" + path + "` is not a file of yours that only you can write",
                "make it with rt overlay create (or apptainer overlay create)");
}

bool owned_by_caller(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && st.st_uid == ::getuid();
}

// Takes the lock (its holder line in state `state`), or with `only_check`
// checks that no container writes the layer.
void take_lock(const OverlayLayer& layer, bool only_check, const char* state = "") {
  const std::string& dir = layer.path;
  const std::string lock = lock_of(layer), holder = lock + "/holder";
  const std::string mine = overlay_holder_line() + (*state ? " " : "") + state;
  // An image's keeper writes it out after the container ends, saying so
  // in the lock ("closing") once the container's file system is gone:
  // such a lock is waited for a while (the run before this one,
  // finishing), and any image lock a moment (the container just gone).
  // A directory's holder ("held", run/overlay_server) is asked to leave
  // and waited for as long: it leaves unless its container still runs.
  const auto start = std::chrono::steady_clock::now();
  bool asked = false;
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (!only_check) {
      if (::mkdir(lock.c_str(), 0700) == 0) {
        write_holder(lock, state);
        util::debug("overlay `" + dir + "` locked by " + mine);
        return;
      }
      if (errno != EEXIST) throw SysError{errno, "mkdir", lock};
    }
    struct stat st;
    if (::lstat(lock.c_str(), &st) != 0) {
      if (errno != ENOENT) throw SysError{errno, "stat", lock};
      if (only_check) return;
      continue;  // released by its holder since mkdir found it
    }
    check_own(lock, "the overlay's lock");
    auto text = util::read_file_if_exists(holder, 4096);
    if (!text) {  // being written, or left half made by a process killed at that moment
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (attempt < 40) continue;
      text = "";
    }
    const auto f = util::split(util::trim(*text), ' ');
    const bool closing = f.size() == 4 && f[3] == "closing", held = f.size() == 4 && f[3] == "held";
    const bool known = f.size() == 3 || closing || held;
    const bool here = known && f[0] == host_name();
    long pid = 0;
    if (here) pid = std::strtol(f[1].c_str(), nullptr, 10);
    const bool alive = here && pid > 0 && start_time(pid) == f[2];
    if (known && !here)
      throw Error(
          "overlay `" + dir + "` is in use by process " + f[1] + " on host " + f[0],
          "one container at a time may write an overlay; if no container of yours runs there, remove `" + lock + "`");
    // A holder is asked to leave at once; it does unless it serves a container.
    if (alive && held && !asked) asked = ::kill(static_cast<pid_t>(pid), SIGUSR1) == 0;
    const auto waited = std::chrono::steady_clock::now() - start;
    if (alive && (layer.image || held) && waited < std::chrono::seconds(closing ? 10 : 2)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      --attempt;
      continue;
    }
    if (alive && held)
      throw Error("overlay `" + dir + "` is in use by process " + f[1] + " on this host (rt-ovl, its holder)",
                  "one container at a time may write an overlay; give it as " + dir + ":ro to read it meanwhile");
    if (alive && only_check)
      throw Error("overlay image `" + dir + "` is being written by process " + f[1] + " on this host",
                  "an image can be read only while no container writes it");
    if (alive)
      throw Error("overlay `" + dir + "` is in use by process " + f[1] + " on this host",
                  "one container at a time may write an overlay; give it as " + dir + ":ro to read it meanwhile");
    if (only_check) return;
    // Stale: its process is gone. Taken over in place, the lock directory
    // kept (removing and making it again cost more than the rest of a
    // start's locking): the holder is claimed by renaming it to a name of
    // ours, which of several takers only one does; if what it claimed is
    // not what it judged stale (a faster taker's own, written since), it
    // puts that back and looks again.
    util::debug("overlay `" + dir + "`: a stale lock (" + util::trim(*text) + ") taken over");
    if (!text->empty()) {
      const std::string claim = holder + ".claim." + std::to_string(::getpid());
      if (::rename(holder.c_str(), claim.c_str()) != 0) {
        if (errno == ENOENT) continue;  // another taker's
        throw SysError{errno, "rename", holder, claim};
      }
      if (util::read_file_if_exists(claim, 4096) != text) {
        // Put back, unless a holder came meanwhile (its keeper's newer line).
        (void)::link(claim.c_str(), holder.c_str());
        ::unlink(claim.c_str());
        continue;
      }
      // The claimed file becomes the holder: its line overwritten in place
      // (padded, not truncated) and renamed back. Unlinking it and writing
      // a new one cost a start 0.3-1.8 ms on ext4 (measured), most of a
      // persistent overlay's start.
      std::string line = mine;  // with its state
      if (line.size() + 1 < text->size()) line.append(text->size() - line.size() - 1, ' ');
      line += "\n";
      util::UniqueFd fd(::open(claim.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd || ::pwrite(fd.get(), line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()))
        throw SysError{errno, "write", claim};
      fd.reset();
      if (::rename(claim.c_str(), holder.c_str()) != 0) throw SysError{errno, "rename", claim, holder};
      util::debug("overlay `" + dir + "` locked by " + mine);
      return;
    }
    // Never finished (no holder after a while), or left by a taker killed
    // between its claim and its holder: made again.
    ::unlink((holder + ".new").c_str());
    if (util::UniqueFd d{::open(lock.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)})
      for (const auto& n : util::list_names(d.get(), lock))
        if (n.starts_with("holder.claim.")) ::unlinkat(d.get(), n.c_str(), 0);
    if (::rmdir(lock.c_str()) != 0 && errno != ENOENT) throw SysError{errno, "rmdir", lock};
  }
  throw Error("overlay `" + dir + "`: its lock `" + lock + "` could not be taken");
}

}  // namespace

std::string overlay_read_dir(const std::string& dir) {
  struct stat st;
  const bool used =
      ::stat((dir + "/upper").c_str(), &st) == 0 && S_ISDIR(st.st_mode) && ::stat((dir + "/work").c_str(), &st) == 0;
  return used ? dir + "/upper" : dir;
}

std::string overlay_holder_line() {
  const long pid = static_cast<long>(::getpid());
  return host_name() + " " + std::to_string(pid) + " " + start_time(pid);
}

void take_over_overlay_lock(const OverlayLayer& layer) { write_holder(lock_of(layer)); }

void closing_overlay_lock(const OverlayLayer& layer) {
  try {
    write_holder(lock_of(layer), "closing");
  } catch (const Error&) {  // then a next run finds it in use a moment longer
  }
}

void release_overlay_lock(const OverlayLayer& layer) {
  const std::string lock = lock_of(layer), holder = lock + "/holder";
  auto text = util::read_file_if_exists(holder, 4096);
  const std::string mine = overlay_holder_line(), line = text ? util::trim(*text) : "";
  if (!text || (line != mine && line != mine + " closing" && line != mine + " held")) return;
  ::unlink(holder.c_str());
  ::rmdir(lock.c_str());
}

void lock_overlay(const OverlayLayer& layer, bool held) { take_lock(layer, false, held ? "held" : ""); }

std::chrono::milliseconds overlay_linger() {
  static const std::chrono::milliseconds linger = configured_linger("RT_OVERLAY_LINGER", "overlay.linger", 10);
  return linger;
}

void prepare_overlays(const std::vector<OverlayLayer>& layers, bool held) {
  for (const auto& l : layers) {
    if (l.path.find_first_of(":,\\") != std::string::npos)
      throw Error("--overlay `" + l.path + "`: overlayfs cannot take a path with : , or \\ in it",
                  "give the directory through a link whose name has none");
    if (l.image) {
      // A SIF file's own overlay, read: as the image is, whoever's it is
      // (the lock beside another's file is not checked: anyone could place one).
      if (l.embedded && !l.writable && !owned_by_caller(l.path)) continue;
      check_own_file(l.path);
      take_lock(l, /*only_check=*/!l.writable);
      continue;
    }
    if (l.squash_offset >= 0) {  // read-only: unchanged while read, unless someone else may write it
      struct stat st;
      if (::stat(l.path.c_str(), &st) != 0) throw SysError{errno, "stat", "overlay `" + l.path + "`"};
      if (st.st_mode & 022)
        throw Error("overlay `" + l.path + "` can be written by others than its owner",
                    "chmod go-w it: its content becomes the container's files");
      continue;
    }
    if (!l.writable) {
      struct stat st;
      if (::stat(l.path.c_str(), &st) != 0) throw SysError{errno, "stat", "overlay `" + l.path + "`"};
      if (!S_ISDIR(st.st_mode))
        throw Error("overlay `" + l.path + "` is neither a directory, an ext3 overlay image nor a SquashFS or SIF file");
      continue;  // one that held writes is read through its upper/ (mount_apply)
    }
    check_own(l.path, "overlay");
    if (!held) take_lock(l, false);
    make_own(l.path + "/upper", "the overlay's upper layer");
    make_own(l.path + "/work", "the overlay's work directory");
  }
}

}  // namespace rt::run
