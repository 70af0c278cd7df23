// Merging layers into one tar stream (host).
#include "image/flatten.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <memory>

#include "rt/error.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

// The first `n` components as a path key.
std::string join(const std::vector<std::string>& c, size_t n) { return util::join(std::span(c).first(n), '/'); }

} // namespace

// The key of comps[0..upto) with every symlink met on the way followed
// inside the image (as RESOLVE_IN_ROOT does when unpacking to a directory).
// A link must lead to something the image has, as when unpacking.
std::string Flattener::resolve(const std::vector<std::string>& comps, size_t upto, const std::string& where,
                               int depth) {
  if (depth > 40) throw Error(where + "too many levels of symbolic links");
  std::vector<std::string> out;
  for (size_t i = 0; i < upto; ++i) {
    const std::string& c = comps[i];
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.push_back(c);
    const std::string key = join(out, out.size());
    auto it = nodes_.find(key);
    if (it == nodes_.end() || it->second.type != AE_IFLNK) continue;
    out.pop_back();
    std::vector<std::string> target = out;  // relative links start from the link's directory
    const std::string& t = it->second.link;
    if (!t.empty() && t.front() == '/') target.clear();
    for (auto& x : util::split(t, '/')) target.push_back(x);
    std::string resolved = resolve(target, target.size(), where, depth + 1);
    if (!resolved.empty() && !nodes_.count(resolved))
      throw Error(where + "`" + key + "` is not a directory (a symlink to a path the image lacks)");
    out = resolved.empty() ? std::vector<std::string>{} : util::split(resolved, '/');
  }
  return join(out, out.size());
}

void Flattener::erase_tree(const std::string& key) {
  nodes_.erase(key);
  auto lo = nodes_.lower_bound(key + "/");
  auto hi = nodes_.lower_bound(key + "0");  // '0' follows '/'
  nodes_.erase(lo, hi);
}

void Flattener::ensure_parents(const std::string& key, const std::string& where) {
  for (size_t pos = key.find('/'); pos != std::string::npos; pos = key.find('/', pos + 1)) {
    std::string p = key.substr(0, pos);
    auto it = nodes_.find(p);
    if (it == nodes_.end()) {
      nodes_[p] = Node{};
      nodes_[p].type = AE_IFDIR;
    } else if (it->second.type != AE_IFDIR) {
      throw Error(where + "`" + p + "` is not a directory");
    }
  }
}

void Flattener::scan_layer(const image::ReadFn& read, const std::string& layer) {
  ++layer_no_;
  this_layer_.clear();
  image::for_each_tar_entry(read, image_, layer, [&](archive*, archive_entry* e, uint64_t index) {
    const char* raw = archive_entry_pathname(e);
    const std::string path = raw ? raw : "";
    const std::string where = "image `" + image_ + "` layer `" + layer + "` entry " + util::quoted(path) + ": ";
    std::vector<std::string> comps;
    if (!image::split_entry_path(path, comps)) throw Error(where + "absolute or `..` paths are not allowed in a layer");
    if (comps.empty()) return;
    const std::string parent = resolve(comps, comps.size() - 1, where);
    const std::string& name = comps.back();
    auto child = [&](const std::string& n) { return parent.empty() ? n : parent + "/" + n; };
    if (name == ".wh..wh..opq") {
      std::string prefix = parent.empty() ? "" : parent + "/";
      for (auto it = nodes_.lower_bound(prefix); it != nodes_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
        if (it->first == parent || this_layer_.count(it->first)) ++it;
        else it = nodes_.erase(it);
      }
      return;
    }
    if (name.starts_with(".wh.")) {
      erase_tree(child(name.substr(4)));
      return;
    }
    const unsigned type = archive_entry_filetype(e);
    if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
      if (!warned_devices_) util::warn("image `" + image_ + "`: skipping device nodes (first: " + util::quoted(path) + ")");
      warned_devices_ = true;
      return;
    }
    const std::string key = child(name);
    Node n;
    n.layer = layer_no_;
    n.index = index;
    n.type = type;
    n.perm = archive_entry_perm(e) & 01777;
    n.mtime = archive_entry_mtime(e);
    if (const char* hl = archive_entry_hardlink(e)) {
      std::vector<std::string> t;
      if (!image::split_entry_path(hl, t) || t.empty())
        throw Error(where + "hard link target " + util::quoted(hl) + " is outside the image");
      std::string tkey = resolve(t, t.size() - 1, where);
      tkey = tkey.empty() ? t.back() : tkey + "/" + t.back();
      auto it = nodes_.find(tkey);
      if (it == nodes_.end() || it->second.type == AE_IFDIR)
        throw Error(where + "hard link target " + util::quoted(hl) + " does not exist or is a directory");
      n.type = 0;  // a hard link
      n.link = it->second.type == 0 ? it->second.link : tkey;
    } else if (type == AE_IFLNK) {
      n.link = archive_entry_symlink(e) ? archive_entry_symlink(e) : "";
    }
    auto old = nodes_.find(key);
    if (old != nodes_.end() && old->second.type == AE_IFDIR && type == AE_IFDIR && n.type == AE_IFDIR) {
      old->second.perm = n.perm;  // directories merge
      old->second.mtime = n.mtime;
      old->second.layer = layer_no_;
      this_layer_.insert(key);
      return;
    }
    erase_tree(key);
    ensure_parents(key, where);
    nodes_[key] = n;
    this_layer_.insert(key);
  });
}

void Flattener::write_header(archive* out, const std::string& key, const Node& n, int64_t size) {
  std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
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
    archive_entry_set_size(e.get(), n.type == AE_IFREG ? size : 0);
  }
  if (archive_write_header(out, e.get()) != ARCHIVE_OK)
    throw Error("writing the SquashFS stream: " + std::string(archive_error_string(out)));
}

void Flattener::begin(archive* out) {
  keep_.clear();
  for (const auto& [key, n] : nodes_) {
    if (n.type == AE_IFDIR) write_header(out, key, n, 0);
    else if (n.type != 0) keep_[{n.layer, n.index}] = key;
  }
}

void Flattener::emit_layer(const image::ReadFn& read, const std::string& layer, archive* out) {
  // Layers are emitted in the order they were scanned: emitted_ is the number.
  image::for_each_tar_entry(read, image_, layer, [&](archive* in, archive_entry* e, uint64_t index) {
    auto it = keep_.find({emitted_, index});
    if (it == keep_.end()) return;
    const Node& n = nodes_.at(it->second);
    write_header(out, it->second, n, archive_entry_size(e));
    if (n.type != AE_IFREG) return;
    const void* buf;
    size_t size;
    la_int64_t offset;
    int64_t written = 0;
    std::vector<char> zeros;
    for (;;) {
      int r = archive_read_data_block(in, &buf, &size, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) throw Error("image `" + image_ + "` layer `" + layer + "`: " + archive_error_string(in));
      if (offset > written) {  // a hole in a sparse file
        zeros.assign(static_cast<size_t>(offset - written), '\0');
        archive_write_data(out, zeros.data(), zeros.size());
        written = offset;
      }
      if (archive_write_data(out, buf, size) < 0)
        throw Error("writing the SquashFS stream: " + std::string(archive_error_string(out)));
      written += static_cast<int64_t>(size);
    }
    if (archive_entry_size(e) > written) {
      zeros.assign(static_cast<size_t>(archive_entry_size(e) - written), '\0');
      archive_write_data(out, zeros.data(), zeros.size());
    }
  });
  ++emitted_;
}

void Flattener::finish(archive* out, const std::map<std::string, std::string>& extra) {
  for (const auto& [key, n] : nodes_)
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

} // namespace rt::image
