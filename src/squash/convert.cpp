// rt convert: an image (store name, bundle or root-filesystem directory)
// into one SquashFS file, with its configuration inside (host).
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "rt/error.hpp"
#include "rt/image.hpp"
#include "run/image.hpp"
#include "squash/from_layers.hpp"
#include "squash/sqfs.hpp"
#include "store/lookup.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

extern char** environ;

namespace rt {
namespace {

int run_program(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t pid;
  int r = ::posix_spawnp(&pid, a[0], nullptr, nullptr, a.data(), environ);
  if (r != 0) throw SysError(r, "spawn", argv[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) throw SysError("waitpid", argv[0]);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

} // namespace

void convert(const std::string& src, const std::string& dst_arg, const ConvertOptions& o) {
  util::log_init(o.verbosity);
  std::string cwd = util::normalize_path(".", std::getenv("PWD") ? std::getenv("PWD") : "/");
  char buf[4096];
  if (::getcwd(buf, sizeof buf)) cwd = buf;
  run::Image img = run::open_image(src, cwd, o.storage);
  if (img.squashfs) throw Error("`" + src + "` is already a SquashFS image");
  const std::string dst = util::normalize_path(dst_arg, cwd);
  if (util::path_exists(dst) && !o.force)
    throw Error("`" + dst + "` exists", "remove it first, or give --force to replace it");

  squash::check_compression(o.compression);

  // Work next to the destination; rename into place only when complete, so
  // an interrupted convert never leaves a half-written image under DST.
  const std::string tmp = dst + ".rt-tmp";
  const std::string pseudo = dst + ".rt-pseudo";
  const std::string config = dst + ".rt-config";
  struct Cleanup {
    std::vector<std::string> files;
    ~Cleanup() {
      for (const auto& f : files) ::unlink(f.c_str());
    }
  } cleanup{{tmp, pseudo, config}};
  for (const auto& f : cleanup.files) ::unlink(f.c_str());

  std::vector<std::string> argv = {"mksquashfs", img.rootfs, tmp, "-noappend", "-no-progress", "-quiet",
                                   "-all-root", "-no-xattrs", "-comp", o.compression};
  if (o.compression == "zstd" || o.compression == "gzip" || o.compression == "xz") {
    int level = o.level ? o.level : (o.compression == "zstd" ? 3 : o.compression == "gzip" ? 6 : 0);
    if (level && o.compression != "xz") argv.insert(argv.end(), {"-Xcompression-level", std::to_string(level)});
  }
  // Reproducible: same input, same bytes (no build time, fixed order).
  argv.insert(argv.end(), {"-reproducible", "-mkfs-time", "0"});
  int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  argv.insert(argv.end(), {"-processors", std::to_string(jobs)});
  if (img.config) {
    auto text = util::read_file_if_exists(img.rootfs + "/../" + run::kBundleConfig);
    if (text) {
      util::UniqueFd c = util::open_fd(config, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      util::write_all(c.get(), *text, config);
      util::UniqueFd p = util::open_fd(pseudo, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      util::write_all(p.get(),
                      "/.rt D 0 755 0 0\n" + std::string(squash::kConfigPath) + " F 0 644 0 0 cat " + config + "\n",
                      pseudo);
      argv.insert(argv.end(), {"-pf", pseudo});
    }
  }
  util::info("running:" + [&] {
    std::string s;
    for (const auto& a : argv) s += " " + a;
    return s;
  }());
  int rc = run_program(argv);
  if (rc != 0) throw Error("mksquashfs failed (status " + std::to_string(rc) + ") making `" + dst + "` from `" + src + "`");
  if (::rename(tmp.c_str(), dst.c_str()) != 0) throw SysError("rename", tmp, dst);
  struct stat st;
  ::stat(dst.c_str(), &st);
  util::note("wrote `" + dst + "` (" + std::to_string(st.st_size / 1000000) + " MB, " + o.compression + ")");
}

} // namespace rt
