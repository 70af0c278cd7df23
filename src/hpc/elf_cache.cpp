// A per-user cache of read_elf results (host); see elf_cache.hpp.
#include "hpc/elf_cache.hpp"

#include <sys/stat.h>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::hpc {
namespace {

// One entry per line, fields separated by tabs, lists by '\x1f':
// path stamp elf(0|1) soname needed runpath glibc_needed glibc_defined machine
constexpr char kVersion[] = "rt-elf-cache 2";
constexpr char kList = '\x1f';

std::string join_list(const std::vector<std::string>& v) { return util::join(v, kList); }

std::vector<std::string> split_list(const std::string& s) {
  if (s.empty()) return {};
  return util::split(s, kList);
}

}  // namespace

ElfCache::ElfCache(int dirfd, std::string name) : dirfd_(dirfd), name_(std::move(name)) {
  if (dirfd_ < 0) return;
  std::optional<std::string> text;
  try {
    text = util::read_owned_at(dirfd_, name_);
  } catch (const Error&) {
  }
  if (!text) return;
  auto lines = util::split(*text, '\n');
  if (lines.empty() || lines.front() != kVersion) return;
  for (size_t i = 1; i < lines.size(); ++i) {
    auto f = util::split(lines[i], '\t');
    if (f.size() == 3 && f[0] == "=") {
      notes_[f[1]] = f[2];
      continue;
    }
    if (f.size() != 9) continue;
    Entry e;
    e.stamp = f[1];
    try {
      if (f[2] == "1") {
        ElfInfo info;
        info.soname = f[3];
        info.needed = split_list(f[4]);
        info.runpath = split_list(f[5]);
        info.glibc_needed = f[6];
        info.glibc_defined = f[7];
        info.machine = static_cast<unsigned>(std::stoul(f[8]));
        e.info = std::move(info);
      }
    } catch (const std::exception&) {
      continue;
    }
    entries_[f[0]] = std::move(e);
  }
}

std::optional<ElfInfo> ElfCache::get(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return read_elf(path);  // read_elf explains the error
  std::string stamp = util::file_stamp(st);
  auto it = entries_.find(path);
  if (it != entries_.end() && it->second.stamp == stamp) return it->second.info;
  Entry e{std::move(stamp), read_elf(path)};
  auto info = e.info;
  entries_[path] = std::move(e);
  dirty_ = true;
  return info;
}

std::optional<std::string> ElfCache::note(const std::string& key) const {
  auto it = notes_.find(key);
  if (it == notes_.end()) return std::nullopt;
  return it->second;
}

void ElfCache::set_note(const std::string& key, const std::string& value) {
  if ((key + value).find_first_of("\t\n") != std::string::npos) return;
  notes_[key] = value;
  dirty_ = true;
}

void ElfCache::save() const {
  if (!dirty_ || dirfd_ < 0) return;
  std::string text = std::string(kVersion) + "\n";
  for (const auto& [path, e] : entries_) {
    if (path.find_first_of("\t\n") != std::string::npos) continue;
    text += path + "\t" + e.stamp;
    if (e.info)
      text += "\t1\t" + e.info->soname + "\t" + join_list(e.info->needed) + "\t" + join_list(e.info->runpath) + "\t" +
              e.info->glibc_needed + "\t" + e.info->glibc_defined + "\t" + std::to_string(e.info->machine) + "\n";
    else
      text += "\t0\t\t\t\t\t\t0\n";
  }
  for (const auto& [key, value] : notes_) text += "=\t" + key + "\t" + value + "\n";
  util::write_file_atomic_at(dirfd_, name_, text);
}

}  // namespace rt::hpc
