// Merging layers into one tar stream (host).
#include "image/flatten.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "image/file_attrs.hpp"
#include "rt/error.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

// A hole of a sparse file, written as zeros a bounded buffer at a time.
void write_zeros(archive* out, uint64_t n) {
  static const std::vector<char> zeros(1 << 16);
  while (n > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, zeros.size()));
    if (archive_write_data(out, zeros.data(), chunk) < 0)
      throw Error("writing the SquashFS stream: " + archive_error(out));
    n -= chunk;
  }
}

}  // namespace

void Flattener::scan_layer(const image::ReadFn& read, const std::string& layer) {
  merge_.begin_layer(layer);
  image::for_each_tar_entry(read, image_, layer, [&](archive*, archive_entry* e, uint64_t index) {
    const MergeStep step = merge_.apply(merge_entry_of(e), index);
    if (step.kind == MergeStep::Kind::Skipped && !warned_devices_) {
      util::warn("image `" + image_ +
                 "`: skipping device nodes and sockets (first: " + util::quoted(archive_entry_pathname(e)) + ")");
      warned_devices_ = true;
    }
  });
}

void Flattener::write_header(archive* out, const std::string& key, const Node& n, int64_t size) {
  EntryPtr e(archive_entry_new());
  archive_entry_set_pathname(e.get(), key.c_str());
  archive_entry_set_uid(e.get(), 0);
  archive_entry_set_gid(e.get(), 0);
  archive_entry_set_mtime(e.get(), n.mtime, 0);
  if (n.type == 0) {
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_hardlink(e.get(), n.link.c_str());
    archive_entry_set_size(e.get(), 0);
  } else {
    archive_entry_set_filetype(e.get(), n.type);
    archive_entry_set_perm(e.get(), n.type == AE_IFLNK ? 0777 : n.perm);
    if (n.type == AE_IFLNK) archive_entry_set_symlink(e.get(), n.link.c_str());
    for (const auto& [name, value] : n.xattrs)
      archive_entry_xattr_add_entry(e.get(), name.c_str(), value.data(), value.size());
    archive_entry_set_size(e.get(), n.type == AE_IFREG ? size : 0);
  }
  if (archive_write_header(out, e.get()) != ARCHIVE_OK)
    throw Error("writing the SquashFS stream: " + archive_error(out));
}

void Flattener::begin(archive* out) {
  keep_.clear();
  for (const auto& [key, n] : merge_.nodes()) {
    if (n.type == AE_IFDIR)
      write_header(out, key, n, 0);
    else if (n.type != 0)
      keep_[{n.layer, n.index}] = key;
  }
}

void Flattener::emit_layer(const image::ReadFn& read, const std::string& layer, archive* out) {
  // Layers are emitted in the order they were scanned: emitted_ is the number.
  image::for_each_tar_entry(read, image_, layer, [&](archive* in, archive_entry* e, uint64_t index) {
    auto it = keep_.find({emitted_, index});
    if (it == keep_.end()) return;
    const Node& n = merge_.nodes().at(it->second);
    if (n.type == AE_IFREG) {
      bytes_ += static_cast<uint64_t>(std::max<int64_t>(0, archive_entry_size(e)));
      if (max_bytes_ && bytes_ > max_bytes_) throw too_large(max_bytes_, image_, layer, it->second);
    }
    write_header(out, it->second, n, archive_entry_size(e));
    if (n.type != AE_IFREG) return;
    const void* buf;
    size_t size;
    la_int64_t offset;
    int64_t written = 0;
    for (;;) {
      int r = archive_read_data_block(in, &buf, &size, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) throw Error("image `" + image_ + "` layer `" + layer + "`: " + archive_error(in));
      if (offset > written) {  // a hole in a sparse file
        write_zeros(out, static_cast<uint64_t>(offset - written));
        written = offset;
      }
      if (archive_write_data(out, buf, size) < 0) throw Error("writing the SquashFS stream: " + archive_error(out));
      written += static_cast<int64_t>(size);
    }
    if (archive_entry_size(e) > written) write_zeros(out, static_cast<uint64_t>(archive_entry_size(e) - written));
  });
  ++emitted_;
}

void Flattener::finish(archive* out, const std::map<std::string, std::string>& extra) {
  for (const auto& [key, n] : merge_.nodes())
    if (n.type == 0) write_header(out, key, n, 0);
  if (!extra.empty()) {
    Node d;
    d.type = AE_IFDIR;
    write_header(out, extra.begin()->first.substr(0, extra.begin()->first.rfind('/')), d, 0);
  }
  for (const auto& [path, content] : extra) {
    Node f;
    f.type = AE_IFREG;
    f.perm = 0644;
    write_header(out, path, f, static_cast<int64_t>(content.size()));
    archive_write_data(out, content.data(), content.size());
  }
}

}  // namespace rt::image
