// Host library injection: closure, checks, binds (host).
#include "hpc/inject.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "hpc/cdi.hpp"
#include "hpc/elf.hpp"
#include "hpc/ldcache.hpp"
#include "rt/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace rt::hpc {
namespace {

// This machine's name, for messages that many nodes of a job may print.
std::string this_host() {
  char name[256] = "";
  return ::gethostname(name, sizeof name - 1) == 0 && name[0] ? name : "unnamed";
}


// glibc's own libraries come from the image, never from the host: mixing
// two glibcs in one process does not work.
const std::set<std::string> kGlibc = {
    "libc.so.6",    "libm.so.6",        "libpthread.so.0",       "libdl.so.2",
    "librt.so.1",   "libresolv.so.2",   "libutil.so.1",          "ld-linux-x86-64.so.2",
    "libanl.so.1",  "libnsl.so.1",      "ld-linux-aarch64.so.1", "libBrokenLocale.so.1",
    "libmvec.so.1", "libthread_db.so.1"};

// The NVIDIA container toolkit's list of driver libraries for compute and
// utility work; "name.so.*" stands for any version.
const std::vector<std::string> kGpuLibraries = {"libcuda.so.1",
                                                "libnvidia-ml.so.1",
                                                "libnvidia-ptxjitcompiler.so.1",
                                                "libnvidia-nvvm.so.4",
                                                "libnvidia-cfg.so.1",
                                                "libnvidia-opencl.so.1",
                                                "libcudadebugger.so.1",
                                                "libnvidia-allocator.so.1",
                                                "libnvidia-gpucomp.so.*",
                                                "libnvidia-compiler.so.*",
                                                "libnvidia-pkcs11.so.*",
                                                "libnvidia-pkcs11-openssl3.so.*",
                                                "libnvidia-opticalflow.so.1",
                                                "libnvcuvid.so.1",
                                                "libnvidia-encode.so.1"};
// The libraries of an MPI and the runtime and fabric layers it was built
// with: a host MPI takes its own, whatever the image has (an image's
// libopen-pal of another Open MPI release beside the host's libmpi is a
// mismatch no symbol version tells).
bool is_mpi_stack(const std::string& soname) {
  static const char* const kPrefixes[] = {"libmpi",  "libopen-pal.", "libopen-rte.", "libopen-orted", "libmca_common_",
                                          "libpmix.", "libprrte.",    "libpmi.",      "libpmi2.",      "libucp.",
                                          "libucs.",  "libuct.",      "libucm.",      "libfabric.",    "libhcoll",
                                          "libxpmem.", "libpsm2."};
  for (const char* p : kPrefixes)
    if (soname.starts_with(p)) return true;
  return false;
}

// The dynamic linker's default directories in an image, after its cache.
constexpr const char* kImageDefaultDirs[] = {
#if defined(__aarch64__)
    "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
#else
    "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
#endif
    "/lib64", "/usr/lib64", "/lib", "/usr/lib"};
// Where the image's own MPI would be.
constexpr const char* kImageLibDirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib",
    "/usr/lib/aarch64-linux-gnu"};
const std::vector<std::string> kGpuBinaries = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                                               "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"};
const std::vector<std::string> kIbLibraries = {"libibverbs.so.1", "librdmacm.so.1", "libibumad.so.3", "libmlx5.so.1",
                                               "libmlx4.so.1",    "libefa.so.1",    "libfabric.so.1", "libucp.so.0",
                                               "libuct.so.0",     "libucs.so.0",    "libucm.so.0"};

using util::base_name;
using util::dir_name;

// The driver's program among `candidates` (paths, in order of preference):
// the first that is not a script, or the program a script runs with the
// same name (`/usr/bin/nvidia-smi` running `exec
// /usr/local/nvidia/bin/nvidia-smi`: bound in its place, the script would
// run a path the container lacks), else the first script. Returns the
// program and the script it was found through ("" when none).
// `consult` is told each path before it is read.
std::optional<std::pair<std::string, std::string>> driver_program(
    const std::vector<std::string>& candidates, const std::function<void(const std::string&)>& consult) {
  // The first bytes of a regular file; nullopt for anything else.
  auto head = [&consult](const std::string& path) -> std::optional<std::string> {
    consult(path);
    util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    struct stat st;
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    std::string buf(16384, '\0');
    try {
      buf.resize(util::read_some(fd.get(), buf.data(), buf.size(), path));
    } catch (const Error&) {
      return std::nullopt;
    }
    return buf;
  };
  std::optional<std::string> script;
  for (const auto& c : candidates) {
    auto text = head(c);
    if (!text) continue;
    if (!text->starts_with("#!")) return std::pair{c, std::string()};
    std::replace_if(text->begin(), text->end(), [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }, ' ');
    for (auto word : util::split(*text, ' ')) {
      // Words of the script: exec /x/nvidia-smi "$@", P='/x/nvidia-smi', ...
      word = util::trim(word.substr(word.find('=') == std::string::npos ? 0 : word.find('=') + 1), ";'\"&|()`");
      if (!word.starts_with("/") || word == c || base_name(word) != base_name(c)) continue;
      if (auto target = head(word); target && target->starts_with("\x7f" "ELF")) return std::pair{word, c};
    }
    if (!script) script = c;
  }
  if (script) return std::pair{*script, std::string()};
  return std::nullopt;
}

// The driver version a libcuda file name carries ("libcuda.so.535.104.05"
// -> "535.104.05"); "" for any other name (libcuda.so.1 included).
std::string libcuda_version(const std::string& name) {
  std::string v = name.starts_with("libcuda.so.") ? name.substr(11) : "";
  if (v.find('.') == std::string::npos || v.find_first_not_of("0123456789.") != std::string::npos) return "";
  return v;
}

class Planner {
public:
  Planner(const SiteConfig& conf, const ImageView& image, ElfCache& elf, bool glibc_replace, PlanInputs* inputs)
      : conf_(conf), image_(image), elf_(elf), glibc_replace_(glibc_replace), inputs_(inputs) {
    auto cache = conf.get("ld_cache", {"/etc/ld.so.cache"});
    cache_file_ = cache.empty() ? "/etc/ld.so.cache" : cache.front();
    if (std::string stamp = consult(cache_file_); stamp != "-") cache_stamp_ = stamp;
  }

  Injection out;

  // Every host path the plan looks at goes through here: its identity
  // before it is used, in `inputs_` when a plan is recorded.
  std::string consult(const std::string& path, struct stat* st = nullptr) {
    std::string stamp = host_stamp(path, st);
    if (inputs_) inputs_->host.emplace(path, stamp);
    return stamp;
  }
  bool host_exists(const std::string& path) { return consult(path) != "-"; }
  bool host_is_directory(const std::string& path) {
    struct stat st;
    consult(path, &st);
    return S_ISDIR(st.st_mode);
  }

  // A host library by soname (or "name.so.*", or an absolute path).
  // Reading the linker cache whole is most of a plan's work: every rank
  // asks for the same names, so the answers are remembered under the
  // cache's identity, and it is read only for a name not asked before.
  std::optional<std::string> find(const std::string& name) {
    if (!name.empty() && name.front() == '/') return host_exists(name) ? std::optional(name) : std::nullopt;
    if (cache_stamp_.empty()) return std::nullopt;
    const std::string key = "ld " + cache_stamp_ + " " + name;
    if (auto known = elf_.note(key)) return known->empty() ? std::nullopt : std::optional(*known);
    if (!cache_) cache_ = read_ld_cache(cache_file_);
    std::string found;
    if (name.size() > 2 && name.ends_with(".*")) {
      std::string prefix = name.substr(0, name.size() - 1);
      auto it = cache_->lower_bound(prefix);
      if (it != cache_->end() && it->first.starts_with(prefix)) found = it->second;
    } else if (auto it = cache_->find(name); it != cache_->end()) {
      found = it->second;
    }
    elf_.set_note(key, found);
    return found.empty() ? std::nullopt : std::optional(found);
  }

  // Adds `path` (a host library) and, with `closure`, what it needs.
  void add_library(const std::string& path, const std::string& why, bool closure) {
    auto info = elf_.get(path);
    std::string soname = info && !info->soname.empty() ? info->soname : base_name(path);
    if (!seen_.insert(soname).second) return;
    out.files.push_back({path, std::string(kLibDir) + "/" + soname});
    if (!info) return;
    note_glibc(*info, path);
    if (closure) add_needed(*info, path, why);
  }

  // What `path` needs. A library the image has, in a copy that defines
  // every symbol version `path` asks of it, comes from the image (the
  // image's libstdc++ is never shadowed by an older, or another, host
  // copy); the host's comes in, with what it needs in turn, only where the
  // image lacks it or its copy falls short. Once a host copy is in, it is
  // first on the library path for every object, so each decision holds.
  void add_needed(const ElfInfo& info, const std::string& path, const std::string& why) {
    for (const auto& n : info.needed) {
      if (kGlibc.count(n) || seen_.count(n)) continue;
      std::string shortfall;
      if (!primaries_.count(n) && !(mpi_stack_ && is_mpi_stack(n))) {
        if (auto copy = image_library(n)) {
          shortfall = missing_versions(info.needs_of(n), image_versions(*copy));
          if (shortfall.empty()) {
            from_image_.emplace(n, "`" + n + "` from the image (" + *copy + "): it has what `" + path + "` needs");
            continue;
          }
          shortfall = "the image's " + *copy + " lacks " + shortfall + ", which `" + path + "` needs";
        } else {
          shortfall = "the image has none";
        }
      }
      std::optional<std::string> found;
      for (auto dir : info.runpath) {
        if (dir.starts_with("$ORIGIN")) dir = dir_name(path) + dir.substr(7);
        if (host_exists(dir + "/" + n)) {
          found = dir + "/" + n;
          break;
        }
      }
      if (!found) found = find(n);
      if (!found) {
        out.notes.push_back("`" + path + "` needs `" + n + "`, which is not on this host (" + why + ")");
        continue;
      }
      if (!shortfall.empty()) out.notes.push_back("`" + n + "` from the host (" + *found + "): " + shortfall);
      add_library(*found, why, true);
    }
  }

  // The libraries a part injects whatever the image has (the driver, the
  // fabric, the MPI): known before their closures are walked, so that one
  // of them needed by another is never taken from the image.
  void primary(const std::string& path) {
    auto info = elf_.get(path);
    primaries_.insert(info && !info->soname.empty() ? info->soname : base_name(path));
  }

  // Where the image's dynamic linker would find `soname`: its
  // /etc/ld.so.cache, then the default directories. Every rank of a job
  // asks: the answers are remembered under the identity of the cache and
  // of those directories.
  std::optional<std::string> image_library(const std::string& soname) {
    if (image_key_.empty()) {
      image_key_ = image_.stamp("/etc/ld.so.cache");
      for (const char* d : kImageDefaultDirs) image_key_ += "|" + image_.stamp(d);
      image_key_ = util::hash_hex(image_key_);
    }
    const std::string key = "image-lib " + image_key_ + " " + soname;
    if (auto known = elf_.note(key)) return known->empty() ? std::nullopt : std::optional(*known);
    if (!image_cache_) {
      image_cache_.emplace();
      if (auto data = image_.read("/etc/ld.so.cache", 64u << 20)) try {
          *image_cache_ = parse_ld_cache(*data, image_.name() + ":/etc/ld.so.cache");
        } catch (const Error&) {  // a damaged cache: the default directories
        }
    }
    std::string where;
    if (auto it = image_cache_->find(soname); it != image_cache_->end() && !image_.stamp(it->second).empty())
      where = it->second;
    // The directories' stamps are the key's inputs: a name's presence in
    // one of them needs no input of its own (as when the answer is known).
    for (const char* d : kImageDefaultDirs)
      if (where.empty() && !image_.probe(std::string(d) + "/" + soname).empty()) where = std::string(d) + "/" + soname;
    elf_.set_note(key, where);
    return where.empty() ? std::nullopt : std::optional(where);
  }

  // The symbol versions an image's library defines (remembered by its identity).
  std::vector<std::string> image_versions(const std::string& path) {
    std::string stamp = image_.stamp(path);
    if (auto known = elf_.note("image-defs " + stamp)) return util::split(*known, ' ');
    std::vector<std::string> defs;
    try {
      if (auto data = image_.read(path, 256u << 20))
        if (auto info = parse_elf(*data, image_.name() + ":" + path)) defs = info->version_defs;
    } catch (const Error&) {  // unreadable or not ELF: it defines nothing
    }
    elf_.set_note("image-defs " + stamp, util::join(defs, ' '));
    return defs;
  }

  // The first of `wanted` that `have` lacks ("" when it has them all).
  static std::string missing_versions(const std::vector<std::string>& wanted, const std::vector<std::string>& have) {
    for (const auto& w : wanted)
      if (std::find(have.begin(), have.end(), w) == have.end()) return w;
    return "";
  }

  // The image's glibc must provide what every injected object asks for.
  void note_glibc(const ElfInfo& info, const std::string& path) {
    if (compare_glibc(info.glibc_needed, glibc_needed_) > 0) {
      glibc_needed_ = info.glibc_needed;
      glibc_needed_by_ = path;
    }
  }

  // Every shared object below a host directory (plugins) adds its closure.
  // Header, documentation and pkg-config directories hold none and are
  // skipped (Open MPI's libdir/openmpi has 200 of them).
  void add_plugin_dir(const std::string& dir, int depth = 0) {
    static const std::set<std::string> kNoPlugins = {"include", "share", "man", "doc", "pkgconfig", "cmake"};
    if (depth > 4) return;
    consult(dir);  // its entries, by its identity
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;  // an unreadable plugin directory: the host's MPI cannot use it either
    std::vector<std::pair<std::string, unsigned char>> entries;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") entries.emplace_back(std::move(n), e->d_type);
    }
    ::closedir(d);
    std::sort(entries.begin(), entries.end());
    for (const auto& [n, type] : entries) {
      bool so = n.find(".so") != std::string::npos;
      if (type != DT_DIR && type != DT_UNKNOWN && !(so && type == DT_REG)) continue;  // links: their targets count
      std::string p = dir + "/" + n;
      struct stat st;
      if (type == DT_REG)
        st.st_mode = S_IFREG;  // no lstat: the file system said so
      else if (::lstat(p.c_str(), &st) != 0)
        continue;
      if (S_ISDIR(st.st_mode)) {
        if (!kNoPlugins.count(n)) add_plugin_dir(p, depth + 1);
      } else if (S_ISREG(st.st_mode) && so) {
        if (auto info = elf_.get(p)) {
          note_glibc(*info, p);
          add_needed(*info, p, "plugin");
        }
      }
    }
  }

  void add_dir(const std::string& dir) {
    if (!host_is_directory(dir)) return;
    for (const auto& d : out.dirs)
      if (d == dir) return;
    out.dirs.push_back(dir);
  }

  // The image's own MPI libraries: (ABI, path) of each, in search order.
  using ImageMpis = std::vector<std::pair<std::string, std::string>>;
  ImageMpis image_mpis() const {
    ImageMpis found;
    for (const char* dir : kImageLibDirs)
      for (const auto& n : image_.list(dir))
        if (std::string abi = mpi_abi(n); !abi.empty()) found.emplace_back(abi, std::string(dir) + "/" + n);
    return found;
  }

  // The MPI `program` links (DT_NEEDED): its ABI and the library it
  // names; empty when it links none or cannot be read. The program is
  // looked up in the image (on the image's usual PATH when it has no '/'),
  // else on the host (the working directory and home are bound).
  std::pair<std::string, std::string> program_mpi(const std::string& program) {
    if (program.empty()) return {};
    std::vector<std::string> candidates;
    if (program.find('/') == std::string::npos) {
      for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"})
        candidates.push_back(std::string(dir) + "/" + program);
    } else {
      candidates.push_back(program.front() == '/' ? program : util::current_dir() + "/" + program);
    }
    // Every rank asks: what a file links is remembered by its identity.
    auto from = [](const std::optional<ElfInfo>& info) -> std::pair<std::string, std::string> {
      if (info)
        for (const auto& n : info->needed)
          if (std::string abi = mpi_abi(n); !abi.empty()) return {abi, n};
      return {};
    };
    for (const auto& c : candidates) {
      try {
        if (std::string stamp = image_.stamp(c); !stamp.empty()) {
          if (auto known = elf_.note("mpi-needs " + stamp))
            return known->empty() ? std::pair<std::string, std::string>{}
                                  : std::pair{known->substr(0, known->find(' ')), known->substr(known->find(' ') + 1)};
          auto data = image_.read(c, 64u << 20);
          auto found = data ? from(parse_elf(*data, c)) : std::pair<std::string, std::string>{};
          elf_.set_note("mpi-needs " + stamp, found.first.empty() ? "" : found.first + " " + found.second);
          return found;
        }
        if (program.find('/') != std::string::npos && host_exists(c)) return from(elf_.get(c));
      } catch (const Error&) {  // too large, unreadable, not ELF: no opinion
        return {};
      }
    }
    return {};
  }

  static std::string mpi_name(const std::string& abi) { return abi == "openmpi" ? "Open MPI" : "MPICH-ABI MPI"; }

  void mpi(const std::string& which, const std::string& program) {
    std::string flavor = which, lib;
    // Listing the image's library directories is the costly part of the
    // image checks (thousands of names): once per rank.
    const ImageMpis mpis = image_mpis();
    const auto [needs, needed_lib] = program_mpi(program);
    if (flavor == "auto") {  // the program's, else the image's, else the host's Open MPI
      flavor = !needs.empty() ? needs : mpis.empty() ? "" : mpis.front().first;
      if (flavor.empty()) flavor = find("libmpi.so.40") ? "openmpi" : "mpich";
    }
    if (!which.empty() && which.front() == '/') {
      lib = which;
      if (!host_exists(lib)) throw Error("--mpi: `" + lib + "` does not exist");
      auto info = elf_.get(lib);
      flavor = mpi_abi(info && !info->soname.empty() ? info->soname : base_name(lib));
      if (flavor.empty())
        throw Error("--mpi: `" + lib + "` is not an MPI library (soname libmpi.so.40, libmpi.so.12 or libmpich.so.12)");
    } else {
      if (flavor != "openmpi" && flavor != "mpich")
        throw Error("--mpi: unknown MPI `" + which + "`", "use --mpi=openmpi, --mpi=mpich or --mpi=/path/to/libmpi.so");
      auto names = conf_.get(flavor + ".library", flavor == "openmpi"
                                                      ? std::vector<std::string>{"libmpi.so.40"}
                                                      : std::vector<std::string>{"libmpi.so.12", "libmpich.so.12"});
      for (const auto& n : names)
        if (auto f = find(n)) {
          lib = *f;
          break;
        }
      if (lib.empty())
        throw Error("--mpi=" + flavor + ": no host " + (flavor == "openmpi" ? "Open MPI" : "MPICH-ABI MPI") +
                        " library (" + util::join(names, ", ") + ") in `" + cache_file_ + "`",
                    "install it, or name it in the site configuration (" + flavor + ".library)");
    }
    if (!needs.empty() && needs != flavor)
      throw Error("`" + program + "` links " + needed_lib + " (" + mpi_name(needs) + "), but --mpi" +
                      (which == "auto" ? "" : "=" + which) + " injects " + mpi_name(flavor) + " `" + lib + "`",
                  "use --mpi=" + needs + ", or plain --mpi, which follows the program");
    check_image_mpi(mpis, flavor, lib);
    primary(lib);
    mpi_stack_ = true;
    add_library(lib, "MPI", true);
    // Plugins and data files, bound at the host path: MPI finds them by
    // paths compiled into it.
    std::string libdir = dir_name(lib);
    std::vector<std::string> defaults =
        flavor == "openmpi" ? std::vector<std::string>{libdir + "/openmpi", libdir + "/pmix2",    libdir + "/pmix",
                                                       "/etc/openmpi",      "/usr/share/openmpi", "/usr/share/pmix"}
                            : std::vector<std::string>{"/etc/mpich", libdir + "/mpich", libdir + "/ucx"};
    add_plugin_dirs(conf_.get(flavor + ".paths", defaults));
    out.notes.push_back("host MPI: " + lib + " (" + flavor + " ABI)");
  }

  // An image with an MPI of its own must have one of the host MPI's ABI
  // (an image may carry both).
  void check_image_mpi(const ImageMpis& mpis, const std::string& host_abi, const std::string& host_lib) const {
    if (mpis.empty()) return;
    for (const auto& [abi, where] : mpis)
      if (abi == host_abi) return;
    const auto& [abi, where] = mpis.front();
    throw Error("image `" + image_.name() + "` has " + (abi == "openmpi" ? "Open MPI" : "an MPICH-ABI MPI") + " (" +
                    where + "), but the host MPI `" + host_lib + "` is " +
                    (host_abi == "openmpi" ? "Open MPI (libmpi.so.40)" : "MPICH ABI (libmpi.so.12)") +
                    ": programs built for one cannot use the other",
                "inject a host MPI of the image's ABI (--mpi=" + abi + "), or run without --mpi");
  }

  void gpu(bool required) {
    auto libs = conf_.get("gpu.libraries", kGpuLibraries);
    if (libs.empty() || !find(libs.front())) {
      if (required)
        throw Error("--gpu: no NVIDIA driver on this host (" + this_host() + "): `" +
                    (libs.empty() ? std::string("libcuda.so.1") : libs.front()) + "` is not in `" + cache_file_ + "`");
      out.notes.push_back("GPU: the image asks for one, but this host has no NVIDIA driver");
      return;
    }
    for (const auto& l : libs)
      if (auto f = find(l)) primary(*f);
    for (const auto& l : libs)
      if (auto f = find(l)) add_library(*f, "GPU", false);
    // The driver's version is in the name of the file libcuda.so.1 leads
    // to; its programs live beside its libraries (../bin of that file:
    // /usr/local/nvidia/bin on nodes whose driver has a prefix of its own),
    // else in the usual places.
    std::vector<std::string> dirs;
    if (auto cuda = find("libcuda.so.1"); cuda && host_exists(*cuda))
      if (char real[PATH_MAX]; ::realpath(cuda->c_str(), real)) {
        cuda_compat(libcuda_version(base_name(real)));
        dirs.push_back(dir_name(dir_name(real)) + "/bin");
      }
    for (const char* d : {"/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin"}) dirs.push_back(d);
    for (const auto& b : conf_.get("gpu.binaries", kGpuBinaries)) {
      std::vector<std::string> candidates;
      if (b.front() == '/')
        candidates.push_back(b);
      else
        for (const auto& d : dirs) candidates.push_back(d + "/" + b);
      if (auto program = driver_program(candidates, [this](const std::string& p) { consult(p); })) {
        out.files.push_back({program->first, std::string(kBinDir) + "/" + base_name(program->first)});
        if (!program->second.empty())
          out.notes.push_back("GPU: `" + program->second + "` is a script that runs `" + program->first +
                              "`: the program is injected, not the script");
      }
    }
    for (const auto& d : conf_.get("gpu.paths", {})) add_dir(d);
    // Device nodes come with the host's /dev; those of GPUs that
    // NVIDIA_VISIBLE_DEVICES leaves out are hidden (gpu_mask), and CUDA sees
    // what it selects unless CUDA_VISIBLE_DEVICES says otherwise.
    out.notes.push_back("GPU: NVIDIA driver libraries from `" + cache_file_ + "`");
    out.gpu = true;
    for (auto [key, value] : {std::pair{"gpu.procfs", &out.gpu_procfs}, std::pair{"gpu.dev", &out.gpu_dev}})
      if (auto v = conf_.get(key); !v.empty()) *value = v.front();
  }

  // CUDA forward compatibility, as NVIDIA's toolkit provides it: an image
  // may carry a newer driver's user-space libraries in /usr/local/cuda/compat
  // (cuda-compat packages) for hosts whose driver is older than its CUDA.
  // They come first on the library path when their driver branch (the
  // major version) is newer than the host's; never otherwise (an older
  // libcuda does not work with a newer kernel module).
  void cuda_compat(const std::string& host_version) {
    constexpr const char* kCompat = "/usr/local/cuda/compat";
    if (host_version.empty()) return;
    auto names = image_.list(kCompat);
    if (std::find(names.begin(), names.end(), "libcuda.so.1") == names.end()) return;
    std::string best;
    for (const auto& n : names)
      if (std::string v = libcuda_version(n);
          !v.empty() && (best.empty() || std::atoi(v.c_str()) > std::atoi(best.c_str())))
        best = v;
    if (best.empty()) return;
    if (std::atoi(best.c_str()) > std::atoi(host_version.c_str())) {
      if (std::find(out.lib_path.begin(), out.lib_path.end(), kCompat) != out.lib_path.end()) return;
      out.lib_path.insert(out.lib_path.begin(), kCompat);
      out.notes.push_back(std::string("GPU: CUDA forward compatibility: the image's ") + kCompat + " (driver " + best +
                          ") comes before the host's driver " + host_version);
    } else {
      out.notes.push_back(std::string("GPU: the image's ") + kCompat + " (driver " + best +
                          ") is not used: the host's driver " + host_version + " is as new");
    }
  }

  void ib(bool required) {
    auto libs = conf_.get("ib.libraries", kIbLibraries);
    auto verbs = libs.empty() ? std::nullopt : find(libs.front());
    if (!verbs) {
      if (required)
        throw Error("--ib: `" + (libs.empty() ? std::string("libibverbs.so.1") : libs.front()) + "` is not in `" +
                    cache_file_ + "`");
      return;
    }
    add_part(libs, "InfiniBand");
    std::string libdir = dir_name(*verbs);
    add_plugin_dirs(conf_.get("ib.paths", {"/etc/libibverbs.d", libdir + "/libibverbs", "/etc/rdma", libdir + "/ucx",
                                           libdir + "/libfabric", "/etc/libfabric"}));
    out.notes.push_back("InfiniBand: verbs from `" + *verbs + "`");
  }

  // The host's fabric provider under the image's own MPI (MPICH built
  // ch4:ofi, Open MPI's ofi components): libfabric with its providers, and
  // xpmem where the host has it; the image's MPI stays.
  void fabric() {
    auto libs = conf_.get("fabric.libraries", {"libfabric.so.1", "libxpmem.so.0"});
    auto lib = libs.empty() ? std::nullopt : find(libs.front());
    if (!lib)
      throw Error("--fabric: `" + (libs.empty() ? std::string("libfabric.so.1") : libs.front()) + "` is not in `" +
                      cache_file_ + "`",
                  "install the fabric library, or name it in the site configuration (fabric.libraries)");
    add_part(libs, "fabric");
    std::string libdir = dir_name(*lib);
    add_plugin_dirs(conf_.get("fabric.paths", {libdir + "/libfabric", "/etc/libfabric"}));
    auto info = elf_.get(*lib);
    std::string soname = info && !info->soname.empty() ? info->soname : base_name(*lib);
    out.notes.push_back("fabric: `" + *lib + "` in place of " +
                        (image_library(soname) ? "the image's" : "nothing: the image has no `" + soname + "`") +
                        "; the image's own MPI is kept");
  }

  // The libraries of a part (names, "name.so.*" or paths) that the host
  // has, each with what it needs.
  void add_part(const std::vector<std::string>& names, const std::string& why) {
    std::vector<std::string> paths;
    for (const auto& l : names)
      if (auto f = find(l)) paths.push_back(*f);
    for (const auto& p : paths) primary(p);
    for (const auto& p : paths) add_library(p, why, true);
  }

  void add_plugin_dirs(const std::vector<std::string>& dirs) {
    for (const auto& d : dirs)
      if (host_is_directory(d) && std::find(out.dirs.begin(), out.dirs.end(), d) == out.dirs.end()) {
        if (!beside_library(d)) out.dirs.push_back(d);
        add_plugin_dir(d);
      }
  }

  // The injected library `soname` (in kLibDir), or null.
  const Injection::File* injected(const std::string& soname) const {
    const std::string lib = std::string(kLibDir) + "/" + soname;
    auto it = std::find_if(out.files.begin(), out.files.end(), [&](const Injection::File& f) { return f.container == lib; });
    return it == out.files.end() ? nullptr : &*it;
  }

  // A plugin directory the image lacks costs a mount point made in its
  // parent (an overlay there) when bound at its own path. Three are found
  // another way by the library injected beside them: UCX's modules in
  // DIR/ucx, where DIR is the directory libucs.so.0 was loaded from (a link
  // ucx in kLibDir), libibverbs' providers, loaded by name through the
  // library path when its provider directory is absent (a link each in
  // kLibDir), and libibverbs' configuration (verbs_drivers_by_name). The
  // image's own directory, where it has one, is bound over instead: its
  // plugins would not match the host's library.
  bool beside_library(const std::string& dir) {
    const std::string name = base_name(dir), parent = dir_name(dir);
    if (name == "libibverbs.d") return verbs_drivers_by_name(dir);
    const char* library = name == "ucx" ? "libucs.so.0" : name == "libibverbs" ? "libibverbs.so.1" : nullptr;
    if (!library || !image_.list(dir).empty()) return false;
    const Injection::File* lib = injected(library);
    if (!lib || dir_name(lib->host) != parent) return false;
    if (name == "ucx") {
      out.files.push_back({dir, std::string(kLibDir) + "/ucx"});
    } else {
      DIR* d = ::opendir(dir.c_str());
      if (!d) return false;
      std::vector<std::string> providers;
      while (dirent* e = ::readdir(d))
        if (std::string n = e->d_name; n.starts_with("lib") && n.find("-rdmav") != std::string::npos && n.ends_with(".so"))
          providers.push_back(n);
      ::closedir(d);
      std::sort(providers.begin(), providers.end());
      for (const auto& p : providers) out.files.push_back({dir + "/" + p, std::string(kLibDir) + "/" + p});
    }
    out.notes.push_back("`" + dir + "`: the image has none; found beside the injected " + library + " in " + kLibDir);
    return true;
  }

  // libibverbs' configuration directory (/etc/libibverbs.d: a file per
  // provider, "driver NAME") where the image has none and the host's
  // libibverbs is injected: the names in RDMAV_DRIVERS instead, which
  // libibverbs loads as it loads those of its files (lib<NAME>-rdmav<ABI>.so,
  // from its provider directory, else through the library path, where the
  // providers are linked). A mount point in the image's /etc would take an
  // overlay of it (0.1-0.2 ms a start, and a mount to take down). The
  // directory's identity is the plan's input: packages replace such files,
  // which changes it. Bound as before where a file names something else
  // (a path: the host's, not the container's).
  bool verbs_drivers_by_name(const std::string& dir) {
    if (!image_.stamp(dir).empty() || !injected("libibverbs.so.1")) return false;
    std::vector<std::string> names;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return false;
    bool plain = true;
    while (dirent* e = ::readdir(d)) {
      const std::string file = e->d_name;
      if (!file.ends_with(".driver")) continue;
      const auto text = util::read_file_if_exists(dir + "/" + file, 4096);
      util::for_each_line(text.value_or(""), [&](std::string_view line) {
        std::istringstream in{std::string(line)};
        std::string word, name, more;
        if (!(in >> word) || word.starts_with('#')) return true;
        plain &= word == "driver" && in >> name && !(in >> more) && name.find_first_of("/:;") == std::string::npos;
        if (plain) names.push_back(name);
        return plain;
      });
    }
    ::closedir(d);
    if (!plain || names.empty()) return false;
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    out.env_list.push_back("RDMAV_DRIVERS=" + util::join(names, ':'));
    out.notes.push_back("`" + dir + "`: the image has none; its " + std::to_string(names.size()) +
                        " providers named in RDMAV_DRIVERS for the injected libibverbs.so.1");
    return true;
  }

  // The image's glibc must provide what the injected libraries ask for.
  void check_glibc() {
    if (glibc_needed_.empty()) return;
    std::string have, release, where;
    for (const char* p : {"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6",
                          "/usr/lib64/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib/libc.so.6"}) {
      // The image's libc is 2 MB (and compressed in a SquashFS image):
      // remember its version by the file's identity.
      std::string stamp = image_.stamp(p);
      if (stamp.empty()) continue;  // not in the image
      // Noted as "GLIBC_x.y RELEASE": what it defines, what it says it is.
      if (auto known = elf_.note("glibc2 " + stamp)) {
        have = known->substr(0, known->find(' '));
        release = known->find(' ') == std::string::npos ? "" : known->substr(known->find(' ') + 1);
        where = p;
        break;
      }
      auto data = image_.read(p, 64u << 20);
      if (!data) continue;
      if (auto info = parse_elf(*data, image_.name() + ":" + p)) {
        have = info->glibc_defined;
        release = glibc_release(*data);
        where = p;
        elf_.set_note("glibc2 " + stamp, have + " " + release);
        break;
      }
    }
    if (where.empty())
      throw Error("image `" + image_.name() + "` has no glibc (libc.so.6), and `" + glibc_needed_by_ + "` needs " +
                      glibc_needed_,
                  "host libraries can only be injected into glibc-based images");
    if (!have.starts_with("GLIBC_"))
      throw Error("image `" + image_.name() + "`: its libc.so.6 (" + where + ") defines no GLIBC_x.y version, and `" +
                      glibc_needed_by_ + "` needs " + glibc_needed_,
                  "host libraries can only be injected into glibc-based images");
    if (compare_glibc(have, glibc_needed_) >= 0) return;
    const std::string older = "image `" + image_.name() + "` has glibc " + (release.empty() ? have.substr(6) : release) +
                              " (" + where + "), but the host's `" + glibc_needed_by_ + "` needs " +
                              glibc_needed_.substr(6);
    if (!glibc_replace_)
      throw Error(older, "use an image with glibc " + glibc_needed_.substr(6) +
                             " or later, or let rt put the host's glibc in its place (without --no-glibc-replace)");
    replace_glibc(where, older);
  }

  // The host's glibc in place of the image's, for this container only, as
  // Sarus's glibc hook does: every part of it present in the image's
  // library directory (loader, libc, libm, libpthread, ... and its NSS
  // modules and gconv converters, which use its private interfaces) is
  // bound over the image's from the directory of the host's libc.so.6, so
  // that one glibc of one version serves the whole process. Programs built
  // for an older glibc run on a newer one.
  void replace_glibc(const std::string& image_libc, const std::string& older) {
    auto host_libc = find("libc.so.6");
    auto info = host_libc ? elf_.get(*host_libc) : std::nullopt;
    if (!info || compare_glibc(info->glibc_defined, glibc_needed_) < 0)
      throw Error(older + ", and the host's glibc (" + (host_libc ? *host_libc : "none in `" + cache_file_ + "`") +
                      ") is no newer",
                  "use an image with glibc " + glibc_needed_.substr(6) + " or later");
    const std::string host_dir = dir_name(*host_libc), image_dir = dir_name(image_libc);
    static const std::set<std::string> kGlibcModules = {"libnss_files.so.2",  "libnss_dns.so.2", "libnss_compat.so.2",
                                                        "libnss_hesiod.so.2", "libnss_db.so.2",  "libc_malloc_debug.so.0"};
    size_t n = 0;
    for (const auto& name : image_.list(image_dir))
      if ((kGlibc.count(name) || kGlibcModules.count(name)) && host_exists(host_dir + "/" + name)) {
        out.over.push_back({host_dir + "/" + name, image_dir + "/" + name});
        ++n;
      }
    for (const auto& gconv : {image_dir + "/gconv", "/usr" + image_dir + "/gconv"})
      if (!image_.stamp(gconv).empty() && host_is_directory(host_dir + "/gconv")) {
        out.over.push_back({host_dir + "/gconv", gconv});
        break;
      }
    out.notes.push_back("glibc: " + older + ": the host's glibc " + info->glibc_defined.substr(6) + " (`" +
                        *host_libc + "`) takes its place in this container (" + std::to_string(n) +
                        " libraries; --no-glibc-replace refuses instead)");
  }

  void finish() {
    for (const auto& [soname, why] : from_image_)
      if (!seen_.count(soname)) out.notes.push_back(why);
    bool bins = false, libs = false;
    for (const auto& f : out.files) {
      if (f.container.starts_with(kBinDir)) bins = true;
      if (f.container.starts_with(kLibDir)) libs = true;
    }
    if (libs) out.lib_path.push_back(kLibDir);
    if (bins) out.bin_path.push_back(kBinDir);
  }

private:
  const SiteConfig& conf_;
  const ImageView& image_;
  ElfCache& elf_;
  const bool glibc_replace_;
  PlanInputs* inputs_;  // where the inputs are recorded; null when they are not
  std::string cache_file_;
  std::string cache_stamp_;                                   // the linker cache's identity ("" if absent)
  std::optional<std::map<std::string, std::string>> cache_;  // the linker cache, once read
  std::set<std::string> seen_;       // sonames injected from the host
  std::set<std::string> primaries_;  // sonames a part injects whatever the image has
  bool mpi_stack_ = false;           // the host MPI is injected: its own libraries come with it
  std::map<std::string, std::string> from_image_;  // dependencies the image provides, and why
  std::string image_key_;                          // the identity of the image's library directories
  std::optional<std::map<std::string, std::string>> image_cache_;  // its ld.so.cache, once read
  std::string glibc_needed_, glibc_needed_by_;
};

}  // namespace

std::string mpi_abi(const std::string& soname) {
  if (soname.starts_with("libmpi.so.40")) return "openmpi";
  if (soname.starts_with("libmpi.so.12") || soname.starts_with("libmpich.so.12")) return "mpich";
  return "";
}

std::vector<HostGpu> host_gpus(const std::string& gpus_dir) {
  std::vector<HostGpu> gpus;
  if (DIR* d = ::opendir(gpus_dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') gpus.push_back({e->d_name, "", -1});
    ::closedir(d);
  }
  std::sort(gpus.begin(), gpus.end(), [](const HostGpu& a, const HostGpu& b) { return a.bus < b.bus; });
  // "GPU UUID: \t GPU-..." and "Device Minor: \t N", among other lines.
  auto value = [](const std::string& line, const char* key) -> std::optional<std::string> {
    if (!line.starts_with(key)) return std::nullopt;
    size_t at = line.find_first_not_of(" \t", std::strlen(key));
    return at == std::string::npos ? std::string() : line.substr(at);
  };
  for (auto& g : gpus) {
    auto text = util::read_file_if_exists(gpus_dir + "/" + g.bus + "/information", 1 << 16);
    if (!text) continue;
    for (const auto& line : util::split(*text, '\n')) {
      if (auto v = value(line, "GPU UUID:")) g.uuid = *v;
      if (auto v = value(line, "Device Minor:");
          v && !v->empty() && v->size() <= 4 && std::all_of(v->begin(), v->end(), ::isdigit))
        g.minor = std::stoi(*v);
    }
  }
  return gpus;
}

bool selects_all_gpus(const std::string& sel) { return sel.empty() || sel == "all" || sel == "void"; }

namespace {

bool is_index(const std::string& item) {
  return !item.empty() && item.size() <= 6 && std::all_of(item.begin(), item.end(), ::isdigit);
}

}  // namespace

std::optional<std::string> cuda_visible_devices(const std::string& nvidia_visible, const std::vector<HostGpu>& gpus) {
  if (selects_all_gpus(nvidia_visible) || nvidia_visible == "none") return std::nullopt;
  std::vector<std::string> out;
  for (const auto& item : util::split(nvidia_visible, ',')) {
    if (item.empty()) continue;
    std::string v = item;
    if (is_index(item)) {
      size_t i = std::stoul(item);
      if (i < gpus.size() && !gpus[i].uuid.empty()) v = gpus[i].uuid;
    }
    out.push_back(v);
  }
  return util::join(out, ',');
}

GpuMask gpu_mask(const std::string& nvidia_visible, const std::vector<HostGpu>& gpus, const std::string& dev_dir) {
  GpuMask mask;
  if (selects_all_gpus(nvidia_visible)) return mask;
  std::vector<bool> selected(gpus.size(), false);
  if (nvidia_visible != "none")
    for (const auto& item : util::split(nvidia_visible, ',')) {
      if (item.starts_with("MIG-")) return mask;
      for (size_t i = 0; i < gpus.size(); ++i)
        if ((is_index(item) && std::stoul(item) == i) || (!gpus[i].uuid.empty() && item == gpus[i].uuid))
          selected[i] = true;
    }
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (selected[i]) continue;
    mask.buses.push_back(gpus[i].bus);
    std::string node = "nvidia" + std::to_string(gpus[i].minor);
    if (gpus[i].minor >= 0 && util::path_exists(dev_dir + "/" + node)) mask.nodes.push_back(node);
  }
  return mask;
}

namespace {

// The image as the planner sees it, each path it looks at recorded with
// its identity before it is used (nothing for an image with an identity
// of its own, which the plan's key holds).
class RecordingView final : public ImageView {
public:
  RecordingView(const ImageView& image, PlanInputs& inputs)
      : image_(image), inputs_(image.identity().empty() ? &inputs : nullptr) {}
  const std::string& name() const override { return image_.name(); }
  std::optional<std::string> read(const std::string& path, size_t limit) const override {
    stamp(path);
    return image_.read(path, limit);
  }
  std::vector<std::string> list(const std::string& dir) const override {
    stamp(dir);
    return image_.list(dir);
  }
  std::string stamp(const std::string& path) const override {
    std::string s = image_.stamp(path);
    if (inputs_) inputs_->image.emplace(path, s.empty() ? "-" : s);
    return s;
  }
  std::string probe(const std::string& path) const override { return image_.stamp(path); }
  std::string identity() const override { return image_.identity(); }

private:
  const ImageView& image_;
  PlanInputs* inputs_;
};

Injection plan_once(const InjectRequest& req, const SiteConfig& conf, const ImageView& image, ElfCache* elf,
                    PlanInputs* inputs) {
  ElfCache memory(-1, "");
  // The image's glibc is replaced only for what was asked for: never
  // because of a part that came in by itself.
  bool automatic = (req.gpu && !req.gpu_required) || (req.ib && !req.ib_required);
  bool replace = req.glibc_replace && !automatic && conf.get("glibc.replace") != std::vector<std::string>{"no"};
  ElfCache& facts = elf ? *elf : memory;
  if (inputs) facts.record(&inputs->host);
  Planner p(conf, image, facts, replace, inputs);
  if (!req.mpi.empty()) p.mpi(req.mpi, req.program);
  if (req.gpu) p.gpu(req.gpu_required);
  if (req.ib) p.ib(req.ib_required);
  if (req.fabric) p.fabric();
  if (!req.devices.empty()) apply_cdi(req.devices, conf.get("cdi.dirs", {"/etc/cdi", "/var/run/cdi"}), p.out);
  if (!p.out.cuda_compat_host.empty()) p.cuda_compat(p.out.cuda_compat_host);
  p.check_glibc();
  p.finish();
  return std::move(p.out);
}

// Names in `dir` that start with `prefix`, in order; none where it cannot
// be read.
std::vector<std::string> names_with(const std::string& dir, const std::string& prefix) {
  util::UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return {};
  std::vector<std::string> out;
  try {
    for (auto& n : util::list_names(fd.get(), dir))
      if (n.front() != '.' && n.starts_with(prefix)) out.push_back(std::move(n));
  } catch (const Error&) {
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> verbs_devices(const SiteConfig& conf) {
  std::vector<std::string> found;
  for (const auto& pattern : conf.get("ib.devices", {"/dev/infiniband/uverbs*", "/sys/class/infiniband/*"})) {
    // DIR/PREFIX*: names beginning with PREFIX; DIR/NAME: that name.
    std::string dir = dir_name(pattern), name = base_name(pattern);
    if (name.ends_with("*"))
      for (const auto& n : names_with(dir, name.substr(0, name.size() - 1))) found.push_back(dir + "/" + n);
    else if (util::path_exists(pattern))
      found.push_back(pattern);
  }
  return found;
}

std::string nvidia_control_device(const SiteConfig& conf) {
  auto dev = conf.get("gpu.dev", {"/dev"});
  return (dev.empty() ? std::string("/dev") : dev.front()) + "/nvidiactl";
}

Injection plan_injection(const InjectRequest& req, const SiteConfig& conf, const ImageView& given, ElfCache* elf,
                         PlanInputs* inputs) {
  PlanInputs unused;
  const RecordingView recording(given, inputs ? *inputs : unused);
  const ImageView& image = inputs ? static_cast<const ImageView&>(recording) : given;
  try {
    return plan_once(req, conf, image, elf, inputs);
  } catch (const Error& e) {
    // A part nobody asked for (the driver an image's NVIDIA_VISIBLE_DEVICES
    // wants, the verbs of a host with a verbs device) that cannot go in is
    // left out with a warning; what was asked for then stands or fails on
    // its own (a host's verbs built for a newer glibc must not stop --gpu).
    InjectRequest asked = req;
    asked.gpu = req.gpu_required;
    asked.ib = req.ib_required;
    std::vector<std::string> left, quiet;
    if (req.gpu && !asked.gpu) left.push_back("NVIDIA driver"), quiet.push_back("--no-gpu");
    if (req.ib && !asked.ib) left.push_back("InfiniBand stack"), quiet.push_back("--no-ib");
    if (left.empty()) throw;
    Injection inj = asked.any() ? plan_once(asked, conf, image, elf, inputs) : Injection{};
    inj.warnings.push_back("not injecting the host's " + util::join(left, " or ") + " (not asked for; " +
                           util::join(quiet, " or ") + " leaves it out quietly): " + e.what());
    return inj;
  }
}

}  // namespace rt::hpc
