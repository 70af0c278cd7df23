// Persistent --overlay directories: see overlay_dir.hpp.
#include "run/overlay_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "rt/error.hpp"
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

void take_lock(const std::string& dir) {
  const std::string lock = dir + "/" + kLockDir, holder = lock + "/holder";
  const std::string mine = overlay_holder_line();
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (::mkdir(lock.c_str(), 0700) == 0) {
      const std::string tmp = holder + ".new";
      util::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!fd) throw SysError{errno, "create", tmp};
      util::write_all(fd.get(), mine + "\n", tmp);
      fd.reset();
      if (::rename(tmp.c_str(), holder.c_str()) != 0) throw SysError{errno, "rename", tmp, holder};
      util::debug("overlay `" + dir + "` locked by " + mine);
      return;
    }
    if (errno != EEXIST) throw SysError{errno, "mkdir", lock};
    check_own(lock, "the overlay's lock");
    auto text = util::read_file_if_exists(holder, 4096);
    if (!text) {  // being written, or left half made by a process killed at that moment
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (attempt < 40) continue;
      text = "";
    }
    const auto f = util::split(util::trim(*text), ' ');
    const bool here = f.size() == 3 && f[0] == host_name();
    long pid = 0;
    if (here) pid = std::strtol(f[1].c_str(), nullptr, 10);
    const bool alive = here && pid > 0 && start_time(pid) == f[2];
    if (f.size() == 3 && !here)
      throw Error("overlay `" + dir + "` is in use by process " + f[1] + " on host " + f[0],
                  "one container at a time may write an overlay; if no container of yours runs there, remove `" +
                      lock + "`");
    if (alive)
      throw Error("overlay `" + dir + "` is in use by process " + f[1] + " on this host",
                  "one container at a time may write an overlay; give it as " + dir + ":ro to read it meanwhile");
    // Stale: its process is gone (or the lock was never finished).
    util::debug("overlay `" + dir + "`: a stale lock (" + util::trim(*text) + ") taken over");
    ::unlink(holder.c_str());
    ::unlink((holder + ".new").c_str());
    if (::rmdir(lock.c_str()) != 0 && errno != ENOENT) throw SysError{errno, "rmdir", lock};
  }
  throw Error("overlay `" + dir + "`: its lock `" + lock + "` could not be taken");
}

}  // namespace

std::string overlay_holder_line() {
  const long pid = static_cast<long>(::getpid());
  return host_name() + " " + std::to_string(pid) + " " + start_time(pid);
}

void prepare_overlays(const std::vector<OverlayLayer>& layers) {
  for (const auto& l : layers) {
    if (l.path.find_first_of(":,\\") != std::string::npos)
      throw Error("--overlay `" + l.path + "`: overlayfs cannot take a path with : , or \\ in it",
                  "give the directory through a link whose name has none");
    if (!l.writable) {
      struct stat st;
      if (::stat(l.path.c_str(), &st) != 0) throw SysError{errno, "stat", "overlay `" + l.path + "`"};
      if (!S_ISDIR(st.st_mode))
        throw Error("overlay `" + l.path + "` is not a directory", "rt's overlays are directories, for now");
      continue;  // one that held writes is read through its upper/ (mount_apply)
    }
    check_own(l.path, "overlay");
    take_lock(l.path);
    make_own(l.path + "/upper", "the overlay's upper layer");
    make_own(l.path + "/work", "the overlay's work directory");
  }
}

}  // namespace rt::run
