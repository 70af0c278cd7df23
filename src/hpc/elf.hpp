// What the dynamic linker needs to know of a shared object or program:
// its soname, DT_NEEDED, run paths and glibc symbol versions (host).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rt::hpc {

struct ElfInfo {
  std::string soname;
  std::vector<std::string> needed;
  std::vector<std::string> runpath;  // DT_RUNPATH, else DT_RPATH, split on ':'
  std::string glibc_needed;          // highest GLIBC_x.y it asks for ("" if none)
  std::string glibc_defined;         // highest GLIBC_x.y it provides (libc itself)
  unsigned machine = 0;              // e_machine
  // The symbol versions it asks of each library it needs (DT_VERNEED:
  // file -> names, "GLIBCXX_3.4.30"; glibc's GLIBC_x.y only as
  // glibc_needed), and those it defines (DT_VERDEF, the file's own name
  // left out): whether an image's copy of a library will do.
  std::vector<std::pair<std::string, std::vector<std::string>>> version_needs;
  std::vector<std::string> version_defs;
  // The versions of `file` it asks for; empty when none (or it does not need it).
  const std::vector<std::string>& needs_of(const std::string& file) const;
};

// Reads a 64-bit little-endian ELF file; nullopt when `path` is not one
// (a linker script, a 32-bit library). Throws rt::Error on a truncated or
// inconsistent file.
std::optional<ElfInfo> read_elf(const std::string& path);
// The same for a file already in memory; `name` is for messages.
std::optional<ElfInfo> parse_elf(std::string_view data, const std::string& name);

// The glibc release a libc.so.6 says it is ("2.31", from its banner "...
// release version 2.31."); "" when it says none. Its newest GLIBC_x.y
// symbol version can be older (2.31 defines nothing newer than 2.30).
std::string glibc_release(std::string_view libc);

// Compares "GLIBC_2.34"-style version names by their numbers; "" is lowest.
int compare_glibc(const std::string& a, const std::string& b);

}  // namespace rt::hpc
