// A SquashFS file straight from an image's layer streams: two passes over
// the layers (headers, then contents) feed one merged tar stream to
// tar2sqfs (squashfs-tools-ng); no tree is unpacked on disk (host).
#include <archive.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <thread>

#include "image/child.hpp"
#include "image/flatten.hpp"
#include "image/from_layers.hpp"
#include "image/layer_stream.hpp"
#include "image/manifest.hpp"
#include "rt/error.hpp"
#include "squash/sqfs.hpp"
#include "store/lookup.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

struct Pipe {
  int fd;
  std::string what;
};

la_ssize_t pipe_write(archive* a, void* client, const void* buf, size_t n) {
  auto* p = static_cast<Pipe*>(client);
  try {
    util::write_all(p->fd, std::string_view(static_cast<const char*>(buf), n), p->what);
  } catch (const Error& e) {
    archive_set_error(a, EIO, "%s", e.what());
    return -1;
  }
  return static_cast<la_ssize_t>(n);
}

struct WriterDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};

}  // namespace

void check_compression(const std::string& name) {
  for (const char* a : {"zstd", "gzip", "lz4", "xz", "lzo"})
    if (name == a) return;
  throw Error("unknown compression `" + name + "` (zstd, gzip, lz4, xz or lzo)");
}

std::string write_from_layers(const ImageSource& src, const std::string& out, const SquashOptions& o) {
  check_compression(o.compression);
  // Built in a private directory beside `out`, renamed into place when
  // complete: nobody who can write OUT's directory can swap it meanwhile.
  util::TempDirBeside work(out);
  const std::string tmp = work.path("image.sqfs");

  // Pass 1: verify every layer and learn the final tree.
  Flattener flat(src.name, o.max_bytes);
  std::vector<std::string> diff_ids;
  for (size_t i = 0; i < src.layers.size(); ++i) {
    const auto& l = src.layers[i];
    image::LayerStream stream(l.open(), l.name);
    flat.scan_layer([&](void* b, size_t n) { return stream.read(b, n); }, l.name);
    const std::string where = "image `" + src.name + "` layer `" + l.name + "`";
    if (!l.expected_blob.empty() && stream.blob_digest() != l.expected_blob)
      throw Error(where + ": digest mismatch: the blob hashes to " + stream.blob_digest());
    if (!l.expected_diff_id.empty() && stream.diff_id() != l.expected_diff_id)
      throw Error(where + ": diff_id mismatch: the uncompressed layer hashes to " + stream.diff_id());
    diff_ids.push_back(stream.diff_id());
  }
  const std::string config = config_with_diff_ids(src.config_text, diff_ids);

  // tar2sqfs reads the merged stream on its standard input.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw SysError{errno, "pipe"};
  util::UniqueFd rd(fds[0]), wr(fds[1]);
  int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Extended attributes go in as the layers have them (set-id bits with
  // the modes): a SquashFS file holds what a rootless tree cannot.
  std::vector<std::string> argv = {"tar2sqfs",     "--quiet",     "--no-keep-time", "--force",
                                   "--compressor", o.compression, "--num-jobs",     std::to_string(jobs)};
  if (o.compression == "zstd" || o.compression == "gzip")
    argv.insert(argv.end(), {"--comp-extra", "level=" + std::to_string(o.level                   ? o.level
                                                                       : o.compression == "zstd" ? 3
                                                                                                 : 6)});
  argv.push_back(tmp);
  image::Child tar2sqfs(argv, {.in = rd.get()});
  rd.reset();

  try {
    Pipe pipe{wr.get(), "tar2sqfs"};
    std::unique_ptr<archive, WriterDeleter> w(archive_write_new());
    archive_write_set_format_pax_restricted(w.get());
    // Names are arbitrary bytes: pass them through, never translate them.
    archive_write_set_format_option(w.get(), "pax", "hdrcharset", "BINARY");
    archive_write_set_bytes_per_block(w.get(), 1 << 16);
    if (archive_write_open(w.get(), &pipe, nullptr, pipe_write, nullptr) != ARCHIVE_OK)
      throw Error("cannot start the SquashFS stream: " + archive_error(w.get()));
    flat.begin(w.get());
    for (const auto& l : src.layers) {
      image::LayerStream stream(l.open(), l.name);
      flat.emit_layer([&](void* b, size_t n) { return stream.read(b, n); }, l.name, w.get());
    }
    std::string cfg_path = std::string(squash::kConfigPath).substr(1);
    flat.finish(w.get(), {{cfg_path, config}});
    if (archive_write_close(w.get()) != ARCHIVE_OK)
      throw Error("writing the SquashFS stream: " + archive_error(w.get()));
  } catch (const Error& e) {
    // tar2sqfs stopped reading: say why it did, when the disk is the cause.
    wr.reset();
    if (int rc = tar2sqfs.wait(); rc != 0)
      throw Error("tar2sqfs failed (status " + std::to_string(rc) + ") making `" + out + "` from image `" + src.name +
                  "`" + util::full_disk_note(out));
    throw;
  }
  wr.reset();
  if (int rc = tar2sqfs.wait(); rc != 0)
    throw Error("tar2sqfs failed (status " + std::to_string(rc) + ") making `" + out + "` from image `" + src.name +
                "`" + util::full_disk_note(out));
  if (::rename(tmp.c_str(), out.c_str()) != 0) throw SysError{errno, "rename", tmp, out};
  struct stat sb;
  ::stat(out.c_str(), &sb);
  util::note("wrote `" + out + "` (" + util::human_bytes(static_cast<uint64_t>(sb.st_size)) + ", " +
             std::to_string(flat.entries()) + " entries, " + o.compression + ") straight from the layers");
  return config;
}

}  // namespace rt::image
