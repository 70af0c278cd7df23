// rt convert: an image (store name, bundle or root-filesystem directory)
// into one SquashFS file, with its configuration inside (host).
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>
#include <utility>

#include <csignal>
#include <memory>

#include "app/assemble.hpp"
#include "app/export.hpp"
#include "app/import.hpp"
#include "app/store.hpp"
#include "image/child.hpp"
#include "image/file_attrs.hpp"
#include "image/from_layers.hpp"
#include "image/layer_stream.hpp"
#include "image/sha256.hpp"
#include "image/sif_definition.hpp"
#include "image/tar_filter.hpp"
#include "rt/error.hpp"
#include "rt/image.hpp"
#include "run/image.hpp"
#include "squash/sif.hpp"
#include "squash/sqfs.hpp"
#include "squash/verify.hpp"
#include "store/layout.hpp"
#include "store/lookup.hpp"
#include "store/ref.hpp"
#include "store/root.hpp"
#include "util/fs.hpp"
#include "util/json.hpp"
#include "util/log.hpp"
#include "util/progress.hpp"
#include "util/strings.hpp"

namespace rt {
namespace {

enum class Target { Sqfs, Sif, Dir, Rootfs, Store, DockerArchive, Oci, OciArchive };

// DST without the oci: or oci-archive: in front.
std::string without_scheme(const std::string& dst) {
  for (const char* p : {"oci:", "oci-archive:"})
    if (dst.starts_with(p)) return dst.substr(std::strlen(p));
  return dst;
}

Target target_of(const std::string& to, const std::string& dst) {
  if (to == "sqfs") return Target::Sqfs;
  if (to == "sif") return Target::Sif;
  if (to == "dir") return Target::Dir;
  if (to == "rootfs") return Target::Rootfs;
  if (to == "store") return Target::Store;
  if (to == "docker-archive") return Target::DockerArchive;
  if (to == "oci") return Target::Oci;
  if (to == "oci-archive") return Target::OciArchive;
  if (!to.empty())
    throw Error("--to: unknown target `" + to + "`",
                "use --to sqfs, sif, docker-archive, oci, oci-archive, dir, rootfs or store");
  if (dst.starts_with("oci:")) return Target::Oci;
  if (dst.starts_with("oci-archive:")) return Target::OciArchive;
  for (const char* ext : {".sqfs", ".squashfs", ".sqsh"})
    if (dst.ends_with(ext)) return Target::Sqfs;
  if (dst.ends_with(".sif")) return Target::Sif;
  if (dst.ends_with(".tar")) return Target::DockerArchive;
  // A file name is never a store name (tar.gz and the like: not written).
  for (const char* ext : {".tar.gz", ".tgz", ".tar.zst", ".oci", ".img", ".simg"})
    if (dst.ends_with(ext))
      throw Error("`" + dst + "`: rt convert does not write this form",
                  "give DST as *.sqfs, *.sif, *.tar (a Docker archive), oci:DIR, oci-archive:FILE, a directory path "
                  "or a store name");
  if (dst.find('/') != std::string::npos || dst == "." || dst == "..") return Target::Dir;
  return Target::Store;
}

// One tar file of an archive form (Docker archive, OCI archive): entries
// of text or of a file's bytes, written to `tmp`, then renamed to `dst`
// once whole and on disk.
class ArchiveFile {
public:
  ArchiveFile(std::string tmp, std::string dst)
      : tmp_(std::move(tmp)),
        dst_(std::move(dst)),
        out_(util::open_fd(tmp_, O_WRONLY | O_CREAT | O_EXCL, 0644)),
        a_(archive_write_new(), archive_write_free) {
    archive_write_set_format_pax_restricted(a_.get());
    if (archive_write_open_fd(a_.get(), out_.get()) != ARCHIVE_OK) throw failed();
  }
  void dir(const std::string& name) { header(name, true, 0); }
  void text(const std::string& name, const std::string& data) {
    header(name, false, static_cast<int64_t>(data.size()));
    if (archive_write_data(a_.get(), data.data(), data.size()) != static_cast<la_ssize_t>(data.size())) throw failed();
  }
  void file(const std::string& name, const std::string& path) {
    util::UniqueFd in = util::open_fd(path, O_RDONLY);
    struct stat st;
    if (::fstat(in.get(), &st) != 0) throw SysError{errno, "stat", path};
    header(name, false, st.st_size);
    std::vector<char> buf(1 << 20);
    for (size_t n; (n = util::read_some(in.get(), buf.data(), buf.size(), path)) > 0;)
      if (archive_write_data(a_.get(), buf.data(), n) != static_cast<la_ssize_t>(n)) throw failed();
  }
  void commit() {
    if (archive_write_close(a_.get()) != ARCHIVE_OK) throw failed();
    if (::fsync(out_.get()) != 0) throw SysError{errno, "fsync", tmp_};
    if (::rename(tmp_.c_str(), dst_.c_str()) != 0) throw SysError{errno, "rename", tmp_, dst_};
  }

private:
  Error failed() const { return Error("cannot write `" + dst_ + "`: " + std::string(archive_error_string(a_.get()))); }
  void header(const std::string& name, bool dir, int64_t size) {
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_filetype(e.get(), dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e.get(), dir ? 0755 : 0644);
    archive_entry_set_size(e.get(), size);
    if (archive_write_header(a_.get(), e.get()) != ARCHIVE_OK) throw failed();
  }
  std::string tmp_, dst_;
  util::UniqueFd out_;
  std::unique_ptr<struct archive, int (*)(struct archive*)> a_;
};

// A Docker archive (what `docker load` and `podman load` read): each
// layer uncompressed as DIFF_ID.tar, the config as DIGEST.json with its
// diff_ids those layers', manifest.json naming them and `tag`; written
// beside `dst` and renamed into place when complete.
void write_docker_archive(const image::ImageSource& src, const std::string& dst, const std::string& tag,
                          const ConvertOptions& o) {
  util::TempDirBeside work(dst);
  std::vector<std::pair<std::string, std::string>> layers;  // diff_id, file
  std::vector<char> buf(1 << 20);
  {
    util::Meter meter("writing `" + dst + "`", app::layer_bytes(src), util::Meter::mode_for(o.verbosity));
    const image::ImageSource in = app::metered(src, meter);
    for (size_t i = 0; i < in.layers.size(); ++i) {
      const std::string file = work.path(("layer" + std::to_string(i)).c_str());
      util::UniqueFd out = util::open_fd(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
      auto stream = std::make_shared<image::LayerStream>(in.layers[i].open(), in.layers[i].name);
      image::ReadFn tar = [stream](void* b, size_t size) { return stream->read(b, size); };
      if (!src.drop.empty()) tar = image::without_names(std::move(tar), src.drop);  // rt's /.rt of a SquashFS image
      image::Sha256 h;
      for (size_t n; (n = tar(buf.data(), buf.size())) > 0;) {
        h.update(buf.data(), n);
        util::write_all(out.get(), std::string_view(buf.data(), n), file);
      }
      layers.emplace_back(h.digest(), file);
    }
    meter.done();
  }
  std::vector<std::string> diff_ids;
  for (const auto& l : layers) diff_ids.push_back(l.first);
  const std::string config_text = app::export_config(src.config_text, diff_ids);
  const std::string config_name = image::sha256_digest(config_text).substr(7) + ".json";
  nlohmann::json entry_json = {{"Config", config_name}, {"Layers", nlohmann::json::array()}};
  entry_json["RepoTags"] = tag.empty() ? nlohmann::json::array() : nlohmann::json::array({tag});
  for (const auto& l : layers) entry_json["Layers"].push_back(l.first.substr(7) + ".tar");
  const nlohmann::json manifest = nlohmann::json::array({entry_json});

  ArchiveFile archive(work.path("image.tar"), dst);
  archive.text(config_name, config_text);
  for (const auto& [diff_id, file] : layers) archive.file(diff_id.substr(7) + ".tar", file);
  archive.text("manifest.json", manifest.dump());
  archive.commit();
  util::note("wrote the Docker archive `" + dst + "` (" + std::to_string(layers.size()) + " layer" +
             (layers.size() == 1 ? "" : "s") + ")");
}

// The standard output of a program as a layer stream; at its end the
// program must have exited 0 (a truncated or corrupt input shows there).
image::ReadFn program_reader(const std::vector<std::string>& argv, const std::string& what) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw SysError{errno, "pipe"};
  util::UniqueFd r(p[0]), w(p[1]);
  auto child = std::make_shared<image::Child>(argv, image::Child::Fds{.out = w.get()});
  auto out = std::make_shared<util::UniqueFd>(std::move(r));
  return [child, out, what, prog = argv[0]](void* buf, size_t size) -> size_t {
    size_t n = util::read_some(out->get(), buf, size, what);
    if (n == 0 && child->running()) {
      int status = child->wait();
      if (status != 0)
        throw Error("cannot read `" + what + "`: " + prog + " failed (status " + std::to_string(status) +
                    "): corrupt or truncated?");
    }
    return n;
  };
}

// A tree (directory image, or the inside of a SquashFS file) as an image
// source of one layer, read through `argv`'s tar output.
image::ImageSource tree_source(const std::string& name, const std::string& what, std::vector<std::string> argv,
                               std::optional<std::string> config, image::AttrMap attrs = {}) {
  image::ImageSource src;
  src.name = name;
  src.ref = "convert:" + what;
  src.config_text = config ? *config : app::default_config();
  src.config_digest = image::sha256_digest(src.config_text);
  src.layers.push_back({what, "", -1, "", [argv, what, attrs] {
                          image::ReadFn tar = program_reader(argv, what);
                          return attrs.empty() ? tar : image::filtered(std::move(tar), {}, attrs);
                        }});
  return src;
}

// A directory image (rootfs/ beside its config, or a bare tree) as one
// layer of its tree, with the set-id bits and xattrs its bundle keeps.
image::ImageSource dir_tree_source(const run::Image& img, const std::string& name) {
  std::optional<std::string> config;
  if (img.config) config = util::read_regular_if_exists(img.rootfs + "/../" + run::kBundleConfig);
  return tree_source(name, img.rootfs, {"tar", "-C", img.rootfs, "--numeric-owner", "-cf", "-", "."}, config,
                     image::read_attrs(img.rootfs + "/.."));
}

// What a layer made from the tree of `file` (a SquashFS file, a bundle's
// rt-image.json) was made from: its path, inode, size and times, and how
// rt makes such a layer (its version here). Empty when it cannot be read.
std::string tree_stamp(const std::string& file) {
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) return "";
  return "tree layer 2\n" + util::normalize_path(file, util::current_dir()) + "\n" + util::file_stamp(st) + ":" +
         std::to_string(static_cast<long long>(st.st_ctim.tv_sec) * 1000000000LL + st.st_ctim.tv_nsec);
}

// Unpacks `src` into the bundle directory `dst`, built beside it and
// renamed into place when complete.
// A bundle (rootfs/ and image-config.json) at `dst`; with `rootfs_only`
// the root filesystem itself, as Apptainer's sandboxes are (the config is
// left out).
void write_bundle_dir(const image::ImageSource& src, const std::string& dst, const ConvertOptions& o,
                      bool rootfs_only = false) {
  util::TempDirBeside work(dst);
  const std::string tmp = work.path("bundle");
  if (::mkdir(tmp.c_str(), 0755) != 0) throw SysError{errno, "mkdir", tmp};
  util::Meter meter("unpacking into `" + dst + "`", app::layer_bytes(src), util::Meter::mode_for(o.verbosity));
  app::assemble_bundle(tmp, app::metered(src, meter), {kDefaultMaxBytes, o.verbosity < 0});
  meter.done();
  if (util::path_exists(dst)) util::remove_tree(dst);  // --force was checked
  const std::string from = rootfs_only ? tmp + "/" + run::kBundleRootfs : tmp;
  if (::rename(from.c_str(), dst.c_str()) != 0) throw SysError{errno, "rename", from, dst};
  util::note(rootfs_only ? "wrote the root filesystem `" + dst + "`"
                         : "wrote the bundle `" + dst + "` (rootfs/ and image-config.json)");
}

// The import side of `o`: store, format and compression.
ImportOptions import_options(const ConvertOptions& o) {
  ImportOptions io;
  static_cast<StoreOptions&>(io) = o;
  io.format = o.format;
  io.compression = o.compression;
  io.level = o.level;
  return io;
}

// Into the store as a tree or as one SquashFS file (--format,
// RT_STORE_FORMAT), as import would keep it.
void store_source(image::ImageSource src, const std::string& name, const ConvertOptions& o) {
  src.name = name;
  app::Store store(o.storage);
  auto lock = store.lock_name(name);
  if (store.info(name) && !o.force)
    throw Error("image `" + name + "` is already in the store", "give --force to replace it");
  app::deliver(store, src, import_options(o));
  util::note("stored `" + name + "` in " + store.root());
}

// The bytes of `from` that `span` covers (all of it by default) into the
// new file `to`, after `prefix`.
void copy_span(const std::string& from, const squash::Span& span, const std::string& to,
               const std::string& prefix = {}) {
  util::UniqueFd in = util::open_fd(from, O_RDONLY);
  struct stat st;
  if (::fstat(in.get(), &st) != 0) throw SysError{errno, "stat", from};
  util::UniqueFd out = util::open_fd(to, O_WRONLY | O_CREAT | O_EXCL, 0644);
  util::write_all(out.get(), prefix, to);  // then the copy, from the file's offset
  auto at = static_cast<loff_t>(span.offset);
  uint64_t left = span.size ? span.size : static_cast<uint64_t>(st.st_size) - span.offset;
  while (left > 0) {
    ssize_t n = ::copy_file_range(in.get(), &at, out.get(), nullptr, std::min<uint64_t>(left, 1 << 30), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SysError{errno, "copy_file_range", from, to};
    if (n == 0) throw Error("cannot copy `" + from + "`: it ended early (changed meanwhile?)");
    left -= static_cast<uint64_t>(n);
  }
}

// An OCI image layout (a directory, or a tar of one): the layers as gzip
// blobs (compressed once, kept in the store), the config, the manifest, and
// index.json naming it by `tag`'s tag; built beside `dst`, renamed into
// place when complete.
void write_oci(const image::ImageSource& src, const std::string& dst, const std::string& tag, bool archive,
               const ConvertOptions& o) {
  app::Store store(o.storage);
  util::TempDirBeside work(dst);
  std::vector<app::OutLayer> layers;
  {
    util::Meter meter("writing `" + dst + "`", app::layer_bytes(src), util::Meter::mode_for(o.verbosity));
    layers =
        app::compressed_layers(store, src, image::Compression::Gzip, static_cast<unsigned>(std::max(0, o.jobs)), meter);
    meter.done();
  }
  std::vector<std::string> diff_ids;
  for (const auto& l : layers) diff_ids.push_back(l.diff_id);
  const std::string config = app::export_config(src.config_text, diff_ids);
  const std::string manifest = app::oci_manifest(config, layers);
  nlohmann::json desc = {
      {"mediaType", image::media::kOciManifest}, {"digest", image::sha256_digest(manifest)}, {"size", manifest.size()}};
  if (const size_t colon = tag.rfind(':'); !tag.empty() && colon != std::string::npos)
    desc["annotations"] = {{"org.opencontainers.image.ref.name", tag.substr(colon + 1)}};
  const nlohmann::json index = {{"schemaVersion", 2}, {"mediaType", image::media::kOciIndex}, {"manifests", {desc}}};
  // What the layout holds: name, and a file or the text itself.
  struct Item {
    std::string name, file, text;
  };
  std::vector<Item> items = {{"oci-layout", "", R"({"imageLayoutVersion":"1.0.0"})"},
                             {"index.json", "", index.dump()},
                             {"blobs/sha256/" + image::sha256_digest(config).substr(7), "", config},
                             {"blobs/sha256/" + image::sha256_digest(manifest).substr(7), "", manifest}};
  std::set<std::string> seen;
  for (const auto& l : layers)
    if (seen.insert(l.blob.digest).second) items.push_back({"blobs/sha256/" + l.blob.digest.substr(7), l.file, ""});
  if (!archive) {
    const std::string tmp = work.path("layout");
    for (const char* d : {"", "/blobs", "/blobs/sha256"})
      if (::mkdir((tmp + d).c_str(), 0755) != 0) throw SysError{errno, "mkdir", tmp + d};
    for (const auto& i : items) {
      const std::string to = tmp + "/" + i.name;
      if (!i.file.empty()) {
        copy_span(i.file, {}, to);
      } else {
        util::UniqueFd out = util::open_fd(to, O_WRONLY | O_CREAT | O_EXCL, 0644);
        util::write_all(out.get(), i.text, to);
      }
    }
    if (util::path_exists(dst)) util::remove_tree(dst);  // --force was checked
    if (::rename(tmp.c_str(), dst.c_str()) != 0) throw SysError{errno, "rename", tmp, dst};
  } else {
    ArchiveFile tar(work.path("image.tar"), dst);
    tar.dir("blobs/");
    tar.dir("blobs/sha256/");
    for (const auto& i : items) {
      if (i.file.empty())
        tar.text(i.name, i.text);
      else
        tar.file(i.name, i.file);
    }
    tar.commit();
  }
  util::note("wrote the OCI " + std::string(archive ? "archive" : "layout") + " `" + dst + "` (" +
             std::to_string(layers.size()) + " layer" + (layers.size() == 1 ? "" : "s") + ", gzip)");
}

// Apptainer's files for an image rt made (/.singularity.d: the config's
// environment as a script, the runscript, the labels and the definition;
// empty actions/ and libs/ for Apptainer to mount on), appended to the
// SquashFS image `sqfs` (a private copy) with mksquashfs.
void append_apptainer_files(const std::string& sqfs, const image::SifMetadata& m, const std::string& scratch) {
  const std::string d = scratch + "/.singularity.d";
  for (const std::string& dir : {d, d + "/env", d + "/actions", d + "/libs"})
    if (::mkdir(dir.c_str(), 0755) != 0) throw SysError{errno, "mkdir", dir};
  auto put = [](const std::string& path, const std::string& text, mode_t mode) {
    util::UniqueFd fd = util::open_fd(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    util::write_all(fd.get(), text, path);
    if (::fchmod(fd.get(), mode) != 0) throw SysError{errno, "chmod", path};
  };
  put(d + "/env/" + run::kRtEnvScript, m.environment, 0644);
  put(d + "/runscript", m.runscript, 0755);
  put(d + "/labels.json", m.labels, 0644);
  put(d + "/Singularity", m.definition, 0644);
  const std::vector<std::string> argv = {"mksquashfs",   d,        sqfs,          "-keep-as-directory", "-all-root",
                                         "-no-recovery", "-quiet", "-no-progress"};
  util::UniqueFd null = util::open_fd("/dev/null", O_WRONLY);  // it tells of appending even with -quiet
  image::Child c(argv, {.out = null.get()});
  if (const int rc = c.wait(); rc != 0)
    throw Error("mksquashfs could not add Apptainer's files to `" + sqfs + "` (exit status " + std::to_string(rc) +
                ")");
}

// The SquashFS image `sqfs` as the primary partition of the new SIF file
// `to`, after the data objects `objects`.
void write_sif(const std::string& sqfs, const std::string& to, const std::vector<squash::SifInput>& objects) {
  struct stat st;
  if (::stat(sqfs.c_str(), &st) != 0) throw SysError{errno, "stat", sqfs};
  std::string id(16, '\0');
  if (::getrandom(id.data(), id.size(), 0) != static_cast<ssize_t>(id.size())) throw SysError{errno, "getrandom"};
  id[6] = static_cast<char>((id[6] & 0x0f) | 0x40);  // a version 4 UUID
  id[8] = static_cast<char>((id[8] & 0x3f) | 0x80);
  copy_span(sqfs, {}, to, squash::sif_prefix(static_cast<uint64_t>(st.st_size), id, ::time(nullptr), objects));
}

// A Singularity 2 image's SquashFS (a "#!" line before it); {} for a plain one.
squash::Span simg_span_of(const std::string& file) {
  util::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw SysError{errno, "open", file};
  return squash::simg_span(fd.get()).value_or(squash::Span{});
}

// A SIF file's root filesystem partition (squash/sif.hpp); throws its errors.
squash::Span sif_root_span(const std::string& file) {
  util::UniqueFd fd = util::open_fd(file, O_RDONLY | O_NONBLOCK);
  const squash::SifObject p = squash::sif_root_partition(squash::read_sif(fd.get(), file), file);
  // What is copied out must be the SquashFS image it claims to be.
  squash::verify_image(fd.get(), file, {p.offset, p.size});
  return {p.offset, p.size};
}

// `from` (or the part `span` covers) to `to`, through a private temporary
// beside it.
void copy_file(const std::string& from, const std::string& to, const squash::Span& span = {}) {
  util::TempDirBeside work(to);
  const std::string tmp = work.path("image.sqfs");
  copy_span(from, span, tmp);
  if (::rename(tmp.c_str(), to.c_str()) != 0) throw SysError{errno, "rename", tmp, to};
  util::note("wrote `" + to + "`");
}

bool importable(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    size_t colon = path.rfind(':');  // OCI layout:TAG
    return colon != std::string::npos && colon > 0 && importable(path.substr(0, colon));
  }
  if (S_ISDIR(st.st_mode)) return util::path_exists(path + "/index.json");
  return S_ISREG(st.st_mode) && !squash::is_squashfs(path);
}

// Whether SRC names a file or directory rather than a stored image
// (store::name_kind: a bare name is a path only where the store has no such image).
bool names_a_path(const std::string& src, const std::string& storage) {
  const store::NameKind kind = store::name_kind(src);
  const store::Root* root = kind == store::NameKind::Either ? store::Root::user_if_exists(storage) : nullptr;
  return kind == store::NameKind::Path || (kind == store::NameKind::Either && !(root && store::find_image(*root, src)));
}

// mksquashfs(1) pseudo definitions giving the files of the tree at
// `rootfs` the set-id bits `attrs` keeps for them (image/file_attrs):
// "PATH m MODE 0 0", the path quoted.
std::string setid_pseudo_lines(const std::string& rootfs, const image::AttrMap& attrs) {
  std::string lines;
  util::UniqueFd root = util::open_fd(rootfs, O_PATH | O_DIRECTORY);
  for (const auto& [path, a] : attrs) {
    struct stat st;
    if (!a.setid || path.find('\n') != std::string::npos ||
        ::fstatat(root.get(), path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISLNK(st.st_mode))
      continue;
    std::string quoted = "\"";
    for (char c : path) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    char mode[16];
    std::snprintf(mode, sizeof mode, "%o", (st.st_mode & 01777) | a.setid);
    lines += quoted + "\" m " + mode + " 0 0\n";
  }
  return lines;
}

void tree_to_squashfs(const run::Image& img, const std::string& src, const std::string& dst, const ConvertOptions& o);

}  // namespace

namespace app {

Exported export_source(const std::string& src, const std::string& near, bool layered, const ConvertOptions& o) {
  const std::string cwd = util::current_dir();
  const std::string src_path = util::normalize_path(src, cwd);
  Exported out;
  // docker-archive, OCI layout, root-filesystem tar: as import reads them.
  // Only where the name is a path (store::name_kind): a bare name never is.
  const bool as_path = names_a_path(src, o.storage);
  if (as_path && importable(src_path) && !util::is_directory(src_path + "/rootfs")) {
    out.image = app::import_source(src);
    return out;
  }
  // A stored image with its layers' blobs: layer by layer.
  if (layered && !as_path) {
    app::Store store(o.storage);
    if (auto s = app::stored_layers(store, src)) {
      out.image = std::move(*s);
      return out;
    }
  }
  run::Image img = run::open_image(src, cwd, o.storage);
  run::warn_if_foreign(img);
  // A SquashFS file, or a store image kept as one: its tree through
  // sqfs2tar, its config from inside.
  if (img.squashfs) {
    const std::string& file = img.rootfs;
    // A SIF file: its SquashFS partition (Apptainer's /.singularity.d
    // inside it keeps working wherever it goes).
    const squash::Span span = img.sif ? sif_root_span(file) : simg_span_of(file);
    std::optional<std::string> config = squash::Image(file).read_file(squash::kConfigPath);
    // sqfs2tar reads a SquashFS file from its start: a SIF file's
    // partition is copied out first, into a private directory.
    std::string tree = file;
    if (img.sif || span.offset != 0) {
      out.scratch = std::make_unique<util::TempDirBeside>(near);
      tree = out.scratch->path("root.sqfs");
      copy_span(file, span, tree);
    }
    out.image = tree_source(util::base_name(near), file, {"sqfs2tar", tree}, config);
    out.image.drop = {".rt"};
    out.image.tree_stamp = tree_stamp(file);
    return out;
  }
  out.image = dir_tree_source(img, util::base_name(near));
  // A store image's tree changes only with its rt-image.json (a new one);
  // a directory elsewhere may change under it at any time.
  if (img.config && !as_path) out.image.tree_stamp = tree_stamp(img.rootfs + "/../" + store::kMetaFile);
  return out;
}

}  // namespace app

void convert(const std::string& src, const std::string& dst_arg, const ConvertOptions& o) {
  util::log_init(o.verbosity);
  const std::string cwd = util::current_dir();
  const Target target = target_of(o.to, dst_arg);
  const std::string dst = target == Target::Store ? dst_arg : util::normalize_path(without_scheme(dst_arg), cwd);
  if (target != Target::Store && util::path_exists(dst) && !o.force)
    throw Error("`" + dst + "` exists", "remove it first, or give --force to replace it");
  if (target == Target::Sqfs || (target == Target::Store && store_format(o.format) == "sqfs"))
    image::check_compression(o.compression);
  const std::string src_path = util::normalize_path(src, cwd);
  if (target == Target::Sif) {
    // The SquashFS image first, beside DST, then wrapped: SIF's header and
    // descriptor table, the image after them.
    // A SquashFS file is wrapped as it is.
    util::TempDirBeside work(dst);
    std::string sqfs = work.path("image.sqfs");
    const std::string sif = work.path("image.sif");
    bool plain = false;
    if (names_a_path(src, o.storage) && !util::is_directory(src_path)) {
      char magic[4] = {};
      util::UniqueFd f(::open(src_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
      plain = f && ::pread(f.get(), magic, sizeof magic, 0) == sizeof magic && std::memcmp(magic, "hsqs", 4) == 0;
    }
    if (plain) {
      sqfs = src_path;
    } else {
      ConvertOptions so = o;
      so.to = "sqfs";
      so.verbosity = o.verbosity > 0 ? o.verbosity : -1;
      convert(src, sqfs, so);
    }
    // An image with rt's config: a definition and the labels before the
    // partition, and in it Apptainer's files, unless it has its own.
    std::vector<squash::SifInput> objects;
    std::optional<std::string> config, deffile, labels;
    bool apptainer = false;
    {
      squash::Image image(sqfs);
      config = image.read_file(squash::kConfigPath);
      apptainer = image.has("/.singularity.d");
      // An image built from a definition file: that file and its labels.
      deffile = image.read_file("/.singularity.d/Singularity", 1 << 20);
      labels = image.read_file("/.singularity.d/labels.json", 1 << 20);
    }
    if (config) {
      const image::SifMetadata m = image::sif_metadata(*config, src + ":" + squash::kConfigPath, src);
      objects = {{squash::SifData::Deffile, "", deffile ? *deffile : m.definition},
                 {squash::SifData::Labels, "", labels ? *labels : m.labels}};
      if (!apptainer) {
        if (plain) {
          sqfs = work.path("image.sqfs");
          copy_span(src_path, {}, sqfs);
        }
        const std::string scratch = work.path("apptainer");
        if (::mkdir(scratch.c_str(), 0700) != 0) throw SysError{errno, "mkdir", scratch};
        append_apptainer_files(sqfs, m, scratch);
      }
    }
    write_sif(sqfs, sif, objects);
    if (::rename(sif.c_str(), dst.c_str()) != 0) throw SysError{errno, "rename", sif, dst};
    util::note("wrote `" + dst + "`");
    return;
  }
  if (target == Target::Sqfs) {
    const bool as_path = names_a_path(src, o.storage);
    if (as_path && importable(src_path) && !util::is_directory(src_path + "/rootfs")) {
      ImportOptions io = import_options(o);
      io.squash = dst;
      import_image(src, io);
      return;
    }
    run::Image img = run::open_image(src, cwd, o.storage);
    run::warn_if_foreign(img);
    if (!img.squashfs) return tree_to_squashfs(img, src, dst, o);
    const squash::Span span = img.sif ? sif_root_span(img.rootfs) : simg_span_of(img.rootfs);
    if (img.rootfs == src_path && !img.sif && span.offset == 0)
      throw Error("`" + src + "` is already a SquashFS image");
    return copy_file(img.rootfs, dst, span);  // as it is
  }
  const bool layered = target == Target::DockerArchive || target == Target::Oci || target == Target::OciArchive;
  app::Exported s =
      app::export_source(src, target == Target::Store ? app::Store(o.storage).tmp_dir() + "/convert" : dst, layered, o);
  switch (target) {
    case Target::Store:
      return store_source(std::move(s.image), dst, o);
    case Target::DockerArchive:
      return write_docker_archive(s.image, dst, app::archive_tag(src), o);
    case Target::Oci:
    case Target::OciArchive:
      return write_oci(s.image, dst, app::archive_tag(src), target == Target::OciArchive, o);
    case Target::Rootfs:
      return write_bundle_dir(s.image, dst, o, true);
    default:
      return write_bundle_dir(s.image, dst, o);
  }
}

namespace {

// The bytes of the regular files under `dir`, for progress.
uint64_t tree_bytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator
           it(dir, std::filesystem::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) total += it->file_size(ec);
  return total;
}

// What a process has read so far: `rchar` in /proc/PID/io (0 when gone).
uint64_t read_chars(const std::string& io) {
  std::optional<std::string> text;
  try {
    text = util::read_file_if_exists(io);
  } catch (const Error&) {  // it ended meanwhile
  }
  if (!text) return 0;
  size_t at = text->find("rchar: ");
  return at == std::string::npos ? 0 : std::strtoull(text->c_str() + at + 7, nullptr, 10);
}

void tree_to_squashfs(const run::Image& img, const std::string& src, const std::string& dst, const ConvertOptions& o) {
  // mksquashfs 4.5 cannot give files extended attributes they do not have
  // on disk: a tree that keeps some beside it goes as its tar, with them,
  // through tar2sqfs, as --squash writes layers.
  const image::AttrMap attrs = image::read_attrs(img.rootfs + "/..");
  if (std::any_of(attrs.begin(), attrs.end(), [](const auto& a) { return !a.second.xattrs.empty(); })) {
    util::info("`" + src + "` keeps extended attributes: its tree goes through tar2sqfs");
    image::write_from_layers(dir_tree_source(img, util::base_name(src)), dst, {o.compression, o.level, o.jobs, 0});
    util::note("wrote `" + dst + "`");
    return;
  }
  // Work next to the destination; rename into place only when complete, so
  // an interrupted convert never leaves a half-written image under DST.
  util::TempDirBeside work(dst);
  const std::string tmp = work.path("image.sqfs"), pseudo = work.path("pseudo"), config = work.path("config.json");

  std::vector<std::string> argv = {"mksquashfs", img.rootfs,  tmp,          "-noappend", "-no-progress",
                                   "-quiet",     "-all-root", "-no-xattrs", "-comp",     o.compression};
  if (o.compression == "zstd" || o.compression == "gzip" || o.compression == "xz") {
    int level = o.level ? o.level : (o.compression == "zstd" ? 3 : o.compression == "gzip" ? 6 : 0);
    if (level && o.compression != "xz") argv.insert(argv.end(), {"-Xcompression-level", std::to_string(level)});
  }
  // Reproducible: same input, same bytes (no build time, fixed order).
  argv.insert(argv.end(), {"-reproducible", "-mkfs-time", "0"});
  int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  argv.insert(argv.end(), {"-processors", std::to_string(jobs)});
  // The configuration goes in as a pseudo file (mksquashfs(1), -pf) whose
  // content a command writes; mksquashfs runs that command with /bin/sh,
  // so it is the constant `cat`, reading the file on mksquashfs's stdin:
  // no path ever reaches a shell.
  util::UniqueFd config_in;
  std::string pseudo_lines = setid_pseudo_lines(img.rootfs, attrs);
  if (img.config) {
    auto text = util::read_regular_if_exists(img.rootfs + "/../" + run::kBundleConfig);
    if (text) {
      util::UniqueFd c = util::open_fd(config, O_WRONLY | O_CREAT | O_EXCL, 0600);
      util::write_all(c.get(), *text, config);
      pseudo_lines += "/.rt D 0 755 0 0\n" + std::string(squash::kConfigPath) + " F 0 644 0 0 cat\n";
      config_in = util::open_fd(config, O_RDONLY);
    }
  }
  if (!pseudo_lines.empty()) {
    util::UniqueFd p = util::open_fd(pseudo, O_WRONLY | O_CREAT | O_EXCL, 0600);
    util::write_all(p.get(), pseudo_lines, pseudo);
    argv.insert(argv.end(), {"-pf", pseudo});
  }
  util::info("running:" + [&] {
    std::string s;
    for (const auto& a : argv) s += " " + a;
    return s;
  }());
  // Progress: what mksquashfs has read of the tree's bytes.
  util::Meter meter("writing `" + dst + "`", 0, util::Meter::mode_for(o.verbosity));
  if (meter.shown()) meter.set_total(tree_bytes(img.rootfs));
  image::Child mksquashfs(argv, {.in = config_in.get()});
  meter.follow([io = "/proc/" + std::to_string(mksquashfs.pid()) + "/io"] { return read_chars(io); });
  int rc = mksquashfs.wait();
  meter.done();
  if (rc != 0)
    throw Error("mksquashfs failed (status " + std::to_string(rc) + ") making `" + dst + "` from `" + src + "`" +
                util::full_disk_note(dst));
  if (::rename(tmp.c_str(), dst.c_str()) != 0) throw SysError{errno, "rename", tmp, dst};
  struct stat st;
  ::stat(dst.c_str(), &st);
  util::note("wrote `" + dst + "` (" + std::to_string(st.st_size / 1000000) + " MB, " + o.compression + ")");
}

}  // namespace
}  // namespace rt
