// The user's store directory, checked (host); see root.hpp.
#include "store/root.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>

#include "rt/error.hpp"
#include "store/lookup.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::store {
namespace {

constexpr size_t kSecretHexDigits = 64;

std::string owner_of(uid_t uid, uid_t me) { return uid == me ? "you" : "uid " + std::to_string(uid); }

constexpr const char* kWhatToDo =
    "use a store of your own with --storage DIR or RT_STORAGE=DIR (a path only you and root can change), "
    "or remove it if it is yours to remove";

// `path` made absolute (getcwd only for a relative one) and normalised.
std::string absolute(const std::string& path) {
  return util::normalize_path(path, path.starts_with("/") ? "/" : util::current_dir());
}

// Nobody but root and `me` can change a directory on the way to `path`, a
// normalised absolute path of the store (`st`: its own stat). False, with
// nothing checked, when one of them is a symlink: the caller checks the
// real path instead.
bool check_ancestors(const std::string& path_in, const struct stat& st, const std::string& shown, uid_t me) {
  struct stat child = st;
  std::string path = path_in;
  while (path != "/") {
    size_t slash = path.rfind('/');
    std::string parent = slash == 0 ? "/" : path.substr(0, slash);
    struct stat pst;
    if (::lstat(parent.c_str(), &pst) != 0) throw SysError{errno, "stat", parent};
    if (S_ISLNK(pst.st_mode)) return false;
    if (std::string why = distrust_parent(pst, child, me); !why.empty())
      throw Error("store `" + shown + "` lies in `" + parent + "`, " + why + ": they could replace it", kWhatToDo);
    path = parent;
    child = pst;
  }
  return true;
}

}  // namespace

std::string mode_of(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

std::string distrust(const struct stat& st, uid_t me) {
  if (S_ISLNK(st.st_mode)) return "is a symbolic link (owner " + owner_of(st.st_uid, me) + ")";
  if (!S_ISDIR(st.st_mode))
    return "is not a directory (owner " + owner_of(st.st_uid, me) + ", mode " + mode_of(st.st_mode) + ")";
  if (st.st_uid != me)
    return "is owned by uid " + std::to_string(st.st_uid) + " (mode " + mode_of(st.st_mode) + "), not by you (uid " +
           std::to_string(me) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "is writable by other users (mode " + mode_of(st.st_mode) + ")";
  return "";
}

std::string distrust_parent(const struct stat& pst, const struct stat& cst, uid_t me) {
  const std::string who = "owner " + owner_of(pst.st_uid, me) + ", mode " + mode_of(pst.st_mode);
  if (pst.st_uid != 0 && pst.st_uid != me) return "a directory of another user (" + who + ")";
  if (!(pst.st_mode & (S_IWGRP | S_IWOTH))) return "";
  // A sticky directory lets others add entries but not rename or remove
  // one they do not own (unlink(2), EPERM).
  if ((pst.st_mode & S_ISVTX) && (cst.st_uid == 0 || cst.st_uid == me)) return "";
  return "a directory other users can write (" + who + ")";
}

std::optional<Root> Root::open(const std::string& given, bool create) {
  const std::string path = absolute(given);
  const uid_t me = ::getuid();
  // Opened first: the store is there on every run but the first.
  int fd = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", path};
    fd = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) {
    int e = errno;
    struct stat st;
    if (e == ENOENT && !create) return std::nullopt;
    if (::lstat(path.c_str(), &st) == 0) throw Error("store `" + path + "` " + distrust(st, me), kWhatToDo);
    throw SysError(e, "open", path);
  }
  util::UniqueFd dir(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) throw SysError{errno, "stat", path};
  if (std::string why = distrust(st, me); !why.empty()) throw Error("store `" + path + "` " + why, kWhatToDo);
  // Walked as given when no directory on the way is a symlink (the usual
  // case, one readlink fewer per rank), else as the kernel resolved it.
  struct stat again;
  std::string real = path;
  if (::lstat(path.c_str(), &again) != 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino ||
      !check_ancestors(real, st, path, me)) {
    real = util::real_path(fd, path);
    if (!check_ancestors(real, st, path, me))
      throw Error("store `" + path + "`: its real path `" + real + "` has a symlink");
  }
  return Root(std::move(real), std::move(dir));
}

const Root& Root::user(const std::string& storage) {
  static std::map<std::string, Root> opened;
  const std::string path = store_path(storage);
  auto it = opened.find(path);
  if (it == opened.end()) it = opened.emplace(path, *open(path, true)).first;
  return it->second;
}

const Root* Root::user_if_exists(const std::string& storage) {
  const std::string path = absolute(store_path(storage));
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return nullptr;
  return &user(storage);  // anything there, a dangling symlink too, is checked
}

util::UniqueFd Root::dir(std::string_view rel, bool create) const {
  const uid_t me = ::getuid();
  util::UniqueFd at;
  int parent = fd_.get();
  std::string shown = path_;
  for (const auto& part : util::split(rel, '/')) {
    if (part.empty()) continue;
    shown += "/" + part;
    int fd = ::openat(parent, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(parent, part.c_str(), 0700) != 0 && errno != EEXIST) throw SysError{errno, "mkdir", shown};
      fd = ::openat(parent, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      int e = errno;
      struct stat st;
      if (e == ENOENT && !create) return {};
      if (::fstatat(parent, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        throw Error("store directory `" + shown + "` " + distrust(st, me), "remove it; rt makes it again");
      throw SysError(e, "open", shown);
    }
    util::UniqueFd next(fd);
    struct stat st;
    if (::fstat(fd, &st) != 0) throw SysError{errno, "stat", shown};
    if (std::string why = distrust(st, me); !why.empty())
      throw Error("store directory `" + shown + "` " + why, "remove it; rt makes it again");
    at = std::move(next);
    parent = at.get();
  }
  return at;
}

const std::string& Root::secret() const {
  if (!secret_.empty()) return secret_;
  auto is_secret = [](const std::optional<std::string>& s) {
    return s && s->size() == kSecretHexDigits && util::is_hex(*s);
  };
  auto text = util::read_owned_at(fd_.get(), kSecretFile, 4096);
  struct stat st;
  if (!is_secret(text) && ::fstatat(fd_.get(), kSecretFile, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    // Something else is there (damaged, or not a file of the caller's),
    // unless a racing rank has just made it.
    text = util::read_owned_at(fd_.get(), kSecretFile, 4096);
    if (!is_secret(text)) ::unlinkat(fd_.get(), kSecretFile, 0);
  }
  if (!is_secret(text)) {
    // Made whole under a private name, then linked into place: of ranks
    // racing to make it, the first link wins and the others read it.
    unsigned char raw[kSecretHexDigits / 2];
    if (::getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) throw SysError{errno, "getrandom"};
    util::link_new_file_at(fd_.get(), kSecretFile, util::hex(raw, sizeof raw));
    text = util::read_owned_at(fd_.get(), kSecretFile, 4096);
    if (!is_secret(text)) throw Error("cannot make the secret `" + sub(kSecretFile) + "` of the store", kWhatToDo);
  }
  secret_ = *text;
  return secret_;
}

}  // namespace rt::store
