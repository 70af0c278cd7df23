// A per-user cache of read_elf results (host); see elf_cache.hpp.
#include "hpc/elf_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::hpc {
namespace {

// One entry per line, fields separated by tabs, lists by '\x1f':
// path stamp elf(0|1) soname needed runpath glibc_needed glibc_defined machine
// version_needs version_defs; a version need is "file\x1ename\x1ename...".
constexpr char kVersion[] = "rt-elf-cache 3";
constexpr char kList = '\x1f';
constexpr char kSub = '\x1e';

std::string join_list(const std::vector<std::string>& v) { return util::join(v, kList); }

std::vector<std::string> split_list(const std::string& s) {
  if (s.empty()) return {};
  return util::split(s, kList);
}

}  // namespace

void record_directories(const std::string& path, std::map<std::string, std::string>& into) {
  std::string p = path;
  for (int links = 0; links < 40; ++links) {
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) return;
    const std::string dir = slash == 0 ? "/" : p.substr(0, slash);
    into.emplace(dir, host_stamp(dir));
    char target[4096];
    const ssize_t len = ::readlink(p.c_str(), target, sizeof target);
    if (len <= 0 || static_cast<size_t>(len) == sizeof target) return;  // a file (EINVAL), or unreadable
    // A ".." in a relative target leads up from where `dir` really is.
    const std::string t(target, static_cast<size_t>(len));
    std::string from = dir;
    if (t.front() != '/' && (t.starts_with("../") || t.find("/../") != std::string::npos))
      if (char* real = ::realpath(dir.c_str(), nullptr)) from = real, std::free(real);
    p = util::normalize_path(t.front() == '/' ? t : from + "/" + t);
  }
}

std::string host_stamp(const std::string& path, struct stat* st) {
  struct stat own;
  if (!st) st = &own;
  if (::stat(path.c_str(), st) == 0) return util::file_stamp(*st);
  st->st_mode = 0;
  return "-";
}

ElfCache::ElfCache(int dirfd, std::string name) : dirfd_(dirfd), name_(std::move(name)) {
  if (dirfd_ < 0) return;
  std::optional<std::string> text;
  try {
    text = util::read_owned_at(dirfd_, name_);
  } catch (const Error&) {
  }
  if (!text) return;
  // Every rank reads the file, and uses a few of its entries: each line is
  // split at its first two tabs only; an entry's fields are read when used.
  std::string_view rest(*text);
  auto next_line = [&rest]() {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    return line;
  };
  if (next_line() != kVersion) return;
  while (!rest.empty()) {
    std::string_view line = next_line();
    size_t a = line.find('\t'), b = a == std::string_view::npos ? a : line.find('\t', a + 1);
    if (b == std::string_view::npos) continue;
    std::string key(line.substr(a + 1, b - a - 1));
    if (line.substr(0, a) == "=") {
      notes_[std::move(key)] = std::string(line.substr(b + 1));
      continue;
    }
    entries_[std::string(line.substr(0, a))] =
        Entry{std::move(key), std::nullopt, std::string(line.substr(b + 1)), false};
  }
}

// An entry's fields after path and stamp: elf(0|1) soname needed runpath
// glibc_needed glibc_defined machine version_needs version_defs. False when
// they are not that.
bool ElfCache::parse(Entry& e) {
  auto f = util::split(e.raw, '\t');
  e.raw.clear();
  if (f.size() != 9) return false;
  if (f[0] != "1") return true;
  try {
    ElfInfo info;
    info.soname = f[1];
    info.needed = split_list(f[2]);
    info.runpath = split_list(f[3]);
    info.glibc_needed = f[4];
    info.glibc_defined = f[5];
    info.machine = static_cast<unsigned>(std::stoul(f[6]));
    for (const auto& need : split_list(f[7])) {
      auto parts = util::split(need, kSub);
      info.version_needs.emplace_back(parts.front(), std::vector<std::string>(parts.begin() + 1, parts.end()));
    }
    info.version_defs = split_list(f[8]);
    e.info = std::move(info);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

std::optional<ElfInfo> ElfCache::get(const std::string& path) {
  auto it = entries_.find(path);
  // Checked once per process: a plan asks for a library more than once.
  if (it != entries_.end() && it->second.checked) return it->second.info;
  std::string stamp = host_stamp(path);
  if (record_ && stamp == "-")
    record_->emplace(path, stamp);
  else if (record_)
    record_directories(path, *record_);
  if (stamp == "-") return read_elf(path);  // read_elf explains the error
  if (it != entries_.end() && it->second.stamp == stamp && (it->second.raw.empty() || parse(it->second))) {
    it->second.checked = true;
    return it->second.info;
  }
  Entry e{std::move(stamp), read_elf(path), "", true};
  auto info = e.info;
  entries_[path] = std::move(e);
  dirty_ = true;
  return info;
}

std::optional<std::string> ElfCache::note(const std::string& key) const {
  auto it = notes_.find(key);
  if (it == notes_.end()) return std::nullopt;
  notes_used_.insert(key);
  return it->second;
}

void ElfCache::set_note(const std::string& key, const std::string& value) {
  if ((key + value).find_first_of("\t\n") != std::string::npos) return;
  notes_[key] = value;
  notes_used_.insert(key);
  dirty_ = true;
}

void ElfCache::save() const {
  if (!dirty_ || dirfd_ < 0) return;
  std::string text = std::string(kVersion) + "\n";
  const bool full = entries_.size() + notes_.size() > kMaxEntries;
  for (const auto& [path, e] : entries_) {
    if (path.find_first_of("\t\n") != std::string::npos || (full && !e.checked)) continue;
    text += path + "\t" + e.stamp;
    if (!e.raw.empty()) {
      text += "\t" + e.raw + "\n";  // never read: as it was
    } else if (e.info) {
      std::vector<std::string> needs;
      for (const auto& [file, names] : e.info->version_needs)
        needs.push_back(file + (names.empty() ? "" : kSub + util::join(names, kSub)));
      text += "\t1\t" + e.info->soname + "\t" + join_list(e.info->needed) + "\t" + join_list(e.info->runpath) + "\t" +
              e.info->glibc_needed + "\t" + e.info->glibc_defined + "\t" + std::to_string(e.info->machine) + "\t" +
              join_list(needs) + "\t" + join_list(e.info->version_defs) + "\n";
    } else {
      text += "\t0\t\t\t\t\t\t0\t\t\n";
    }
  }
  for (const auto& [key, value] : notes_)
    if (!full || notes_used_.count(key)) text += "=\t" + key + "\t" + value + "\n";
  util::write_file_atomic_at(dirfd_, name_, text);
}

}  // namespace rt::hpc
