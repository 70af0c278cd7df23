// Minimal ELF reader for library closures and glibc checks (host).
#include "hpc/elf.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cctype>

#include <cstring>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::hpc {
namespace {

struct Mapped {
  const unsigned char* data = nullptr;
  size_t size = 0;
};

class Reader {
public:
  Reader(const Mapped& m, const std::string& path) : m_(m), path_(path) {}

  template <class T>
  T at(uint64_t off) const {
    if (off > m_.size || sizeof(T) > m_.size - off) bad("offset out of range");
    T v;
    std::memcpy(&v, m_.data + off, sizeof v);
    return v;
  }
  std::string str(uint64_t off) const {
    if (off >= m_.size) bad("string out of range");
    const char* s = reinterpret_cast<const char*>(m_.data + off);
    return std::string(s, strnlen(s, m_.size - off));
  }
  [[noreturn]] void bad(const char* why) const { throw Error("`" + path_ + "` is not a valid ELF file: " + why); }

private:
  const Mapped& m_;
  const std::string& path_;
};

std::vector<unsigned> version_numbers(const std::string& v) {
  std::vector<unsigned> out;
  size_t i = v.find('_');
  if (i == std::string::npos) return out;
  for (const auto& part : util::split(v.substr(i + 1), '.')) {
    unsigned n = 0;
    for (char c : part) {
      if (c < '0' || c > '9') break;
      n = n * 10 + static_cast<unsigned>(c - '0');
    }
    out.push_back(n);
  }
  return out;
}

void raise_to(std::string& best, const std::string& v) {
  if (v.starts_with("GLIBC_") && v != "GLIBC_PRIVATE" && compare_glibc(v, best) > 0) best = v;
}

}  // namespace

std::string glibc_release(std::string_view libc) {
  constexpr std::string_view kBanner = "release version ";
  for (size_t at = libc.find(kBanner); at != std::string_view::npos; at = libc.find(kBanner, at + 1)) {
    size_t from = at + kBanner.size(), to = from;
    while (to < libc.size() && (std::isdigit(static_cast<unsigned char>(libc[to])) || libc[to] == '.')) ++to;
    std::string v(libc.substr(from, to - from));
    while (!v.empty() && v.back() == '.') v.pop_back();
    if (v.find('.') != std::string::npos && std::isdigit(static_cast<unsigned char>(v.front()))) return v;
  }
  return {};
}

int compare_glibc(const std::string& a, const std::string& b) {
  auto x = version_numbers(a), y = version_numbers(b);
  if (a.empty() || b.empty()) return a.empty() == b.empty() ? 0 : a.empty() ? -1 : 1;
  return x < y ? -1 : x > y ? 1 : 0;
}

const std::vector<std::string>& ElfInfo::needs_of(const std::string& file) const {
  static const std::vector<std::string> kNone;
  for (const auto& [f, names] : version_needs)
    if (f == file) return names;
  return kNone;
}

std::optional<ElfInfo> read_elf(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SysError{errno, "open", path};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return std::nullopt;
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw SysError{errno, "mmap", path};
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { ::munmap(p, n); }
  } unmap{p, size};
  return parse_elf(std::string_view(static_cast<const char*>(p), size), path);
}

std::optional<ElfInfo> parse_elf(std::string_view data, const std::string& path) {
  if (data.size() < sizeof(Elf64_Ehdr)) return std::nullopt;
  Mapped m{reinterpret_cast<const unsigned char*>(data.data()), data.size()};
  Reader r(m, path);
  auto eh = r.at<Elf64_Ehdr>(0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return std::nullopt;
  ElfInfo info;
  info.machine = eh.e_machine;
  std::vector<Elf64_Phdr> loads;
  std::optional<Elf64_Phdr> dynamic;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    auto ph = r.at<Elf64_Phdr>(eh.e_phoff + uint64_t{i} * eh.e_phentsize);
    if (ph.p_type == PT_LOAD) loads.push_back(ph);
    if (ph.p_type == PT_DYNAMIC) dynamic = ph;
  }
  if (!dynamic) return info;  // static: needs nothing
  auto file_off = [&](uint64_t vaddr) -> uint64_t {
    for (const auto& l : loads)
      if (vaddr >= l.p_vaddr && vaddr < l.p_vaddr + l.p_filesz) return vaddr - l.p_vaddr + l.p_offset;
    r.bad("address outside the loaded segments");
  };
  uint64_t strtab = 0, verneed = 0, verneednum = 0, verdef = 0, verdefnum = 0;
  std::vector<uint64_t> needed;
  uint64_t soname = UINT64_MAX, runpath = UINT64_MAX, rpath = UINT64_MAX;
  for (uint64_t off = dynamic->p_offset; off + sizeof(Elf64_Dyn) <= dynamic->p_offset + dynamic->p_filesz;
       off += sizeof(Elf64_Dyn)) {
    auto d = r.at<Elf64_Dyn>(off);
    if (d.d_tag == DT_NULL) break;
    switch (d.d_tag) {
      case DT_STRTAB:
        strtab = d.d_un.d_ptr;
        break;
      case DT_NEEDED:
        needed.push_back(d.d_un.d_val);
        break;
      case DT_SONAME:
        soname = d.d_un.d_val;
        break;
      case DT_RUNPATH:
        runpath = d.d_un.d_val;
        break;
      case DT_RPATH:
        rpath = d.d_un.d_val;
        break;
      case DT_VERNEED:
        verneed = d.d_un.d_ptr;
        break;
      case DT_VERNEEDNUM:
        verneednum = d.d_un.d_val;
        break;
      case DT_VERDEF:
        verdef = d.d_un.d_ptr;
        break;
      case DT_VERDEFNUM:
        verdefnum = d.d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (!strtab) r.bad("no string table");
  const uint64_t strs = file_off(strtab);
  for (auto n : needed) info.needed.push_back(r.str(strs + n));
  if (soname != UINT64_MAX) info.soname = r.str(strs + soname);
  uint64_t rp = runpath != UINT64_MAX ? runpath : rpath;
  if (rp != UINT64_MAX)
    for (auto& dir : util::split(r.str(strs + rp), ':'))
      if (!dir.empty()) info.runpath.push_back(dir);
  if (verneed) {
    uint64_t off = file_off(verneed);
    for (uint64_t i = 0; i < verneednum && i < 4096; ++i) {
      auto vn = r.at<Elf64_Verneed>(off);
      std::vector<std::string> names;
      uint64_t aoff = off + vn.vn_aux;
      for (unsigned j = 0; j < vn.vn_cnt && j < 4096; ++j) {
        auto va = r.at<Elf64_Vernaux>(aoff);
        // glibc's versions are kept as the newest only (glibc_needed):
        // its libraries never come from the host but as a whole.
        std::string name = r.str(strs + va.vna_name);
        raise_to(info.glibc_needed, name);
        if (!name.starts_with("GLIBC_")) names.push_back(std::move(name));
        if (!va.vna_next) break;
        aoff += va.vna_next;
      }
      if (!names.empty()) info.version_needs.emplace_back(r.str(strs + vn.vn_file), std::move(names));
      if (!vn.vn_next) break;
      off += vn.vn_next;
    }
  }
  if (verdef) {
    uint64_t off = file_off(verdef);
    for (uint64_t i = 0; i < verdefnum && i < 4096; ++i) {
      auto vd = r.at<Elf64_Verdef>(off);
      if (vd.vd_cnt && !(vd.vd_flags & VER_FLG_BASE)) {
        info.version_defs.push_back(r.str(strs + r.at<Elf64_Verdaux>(off + vd.vd_aux).vda_name));
        raise_to(info.glibc_defined, info.version_defs.back());
      }
      if (!vd.vd_next) break;
      off += vd.vd_next;
    }
  }
  return info;
}

}  // namespace rt::hpc
