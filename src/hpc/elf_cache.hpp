// A per-user cache of read_elf results, so that a rank does not parse the
// few hundred plugins of a host MPI on every start (host). Entries are
// keyed by path and checked against the file's identity (util::file_stamp);
// a stale or missing entry is read again.
#pragma once
#include <sys/stat.h>

#include <map>
#include <optional>
#include <set>
#include <string>

#include "hpc/elf.hpp"

namespace rt::hpc {

// The identity of host file `path`, as caches of facts about it keep it:
// util::file_stamp of what stat(2) follows it to, "-" where there is none.
// `st`, when given, gets what stat said (st_mode 0 where there is none).
std::string host_stamp(const std::string& path, struct stat* st = nullptr);

// Puts in `into` (where not there yet), each with its host_stamp, the
// directory of host file `path` and, where the name there is a symbolic
// link, the directory of each link on the way to the file. A library
// replaced by renaming a new file into place, or a link changed, changes
// one of them (stat follows a directory's own links: one of its parents
// that changed where it leads changes its identity too); a file rewritten
// in place does not.
void record_directories(const std::string& path, std::map<std::string, std::string>& into);

class ElfCache {
public:
  // The cache lives in the file `name` of the directory `dirfd` (-1: in
  // memory only), which the caller keeps open; a missing or unreadable file,
  // or one that is not the caller's, is an empty cache.
  ElfCache(int dirfd, std::string name);
  // read_elf(path), from the cache when the file has not changed.
  std::optional<ElfInfo> get(const std::string& path);
  // Facts about other files, under keys that change with them.
  std::optional<std::string> note(const std::string& key) const;
  void set_note(const std::string& key, const std::string& value);
  // From now on, for each path get() is asked for, the directories it is
  // reached through (record_directories) are put in `into` with their
  // identities, the first time; a path that does not exist, itself.
  void record(std::map<std::string, std::string>* into) { record_ = into; }
  // Writes the cache back if anything was read (atomically: concurrent
  // ranks each write a whole file, the last one wins). Errors are ignored:
  // the cache is only an optimisation. Past kMaxEntries entries and notes
  // (every image version adds some), only those this process used are kept.
  void save() const;
  static constexpr size_t kMaxEntries = 2048;

private:
  struct Entry {
    std::string stamp;  // util::file_stamp when it was read
    std::optional<ElfInfo> info;
    std::string raw;  // its fields as the file holds them, until first used
    bool checked;     // its stamp was compared with the file's in this process
  };
  static bool parse(Entry& e);
  int dirfd_;
  std::string name_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> notes_;
  mutable std::set<std::string> notes_used_;  // read or set by this process
  bool dirty_ = false;
  std::map<std::string, std::string>* record_ = nullptr;
};

}  // namespace rt::hpc
