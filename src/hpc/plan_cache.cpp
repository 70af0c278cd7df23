// A per-user cache of injection plans (host); see plan_cache.hpp.
#include "hpc/plan_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::hpc {
namespace {

// One file per plan, named by its key, under the store's plan directory:
//   the version line, then H path stamp / I path stamp for the inputs, the
//   plan's fields one per line (F|O|M|L host container, D|E|V|P|B|N|W|C
//   value, G gpu procfs dev), and "." at its end. Fields are separated by
//   tabs. The newest plans are kept; a new one removes the oldest.
constexpr char kPlanCacheVersion[] = "rt-plan-cache 2";
constexpr size_t kPlansKept = 32;

bool plain(const std::string& s) { return !s.empty() && s.find_first_of("\t\n") == std::string::npos; }

using Files = std::vector<Injection::File>;
using Words = std::vector<std::string>;

// The plan's fields with their letters, for writing and reading alike.
template <typename Plan, typename FilesFn, typename WordsFn>
void each_field(Plan& p, FilesFn files, WordsFn words) {
  files('F', p.files);
  files('O', p.over);
  files('M', p.cdi_mounts);
  files('L', p.cdi_links);
  words('D', p.dirs);
  words('E', p.env_set);
  words('V', p.env_list);
  words('P', p.lib_path);
  words('B', p.bin_path);
  words('N', p.notes);
  words('W', p.warnings);
}

// host_stamp of each input in turn, its directory looked up once for the
// inputs beside it (they come sorted: a plan's libraries share a few
// directories, and a full path lookup costs more than the stat).
class HostStamps {
public:
  std::string operator()(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == path.size()) return host_stamp(path);
    const std::string_view dir(path.data(), slash);
    if (dir != dir_) {
      dir_ = dir;
      fd_.reset(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    }
    struct stat st;
    return fd_ && ::fstatat(fd_.get(), path.c_str() + slash + 1, &st, 0) == 0 ? util::file_stamp(st) : "-";
  }

private:
  std::string dir_;
  util::UniqueFd fd_;
};

}  // namespace

std::string plan_key(const InjectRequest& req, const SiteConfig& conf, const ImageView& image) {
  if (!req.devices.empty()) return "";
  std::string k = "rt " + host_stamp("/proc/self/exe") + "\nimage " + image.name() + " " + image.identity() + "\nmpi " +
                  req.mpi + "\nprogram " + req.program;
  // A relative program path is looked up from the working directory.
  if (req.program.find('/') != std::string::npos && req.program.front() != '/') k += "\ncwd " + util::current_dir();
  k += "\nflags " + std::to_string(req.gpu) + std::to_string(req.gpu_required) + std::to_string(req.ib) +
       std::to_string(req.ib_required) + std::to_string(req.fabric) + std::to_string(req.glibc_replace);
  k += "\nconf " + conf.file;
  for (const auto& [key, words] : conf.values) k += "\n" + key + "=" + util::join(words, ' ');
  return util::hash_hex(k);
}

PlanCache::PlanCache(int dirfd, std::string name) : dirfd_(dirfd), name_(std::move(name)) {}

std::optional<Injection> PlanCache::find(const std::string& key, const ImageView& image) const {
  if (key.empty() || dirfd_ < 0) return std::nullopt;
  std::optional<std::string> text;
  try {
    text = util::read_owned_at(dirfd_, name_ + "/" + key);
  } catch (const Error&) {
  }
  const std::string head = std::string(kPlanCacheVersion) + "\n";
  if (!text || !text->starts_with(head) || !text->ends_with("\n.\n")) return std::nullopt;
  std::string_view rest(*text);
  rest.remove_prefix(head.size());
  rest.remove_suffix(2);  // ".\n"
  Injection plan;
  HostStamps host_stamps;
  while (!rest.empty()) {
    std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(line.size() + 1);
    if (line.size() < 2 || line[1] != '\t') return std::nullopt;
    const char kind = line[0];
    std::string_view f[3];  // its fields; a line with more is no plan's
    size_t fields = 0;
    for (line.remove_prefix(2);;) {
      if (fields == 3) return std::nullopt;
      const size_t tab = line.find('\t');
      f[fields++] = line.substr(0, tab);
      if (tab == std::string_view::npos) break;
      line.remove_prefix(tab + 1);
    }
    if (kind == 'H' || kind == 'I') {  // an input: as it was, or the plan is stale
      if (fields != 2) return std::nullopt;
      const std::string path(f[0]), now = kind == 'H' ? host_stamps(path) : image.stamp(path);
      if ((now.empty() ? "-" : std::string_view(now)) != f[1]) return std::nullopt;
      continue;
    }
    bool known = false;
    auto files = [&](char k, Files& v) {
      if (k != kind) return;
      known = fields == 2;
      if (known) v.push_back({std::string(f[0]), std::string(f[1])});
    };
    auto words = [&](char k, Words& v) {
      if (k != kind) return;
      known = fields == 1;
      if (known) v.emplace_back(f[0]);
    };
    each_field(plan, files, words);
    if (kind == 'C' && fields == 1) plan.cuda_compat_host = f[0], known = true;
    if (kind == 'G' && fields == 3) plan.gpu = f[0] == "1", plan.gpu_procfs = f[1], plan.gpu_dev = f[2], known = true;
    if (!known) return std::nullopt;
  }
  return plan;
}

void PlanCache::store(const std::string& key, const PlanInputs& inputs, const Injection& plan) const {
  if (key.empty() || dirfd_ < 0) return;
  std::string text = std::string(kPlanCacheVersion) + "\n";
  bool ok = true;
  auto line = [&](char kind, std::initializer_list<std::string> fields) {
    text += kind;
    for (const auto& f : fields) {
      ok = ok && plain(f);
      text += "\t" + f;
    }
    text += "\n";
  };
  for (const auto& [path, stamp] : inputs.host) line('H', {path, stamp});
  for (const auto& [path, stamp] : inputs.image) line('I', {path, stamp});
  each_field(
      plan,
      [&](char k, const Files& v) {
        for (const auto& f : v) line(k, {f.host, f.container});
      },
      [&](char k, const Words& v) {
        for (const auto& w : v) line(k, {w});
      });
  if (!plan.cuda_compat_host.empty()) line('C', {plan.cuda_compat_host});
  line('G', {plan.gpu ? "1" : "0", plan.gpu_procfs, plan.gpu_dev});
  text += ".\n";
  if (!ok) return;  // a tab or newline in a name: not kept
  try {
    util::UniqueFd dir;
    for (int tries = 0; tries < 2 && dir.get() < 0; ++tries) {
      if (::mkdirat(dirfd_, name_.c_str(), 0700) != 0 && errno != EEXIST) return;
      dir = util::UniqueFd(::openat(dirfd_, name_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (dir.get() < 0 && (errno == ENOTDIR || errno == ELOOP)) ::unlinkat(dirfd_, name_.c_str(), 0);  // not rt's
    }
    if (dir.get() < 0) return;
    util::write_file_atomic_at(dir.get(), key, text);
    // The oldest plans beyond the newest few go.
    std::vector<std::pair<long long, std::string>> kept;
    for (auto& n : util::list_names(dir.get(), name_)) {
      struct stat st;
      if (n.size() != key.size() || n.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
      if (::fstatat(dir.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
        kept.emplace_back(static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec, std::move(n));
    }
    if (kept.size() <= kPlansKept) return;
    std::sort(kept.begin(), kept.end());
    for (size_t i = 0; i + kPlansKept < kept.size(); ++i) ::unlinkat(dir.get(), kept[i].second.c_str(), 0);
  } catch (const Error&) {
  }
}

}  // namespace rt::hpc
