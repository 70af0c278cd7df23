// rt pull / rt push of oras://REF: SIF files as Apptainer keeps them in
// OCI registries (host).
#include "app/oras.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/store.hpp"
#include "image/manifest.hpp"
#include "image/oras.hpp"
#include "image/registry.hpp"
#include "image/sha256.hpp"
#include "image/signatures.hpp"
#include "rt/error.hpp"
#include "squash/lazy.hpp"
#include "squash/sif.hpp"
#include "store/ref.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/progress.hpp"
#include "util/strings.hpp"

namespace rt::app {
namespace {

store::Reference oras_reference(const std::string& ref) {
  const std::string_view text = image::without_oras(ref);
  if (text.starts_with("docker://")) throw Error("bad reference `" + ref + "`: oras:// and docker:// both");
  return store::parse_reference(text);
}

// The file's SHA-256 digest, read once, and its chunk index (squash/lazy.hpp)
// into `chunks`, whose chunk_size is set; `meter` counts the bytes.
std::string file_digest(int fd, const std::string& path, util::Meter& meter, squash::ChunkIndex& chunks) {
  image::Sha256 h;
  auto chunk = std::make_unique<image::Sha256>();
  uint64_t in_chunk = 0;
  auto chunk_done = [&] {
    chunks.digests.push_back(chunk->digest().substr(7));
    chunk = std::make_unique<image::Sha256>();
    in_chunk = 0;
  };
  std::vector<char> buf(1 << 20);
  for (uint64_t off = 0;;) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SysError{errno, "read", path};
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
    for (size_t at = 0; at < static_cast<size_t>(n);) {
      const size_t part = static_cast<size_t>(std::min<uint64_t>(static_cast<size_t>(n) - at, chunks.chunk_size - in_chunk));
      chunk->update(buf.data() + at, part);
      at += part;
      in_chunk += part;
      if (in_chunk == chunks.chunk_size) chunk_done();
    }
    off += static_cast<uint64_t>(n);
    meter.add(static_cast<uint64_t>(n));
  }
  if (in_chunk > 0) chunk_done();
  return h.digest();
}

// The name a SIF file made from `image` carries in the registry: its last
// component, with a tag's ':' as Apptainer's '_', ending in .sif.
std::string sif_title(const std::string& image) {
  std::string name = util::base_name(image);
  for (const char* ext : {".sqfs", ".squashfs", ".sqsh", ".simg", ".sif"})
    if (const size_t n = std::string_view(ext).size(); name.ends_with(ext) && name.size() > n)
      name.resize(name.size() - n);
  for (char& c : name)
    if (c == ':' || c == '@') c = '_';
  return (name.empty() ? "image" : name) + ".sif";
}

// Whether push takes `image` as a file: a path, or a bare NAME.sif that
// is a regular file here (as Apptainer's FILE.sif).
bool as_file(const std::string& image, const StoreOptions& o) {
  if (image_is_path(image, o)) return true;
  struct stat st;
  return image.ends_with(".sif") && ::stat(image.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The process's umask, for the mode of a finished download (it was written
// 0600 in a private directory).
mode_t current_umask() {
  const mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

}  // namespace

SifArtifact resolve_sif(image::Registry& reg, const store::Reference& ref, const std::string& shown,
                        const PullOptions& o) {
  SifArtifact a;
  auto& doc = a.doc;
  doc = reg.get_manifest(ref.manifest_ref());
  // The trust policy's docker scopes apply to the registry's reference;
  // rt reads no simple signatures of a SIF file, so signedBy refuses.
  image::admit_image(o.policy, ref, doc.digest, image::registry_options(o.ca_file, o.insecure, o.plain_http), true);
  auto& j = a.manifest;
  j = image::parse_json(doc.body, "`" + shown + "` manifest");
  if (image::is_index(j)) {
    // One SIF file per platform, as Apptainer's pull selects by --arch.
    auto ms = image::parse_index(j, "`" + shown + "` index");
    const image::Platform want = o.platform.empty() ? image::host_platform() : image::parse_platform(o.platform);
    const image::Descriptor& d = image::select_platform(ms, want, shown);
    doc = reg.get_manifest(d.digest);
    j = image::parse_json(doc.body, "`" + shown + "` manifest");
    image::check_media_type(d, j, "`" + shown + "` manifest " + d.digest);
  }
  a.layer = image::sif_layer(j, shown);
  const image::Descriptor& layer = a.layer;
  const uint64_t limit = o.max_bytes ? o.max_bytes : kDefaultMaxBytes;
  if (static_cast<uint64_t>(layer.size) > limit)
    throw Error("`" + shown + "` is " + util::human_bytes(static_cast<uint64_t>(layer.size)) + ", more than the " +
                    util::human_bytes(limit) + " allowed",
                "give --max-size BYTES to allow more");
  return a;
}

std::string pull_sif(const std::string& ref_text, const std::string& dest_arg, const PullOptions& o) {
  util::log_init(o.verbosity);
  if (!o.squash.empty() || !o.format.empty())
    throw Error("`" + ref_text + "` is a SIF file: it is written as it is, never unpacked or squashed",
                "rt pull " + ref_text + " [FILE.sif], then rt exec FILE.sif");
  const store::Reference ref = oras_reference(ref_text);
  const std::string shown = image::oras::kScheme + ref.str();
  const std::string cwd = util::current_dir();
  std::string dest = util::normalize_path(dest_arg.empty() ? image::sif_file_name(ref) : dest_arg, cwd);
  if (!dest_arg.empty() && util::is_directory(dest)) dest += "/" + image::sif_file_name(ref);
  if (o.if_missing && util::path_exists(dest)) return dest;
  image::Registry reg(ref, image::registry_options(o.ca_file, o.insecure, o.plain_http));

  const SifArtifact art = resolve_sif(reg, ref, shown, o);
  const image::Descriptor& layer = art.layer;

  // The blob is hashed as it streams into a private directory beside DEST,
  // and takes DEST's name only whole, verified and a SIF file: an
  // interrupted or refused pull leaves nothing (the directory goes with
  // `work`, on a signal too).
  util::TempDirBeside work(dest);
  const std::string tmp = work.path("image.sif");
  {
    util::Meter meter("downloading `" + shown + "`", static_cast<uint64_t>(layer.size),
                      util::Meter::mode_for(o.verbosity));
    reg.download_blob(layer, tmp, [&](uint64_t n) { meter.add(n); });
    meter.done();
  }
  {
    util::UniqueFd fd = util::open_fd(tmp, O_RDONLY);
    if (!squash::is_sif(fd.get()))
      throw Error("`" + shown + "`: the blob " + layer.digest + " is no SIF file (no SIF header)",
                  "nothing was written to `" + dest + "`");
  }
  if (::chmod(tmp.c_str(), 0666 & ~current_umask()) != 0) throw SysError{errno, "chmod", tmp};
  if (::rename(tmp.c_str(), dest.c_str()) != 0) throw SysError{errno, "rename", tmp, dest};
  util::note("pulled `" + shown + "` to `" + dest + "` (" + layer.digest.substr(0, 19) + ", " +
             util::human_bytes(static_cast<uint64_t>(layer.size)) + ")");
  return dest;
}

std::string push_sif(const std::string& image, const std::string& ref_text, const PushOptions& o) {
  util::log_init(o.verbosity);
  const store::Reference ref = oras_reference(ref_text);
  const std::string shown = image::oras::kScheme + ref.str();
  if (ref.tag.empty())
    throw Error("`" + ref_text + "` names a digest: a push goes to a tag", "rt push " + image + " oras://REG/REPO:TAG");
  image::Registry reg(ref, image::registry_options(o.ca_file, o.insecure, o.plain_http));
  // Access first (a HEAD of the empty blob): a refusal should not wait for
  // a conversion or the hashing of a large file.
  reg.has_blob(image::sha256_digest(""));

  // The SIF file: the one given, or one made from the image in a private
  // directory of the store's tmp/ (removed on the way out).
  std::string file = image;
  std::string title = util::base_name(image);
  std::unique_ptr<util::TempDirBeside> made;
  if (!as_file(image, o)) {
    Store store(o.storage);
    made = std::make_unique<util::TempDirBeside>(store.tmp_dir() + "/oras-push");
    title = sif_title(image);
    file = made->path("image.sif");
    ConvertOptions co;
    static_cast<StoreOptions&>(co) = o;
    co.to = "sif";
    co.jobs = o.jobs;
    co.verbosity = o.verbosity > 0 ? o.verbosity : -1;
    convert(image, file, co);
    util::info("`" + image + "` made into a SIF file");
  }
  util::UniqueFd fd = util::open_fd(file, O_RDONLY | O_NONBLOCK);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw SysError{errno, "fstat", file};
  if (!S_ISREG(st.st_mode) || !squash::is_sif(fd.get()))
    throw Error("`" + image + "` is no SIF file", "oras:// takes SIF files: rt convert " + image + " FILE.sif first");
  // The SIF header's creation time as the manifest's (else the file's
  // modification time): pushing the same file again makes the same
  // manifest, where Apptainer puts the time of the push when the file has
  // no creation label.
  const squash::SifFile sif = squash::read_sif(fd.get(), file);
  const int64_t created = sif.created > 0 ? sif.created : static_cast<int64_t>(st.st_mtim.tv_sec);

  image::Descriptor layer;
  layer.media_type = image::oras::kSifLayer;
  layer.size = st.st_size;
  // The chunk index, beside the file: what lets rt exec oras://REF read
  // the file by range, each chunk checked (squash/lazy.hpp).
  squash::ChunkIndex chunks;
  chunks.size = static_cast<uint64_t>(st.st_size);
  chunks.chunk_size = squash::chunk_size_for(chunks.size);
  {
    util::Meter meter("hashing `" + image + "`", static_cast<uint64_t>(st.st_size),
                      util::Meter::mode_for(o.verbosity));
    layer.digest = file_digest(fd.get(), file, meter, chunks);
    meter.done();
  }
  bool config_sent = false, index_sent = false;
  const image::Descriptor index =
      reg.put_small_blob(squash::format_chunk_index(chunks), squash::lazy::kMediaType, &index_sent);
  const std::string manifest = image::sif_manifest(layer, title, created, index.digest);
  reg.put_small_blob(image::oras::kEmptyConfig, image::oras::kSifConfig, &config_sent);
  size_t sent = (config_sent ? 1 : 0) + (index_sent ? 1 : 0);
  if (reg.has_blob(layer.digest)) {
    util::info("`" + image + "`: the registry has it (" + layer.digest.substr(0, 19) + ")");
  } else {
    util::Meter meter("pushing `" + image + "` to `" + shown + "`", static_cast<uint64_t>(layer.size),
                      util::Meter::mode_for(o.verbosity));
    reg.upload_blob(layer, file, [&](uint64_t n) { meter.add(n); });
    meter.done();
    ++sent;
  }
  const std::string digest = reg.put_manifest(ref.manifest_ref(), manifest, image::media::kOciManifest);
  util::note("pushed `" + image + "` to `" + shown + "` (" + digest.substr(0, 19) + "; " + std::to_string(sent) +
             " blob" + (sent == 1 ? "" : "s") + " sent, " + std::to_string(3 - sent) + " already there)");
  return digest;
}

}  // namespace rt::app
