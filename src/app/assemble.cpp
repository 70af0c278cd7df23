// Building a stored image from its layers (host).
#include "app/assemble.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/export.hpp"
#include "image/layer_stream.hpp"
#include "image/manifest.hpp"
#include "image/sha256.hpp"
#include "rt/error.hpp"
#include "store/lookup.hpp"
#include "util/digest.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::app {

using image::LayerStream;
using image::TreeWriter;

namespace {

void write_file(const std::string& path, const std::string& text) {
  util::UniqueFd fd = util::open_fd(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  util::write_all(fd.get(), text, path);
}

// `src` with `config` as its configuration (and its digest).
ImageSource with_config(const ImageSource& src, const std::string& config) {
  ImageSource out = src;
  if (config != src.config_text) {
    out.config_text = config;
    out.config_digest = image::sha256_digest(config);
  }
  return out;
}

}  // namespace

void assemble_image(app::Store& store, const ImageSource& src, const AssembleOptions& opts) {
  app::WorkDir work(store.tmp_dir(), "image");
  // Compressed layer blobs the store lacks (an imported OCI layout's or
  // archive's) are kept as pulled ones are: copied as they are read and
  // committed once their digest has been checked, so that the image goes
  // out again as these layers (rt push, rt convert). Uncompressed ones
  // would double the image's size on disk: their first bytes tell, and
  // they are not copied.
  ImageSource teed = src;
  std::vector<std::string> copies(src.layers.size());
  for (size_t i = 0; i < teed.layers.size(); ++i) {
    LayerInput& l = teed.layers[i];
    if (!util::is_valid_digest(l.expected_blob) || store.has_blob(l.expected_blob)) continue;
    copies[i] = work.path() + "/blob." + std::to_string(i);
    l.open = [open = l.open, file = copies[i]] {
      struct Copy {
        bool decided = false;
        util::UniqueFd fd;  // none: not copied
      };
      return image::ReadFn([read = open(), copy = std::make_shared<Copy>(), file](void* buf, size_t size) {
        const size_t n = read(buf, size);
        if (!copy->decided && n > 0) {
          copy->decided = true;
          if (n < 4 || image::magic_of(buf, n) != Magic::Other)  // too short to tell: copied, checked after
            copy->fd = util::open_fd(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        }
        if (copy->fd) util::write_all(copy->fd.get(), std::string_view(static_cast<const char*>(buf), n), file);
        return n;
      });
    };
  }
  assemble_bundle(work.path(), teed, opts);
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].empty() || !util::path_exists(copies[i])) continue;
    if (magic_of(copies[i]) != Magic::Other && !store.has_blob(src.layers[i].expected_blob))
      store.commit_blob(src.layers[i].expected_blob, copies[i]);
    else if (::unlink(copies[i].c_str()) != 0)
      throw SysError{errno, "unlink", copies[i]};
  }
  store.commit_image(src.name, work);
}

void assemble_bundle(const std::string& dir, const ImageSource& src, const AssembleOptions& opts) {
  const std::string rootfs = dir + "/rootfs";
  if (::mkdir(rootfs.c_str(), 0755) != 0) throw SysError{errno, "mkdir", rootfs};
  TreeWriter writer(rootfs, src.name, opts.max_bytes);
  const size_t n = src.layers.size();
  std::vector<std::string> diff_ids;
  for (size_t i = 0; i < n; ++i) {
    const LayerInput& l = src.layers[i];
    const std::string where =
        "image `" + src.name + "` layer " + std::to_string(i + 1) + "/" + std::to_string(n) + " `" + l.name + "`";
    LayerStream stream(l.open(), l.name);
    uint64_t before = writer.stats().bytes;
    writer.apply_layer([&](void* buf, size_t size) { return stream.read(buf, size); }, l.name);
    if (!l.expected_blob.empty() && stream.blob_digest() != l.expected_blob)
      throw Error(where + ": digest mismatch: the blob hashes to " + stream.blob_digest());
    if (l.expected_size >= 0 && stream.blob_size() != static_cast<uint64_t>(l.expected_size))
      throw Error(where + ": size mismatch: " + std::to_string(stream.blob_size()) + " bytes, the manifest says " +
                  std::to_string(l.expected_size));
    if (!l.expected_diff_id.empty() && stream.diff_id() != l.expected_diff_id)
      throw Error(where + ": diff_id mismatch: the uncompressed layer hashes to " + stream.diff_id() +
                  ", the config says " + l.expected_diff_id);
    diff_ids.push_back(stream.diff_id());
    if (!opts.quiet)
      util::note("layer " + std::to_string(i + 1) + "/" + std::to_string(n) + " " + l.name.substr(0, 19) + " " +
                 util::human_bytes(stream.blob_size()) + " " + stream.compression() + " -> " +
                 util::human_bytes(writer.stats().bytes - before) + " unpacked");
  }
  writer.finish();
  image::AttrMap attrs = writer.attrs();
  for (const auto& d : src.drop) {
    util::UniqueFd root = util::open_fd(rootfs, O_PATH | O_DIRECTORY);
    if (::faccessat(root.get(), d.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0)
      util::remove_tree_at(root.get(), d, rootfs + "/" + d);
    std::erase_if(attrs, [&](const auto& a) { return a.first == d || a.first.starts_with(d + "/"); });
  }
  image::write_attrs(dir, attrs);

  write_image_files(dir, with_config(src, image::config_with_diff_ids(src.config_text, diff_ids)),
                    writer.stats().bytes);
}

void write_image_files(const std::string& dir, const ImageSource& src, uint64_t size) {
  write_file(dir + "/image-config.json", src.config_text);
  nlohmann::json meta;
  meta["name"] = src.name;
  meta["ref"] = src.ref;
  meta["manifest_digest"] = src.manifest_digest;
  meta["config_digest"] = src.config_digest;
  meta["layers"] = nlohmann::json::array();
  for (const auto& l : src.layers) meta["layers"].push_back(l.expected_blob.empty() ? l.name : l.expected_blob);
  if (!src.base_name.empty()) meta["base"] = {{"name", src.base_name}, {"config_digest", src.base_digest}};
  if (!src.admission.empty()) meta["policy"] = nlohmann::json::parse(src.admission);
  meta["size"] = size;
  meta["created"] = util::utc_time(::time(nullptr));
  write_file(dir + "/" + store::kMetaFile, meta.dump(2) + "\n");
}

void store_from_layers(app::Store& store, const ImageSource& src, const image::SquashOptions& options) {
  app::WorkDir work(store.tmp_dir(), "image");
  const std::string file = work.path() + "/" + store::kSquashFile;
  const std::string config = image::write_from_layers(src, file, options);
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) throw SysError{errno, "stat", file};
  write_image_files(work.path(), with_config(src, config), static_cast<uint64_t>(st.st_size));
  store.commit_image(src.name, work);
}

}  // namespace rt::app
