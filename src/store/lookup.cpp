// Finding images in the store (host).
#include "store/lookup.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "rt/error.hpp"
#include "store/ref.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::store {

namespace {

// The name of user `uid` in /etc/passwd ("" when it is not there), and
// whether `other` names another user there.
std::string passwd_name(uid_t uid, const char* other = nullptr, bool* other_is_another = nullptr) {
  const auto text = util::read_file_if_exists("/etc/passwd");
  if (!text) return "";
  const std::string id = std::to_string(uid);
  std::string name;
  // Read in place: a site's /etc/passwd may hold thousands of lines, and
  // every start that uses the default store reads it.
  std::string_view rest = *text;
  while (!rest.empty()) {
    const std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    const size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1), c3 = line.find(':', c2 + 1);
    if (c1 == std::string_view::npos || c2 == std::string_view::npos) continue;
    const std::string_view user = line.substr(0, c1), uid_field = line.substr(c2 + 1, c3 - c2 - 1);
    if (other && other_is_another && user == other && uid_field != id) *other_is_another = true;
    if (name.empty() && uid_field == id && !user.empty() && user.find('/') == std::string_view::npos) name = user;
  }
  return name;
}

std::string default_root_of(const char* user, const char* logname) {
  // By the real user: a program started with a cleared environment
  // (env -i, as HTCondor and Nextflow do) finds the same store; a name from
  // a directory service needs $USER/$LOGNAME. $USER names the store only
  // when /etc/passwd does not give that name to another user: a $USER of
  // someone else's name never picks their store.
  std::string u;
  bool another = false;
  const std::string mine = passwd_name(::getuid(), user, &another);
  if (user && *user && !std::strchr(user, '/') && !another) u = user;
  if (u.empty()) u = mine;
  if (u.empty() && logname && *logname && !std::strchr(logname, '/')) u = logname;
  if (u.empty()) u = std::to_string(::getuid());
  return "/var/tmp/" + u + ".rt";
}

}  // namespace

std::string default_root() {
  if (const char* s = std::getenv("RT_STORAGE"); s && *s) return s;
  // Asked for several times a start: the answer is kept for the names it
  // was made from (the environment may change between asks in tests).
  const char* user = std::getenv("USER");
  const char* logname = std::getenv("LOGNAME");
  const std::string inputs = std::string(user ? user : "") + '\0' + (logname ? logname : "") + '\0' +
                             std::to_string(::getuid());
  static std::mutex mu;
  static std::string kept_inputs, kept;
  std::lock_guard<std::mutex> g(mu);
  if (!kept.empty() && inputs == kept_inputs) return kept;
  kept = default_root_of(user, logname);
  kept_inputs = inputs;
  return kept;
}

std::string store_path(const std::string& storage) { return storage.empty() ? default_root() : storage; }

std::string escape_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '.' || name.front() == '/' ||
      name.find("..") != std::string_view::npos || name.find('+') != std::string_view::npos)
    throw Error("bad image name `" + std::string(name) + "`");
  std::string out;
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw Error("bad image name: control character in `" + std::string(name) + "`");
    out += c == '/' ? '+' : c;
  }
  return out;
}

std::string unescape_name(std::string_view dir) {
  std::string out(dir);
  for (char& c : out)
    if (c == '+') c = '/';
  return out;
}

std::vector<std::string> name_forms(const std::string& name) {
  std::vector<std::string> forms{name};
  Reference r;
  try {
    r = store::parse_reference(name);
  } catch (const Error&) {
    return forms;
  }
  auto add = [&](const std::string& f) {
    if (std::find(forms.begin(), forms.end(), f) == forms.end()) forms.push_back(f);
  };
  add(r.str());
  // Docker's normalisation, both ways: busybox, busybox:latest,
  // library/busybox:latest and docker.io/library/busybox:latest are one
  // image, stored under whichever of these names it was given.
  if (r.registry != "docker.io" || !r.digest.empty()) return forms;
  const std::string shortest = r.repository.starts_with("library/") ? r.repository.substr(8) : r.repository;
  for (const std::string& repo : {shortest, r.repository, "docker.io/" + r.repository}) {
    add(repo + ":" + r.tag);
    if (r.tag == "latest") add(repo);
  }
  return forms;
}

std::optional<std::string> find_image(const Root& store, const std::string& name) {
  util::UniqueFd images = store.dir(kImagesDir, false);
  if (!images) return std::nullopt;
  auto stored = [&](const std::string& n) -> std::optional<std::string> {
    std::string esc;
    try {
      esc = escape_name(n);
    } catch (const Error&) {
      return std::nullopt;
    }
    struct stat st;
    if (::fstatat(images.get(), esc.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
      return store.sub(std::string(kImagesDir) + "/" + esc);
    return std::nullopt;
  };
  // The name as given first: a rank's start by the name it was stored
  // under parses no reference.
  if (auto d = stored(name)) return d;
  const std::vector<std::string> forms = name_forms(name);
  for (size_t i = 1; i < forms.size(); ++i)  // forms[0] is the name itself
    if (auto d = stored(forms[i])) return d;
  return std::nullopt;
}

NameKind name_kind(std::string_view name) {
  if (name == "." || name == ".." || name.starts_with("/") || name.starts_with("./") || name.starts_with("../"))
    return NameKind::Path;
  if (name.starts_with("docker://")) return NameKind::Reference;
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos) return NameKind::Reference;
  const std::string_view first = name.substr(0, slash);
  if (first.find_first_of(".:") != std::string_view::npos || first == "localhost") return NameKind::Reference;
  return NameKind::Either;
}

std::string without_scheme(std::string_view name) {
  if (name.starts_with("docker://")) name.remove_prefix(9);
  return std::string(name);
}

std::string foreign_path(const std::string& path) {
  const uid_t me = ::getuid();
  // Walked as given (normalised and absolute), one lstat per level on a
  // rank's start. Each entry on the way, a symlink too, must be one nobody
  // but root and the caller can replace in the directory it lies in (the
  // symlink's target, where one is met, for the entries below it); the
  // real path (realpath(3), only then) is walked as well.
  auto walk = [&](std::string p, std::string& why) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return false;
    bool linked = S_ISLNK(st.st_mode);
    if (!linked && st.st_uid != 0 && st.st_uid != me) {
      why = "`" + p + "` belongs to uid " + std::to_string(st.st_uid);
      return false;
    }
    while (p != "/") {
      const size_t slash = p.rfind('/');
      const std::string parent = slash == 0 ? "/" : p.substr(0, slash);
      struct stat entry, pst;
      if (::lstat(parent.c_str(), &entry) != 0) return linked;
      pst = entry;
      if (S_ISLNK(entry.st_mode)) {
        linked = true;
        if (::stat(parent.c_str(), &pst) != 0) return linked;
      }
      if (why = distrust_parent(pst, st, me); !why.empty()) {
        why = "`" + p + "` lies in `" + parent + "`, " + why;
        return false;
      }
      p = parent;
      st = entry;
    }
    return linked;
  };
  std::string why;
  if (!walk(path, why)) return why;
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return "";
  const std::string resolved = real;
  std::free(real);
  walk(resolved, why);
  return why;
}

std::vector<std::string> similar_images(const Root& store, const std::string& name) {
  std::vector<std::string> out;
  util::UniqueFd images = store.dir(kImagesDir, false);
  if (!images) return out;
  std::vector<std::string> prefixes{name + ":"};
  try {
    std::string canonical = store::parse_reference(name).str();
    prefixes.push_back(canonical.substr(0, canonical.rfind(':')) + ":");
  } catch (const Error&) {
  }
  for (const auto& n : util::list_names(images.get(), store.sub(kImagesDir))) {
    const std::string stored = unescape_name(n);
    for (const auto& p : prefixes)
      if (stored.starts_with(p)) {
        out.push_back(stored);
        break;
      }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace rt::store
