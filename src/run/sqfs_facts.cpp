// What rt exec reads from a SquashFS image, remembered (host); see
// sqfs_facts.hpp.
#include "run/sqfs_facts.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <vector>

#include "rt/error.hpp"
#include "squash/sif.hpp"
#include "squash/sqfs.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::run {
namespace {

// "rt-sqfs-facts 4\n" PATH "\n" STAMP "\n", then per fact its length (or
// "-" when the image lacks the file) on a line, followed by its bytes: the
// configuration, passwd, group, a SIF file's overlay partition's offset,
// and last Apptainer's files, as letters: e(nv), r(unscript),
// s(tartscript).
constexpr char kVersion[] = "rt-sqfs-facts 4";
constexpr size_t kLimit = 1 << 22;  // per file, as read from the image

// The facts as text, Apptainer's as letters in `apptainer`.
std::array<std::optional<std::string>*, 5> fields(SquashFacts& f, std::optional<std::string>& apptainer) {
  return {&f.config, &f.passwd, &f.group, &f.sif_overlay, &apptainer};
}

std::string line_at(const std::string& text, size_t& at) {
  size_t nl = text.find('\n', at);
  if (nl == std::string::npos) throw std::runtime_error("truncated");
  std::string line = text.substr(at, nl - at);
  at = nl + 1;
  return line;
}

std::optional<SquashFacts> parse(const std::string& text, const std::string& head) {
  if (!text.starts_with(head)) return std::nullopt;
  SquashFacts f;
  std::optional<std::string> apptainer;
  size_t at = head.size();
  try {
    for (auto* field : fields(f, apptainer)) {
      std::string n = line_at(text, at);
      if (n == "-") continue;
      char* end = nullptr;
      unsigned long long size = std::strtoull(n.c_str(), &end, 10);
      if (n.empty() || *end || size > kLimit || size > text.size() - at) return std::nullopt;
      *field = text.substr(at, size);
      at += size;
    }
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
  if (at != text.size() || !apptainer) return std::nullopt;
  f.apptainer = {apptainer->find('e') != std::string::npos, apptainer->find('r') != std::string::npos,
                 apptainer->find('s') != std::string::npos};
  return f;
}

}  // namespace

SquashFacts squash_facts(const std::string& path, int cache_dir, const std::function<squash::Image&()>& open) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw SysError{errno, "stat", path};
  const std::string head = std::string(kVersion) + "\n" + path + "\n" + util::file_stamp(st) + "\n";
  const std::string name = util::hash_hex(path);
  const bool cacheable = path.find('\n') == std::string::npos;  // the header holds it on one line
  if (cacheable) {
    try {
      if (auto text = util::read_owned_at(cache_dir, name, 4 * kLimit))
        if (auto f = parse(*text, head)) return *f;
    } catch (const std::exception&) {
      // Unreadable: read the image instead.
    }
  }

  squash::Image& image = open();
  SquashFacts f;
  f.config = image.read_file(squash::kConfigPath, kLimit);
  f.passwd = image.read_file("/etc/passwd", kLimit);
  f.group = image.read_file("/etc/group", kLimit);
  f.apptainer = apptainer_files(image);
  if (image.sif())
    if (const auto* ov = squash::sif_overlay_partition(*image.sif())) f.sif_overlay = std::to_string(ov->offset);
  if (cacheable) {
    std::optional<std::string> apptainer = std::string(f.apptainer.env_scripts ? "e" : "") +
                                           (f.apptainer.runscript ? "r" : "") + (f.apptainer.startscript ? "s" : "");
    std::string text = head;
    for (auto* field : fields(f, apptainer))
      text += (*field ? std::to_string((*field)->size()) + "\n" + **field : "-\n");
    util::write_file_atomic_at(cache_dir, name, text);
  }
  return f;
}

uint64_t prune_squash_facts(int cache_dir, size_t* removed) {
  uint64_t freed = 0;
  size_t count = 0;
  for (const auto& name : util::list_names(cache_dir, "sqfs-facts")) {
    // The cache's own names: hash_hex (32 hex digits), and the temporary
    // names of write_file_atomic_at (".HEX.PID.N.tmp") left by a killed run.
    const bool temporary = name.starts_with(".") && name.ends_with(".tmp") && util::is_hex(name.substr(1, 32));
    if (!(name.size() == 32 && util::is_hex(name)) && !temporary) continue;
    struct stat own;
    if (::fstatat(cache_dir, name.c_str(), &own, AT_SYMLINK_NOFOLLOW) != 0) continue;
    std::vector<std::string> lines;
    try {
      std::string text = util::read_owned_at(cache_dir, name, 4 * kLimit + 8192).value_or("");
      size_t at = 0;
      for (int i = 0; i < 3; ++i) lines.push_back(line_at(text, at));
    } catch (const std::exception&) {
      // Unreadable or damaged: not current.
    }
    struct stat st;
    bool current = !temporary && lines.size() >= 3 && lines[0] == kVersion && ::stat(lines[1].c_str(), &st) == 0 &&
                   lines[2] == util::file_stamp(st) && name == util::hash_hex(lines[1]);
    if (!current && ::unlinkat(cache_dir, name.c_str(), 0) == 0) {
      freed += static_cast<uint64_t>(own.st_size);
      ++count;
    }
  }
  if (removed) *removed = count;
  return freed;
}

}  // namespace rt::run
