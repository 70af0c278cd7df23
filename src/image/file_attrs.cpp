// Set-id bits and extended attributes kept beside a tree (see file_attrs.hpp).
#include "image/file_attrs.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/inroot.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

constexpr uint32_t kCapRevisionMask = 0xff000000;
constexpr uint32_t kCapRevision2 = 0x02000000;
constexpr uint32_t kCapRevision3 = 0x03000000;
constexpr size_t kCapV2Size = 20;  // magic_etc, then permitted and inheritable for two words
constexpr size_t kCapV3Size = 24;  // and the root uid

std::string unhex(std::string_view s, const std::string& shown) {
  if (s.size() % 2 != 0) throw Error("`" + shown + "` is damaged: an odd number of hex digits");
  std::string out(s.size() / 2, '\0');
  auto digit = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error("`" + shown + "` is damaged: `" + std::string(1, c) + "` is not a hex digit");
  };
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(digit(s[2 * i]) * 16 + digit(s[2 * i + 1]));
  return out;
}

}  // namespace

std::string encode_attrs(const AttrMap& attrs) {
  std::string out;
  for (const auto& [path, a] : attrs) {
    if (a.empty()) continue;
    char mode[16];
    std::snprintf(mode, sizeof mode, "%o", a.setid);
    out += path + '\0' + mode + '\0' + std::to_string(a.xattrs.size()) + '\0';
    for (const auto& [name, value] : a.xattrs) out += name + '\0' + util::hex(value.data(), value.size()) + '\0';
  }
  return out;
}

AttrMap decode_attrs(const std::string& bytes, const std::string& shown) {
  AttrMap out;
  size_t at = 0;
  auto field = [&]() {
    const size_t end = bytes.find('\0', at);
    if (end == std::string::npos) throw Error("`" + shown + "` is damaged: a record ends early");
    std::string f = bytes.substr(at, end - at);
    at = end + 1;
    return f;
  };
  auto number = [&](int base) {
    const std::string f = field();
    char* end = nullptr;
    errno = 0;
    const unsigned long n = std::strtoul(f.c_str(), &end, base);
    if (f.empty() || *end || errno) throw Error("`" + shown + "` is damaged: `" + f + "` is not a number");
    return n;
  };
  while (at < bytes.size()) {
    const std::string path = field();
    FileAttrs a;
    a.setid = static_cast<unsigned>(number(8)) & (S_ISUID | S_ISGID);
    const unsigned long count = number(10);
    for (unsigned long i = 0; i < count; ++i) {
      std::string name = field();
      a.xattrs.emplace_back(std::move(name), unhex(field(), shown));
    }
    out[path] = std::move(a);
  }
  return out;
}

AttrMap read_attrs(const std::string& bundle) {
  const std::string file = bundle + "/" + kAttrsFile;
  auto bytes = util::read_regular_if_exists(file, 1 << 26);
  return bytes ? decode_attrs(*bytes, file) : AttrMap{};
}

void write_attrs(const std::string& bundle, const AttrMap& attrs) {
  util::UniqueFd dir = util::open_fd(bundle, O_PATH | O_DIRECTORY);
  const std::string bytes = encode_attrs(attrs);
  if (bytes.empty()) {
    if (::unlinkat(dir.get(), kAttrsFile, 0) != 0 && errno != ENOENT)
      throw SysError{errno, "remove", bundle + "/" + kAttrsFile};
    return;
  }
  if (!util::write_file_atomic_at(dir.get(), kAttrsFile, bytes))
    throw Error("cannot write `" + bundle + "/" + kAttrsFile + "`: " + std::strerror(errno));
}

FileAttrs attrs_of(archive_entry* e) {
  FileAttrs a;
  a.setid = archive_entry_perm(e) & (S_ISUID | S_ISGID);
  if (archive_entry_xattr_reset(e) > 0) {
    const char* name;
    const void* value;
    size_t size;
    // A pax header may name one twice (LIBARCHIVE.xattr.* and SCHILY.xattr.*).
    while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
      if (!name) continue;
      std::string v(static_cast<const char*>(value), size);
      auto same = std::find_if(a.xattrs.begin(), a.xattrs.end(), [&](const auto& x) { return x.first == name; });
      if (same != a.xattrs.end())
        same->second = std::move(v);
      else
        a.xattrs.emplace_back(name, std::move(v));
    }
  }
  return a;
}

void add_attrs(archive_entry* e, const FileAttrs& a) {
  if (a.setid) archive_entry_set_perm(e, archive_entry_perm(e) | a.setid);
  for (const auto& [name, value] : a.xattrs) archive_entry_xattr_add_entry(e, name.c_str(), value.data(), value.size());
}

namespace {

// chmod of `key` in the tree at `rootfd` to what `mode` makes of its mode;
// symlinks and what is neither file nor directory are left alone.
void rechmod(int rootfd, const std::string& shown, const std::string& key,
             const std::function<unsigned(unsigned)>& mode) {
  auto r = util::open_in_root(rootfd, key, O_PATH, /*follow_final=*/false);
  if (!r.fd) throw SysError{r.err, "open", shown + "/" + key};
  struct stat st;
  if (::fstat(r.fd.get(), &st) != 0) throw SysError{errno, "stat", shown + "/" + key};
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return;
  const unsigned want = mode(st.st_mode & 07777);
  if (want != (st.st_mode & 07777) && ::chmod(util::fd_path(r.fd.get()).c_str(), want) != 0)
    throw SysError{errno, "chmod", shown + "/" + key};
}

}  // namespace

void setid_to_disk(int rootfd, const std::string& shown, AttrMap& attrs) {
  for (auto it = attrs.begin(); it != attrs.end();) {
    if (it->second.setid) {
      const unsigned setid = it->second.setid;
      rechmod(rootfd, shown, it->first, [setid](unsigned m) { return m | setid; });
      it->second.setid = 0;
    }
    it = it->second.empty() ? attrs.erase(it) : std::next(it);
  }
}

void setid_from_disk(int rootfd, const std::string& shown, const std::vector<std::string>& paths, AttrMap& attrs) {
  for (const auto& key : paths)
    rechmod(rootfd, shown, key, [&](unsigned m) {
      if (m & (S_ISUID | S_ISGID)) attrs[key].setid = m & (S_ISUID | S_ISGID);
      return m & ~static_cast<unsigned>(S_ISUID | S_ISGID);
    });
}

std::string attr_key(std::string path) {
  while (path.starts_with("./")) path.erase(0, 2);
  while (path.starts_with("/")) path.erase(0, 1);
  while (path.size() > 1 && path.ends_with("/")) path.pop_back();
  return path == "." ? "" : path;
}

std::string portable_capability(const std::string& value) {
  if (value.size() != kCapV3Size) return value;
  uint32_t magic;
  std::memcpy(&magic, value.data(), sizeof magic);  // little-endian on disk, as here
  if ((magic & kCapRevisionMask) != kCapRevision3) return value;
  magic = (magic & ~kCapRevisionMask) | kCapRevision2;
  std::string v2 = value.substr(0, kCapV2Size);
  std::memcpy(v2.data(), &magic, sizeof magic);
  return v2;
}

Xattrs read_xattrs(int fd) {
  Xattrs out;
  const std::string path = util::fd_path(fd);  // an O_PATH descriptor too
  std::string names(1024, '\0');
  ssize_t n;
  while ((n = ::listxattr(path.c_str(), names.data(), names.size())) < 0 && errno == ERANGE)
    names.resize(names.size() * 4);
  if (n <= 0) return out;  // none, or a file system without them (ENOTSUP)
  names.resize(static_cast<size_t>(n));
  for (size_t at = 0; at < names.size();) {
    const std::string key = names.c_str() + at;
    at += key.size() + 1;
    if (key.empty()) continue;
    std::string value(256, '\0');
    ssize_t m;
    while ((m = ::getxattr(path.c_str(), key.c_str(), value.data(), value.size())) < 0 && errno == ERANGE)
      value.resize(value.size() * 4);
    if (m < 0) continue;  // gone meanwhile, or not ours to read
    value.resize(static_cast<size_t>(m));
    out.emplace_back(key, key == "security.capability" ? portable_capability(value) : value);
  }
  return out;
}

void EntryDeleter::operator()(::archive_entry* e) const { archive_entry_free(e); }

}  // namespace rt::image
