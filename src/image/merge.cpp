// Merging image layers (pure); see merge.hpp.
#include "image/merge.hpp"

#include <sys/stat.h>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

bool is_dir(unsigned type) { return type == S_IFDIR; }

std::string child_of(const std::string& parent, const std::string& name) {
  return parent.empty() ? name : parent + "/" + name;
}

// The entries strictly below `key` ("": all) of a sorted container of
// paths: [key + "/", key + "0"), as '0' follows '/' (siblings such as
// "key-x" or "key.d" sort before "key/").
template <class C>
auto under(C& c, const std::string& key) {
  if (key.empty()) return std::pair{c.begin(), c.end()};
  return std::pair{c.lower_bound(key + "/"), c.lower_bound(key + "0")};
}

// True when `key` is `top` or lies below it.
bool at_or_under(const std::string& key, const std::string& top) {
  return top.empty() || key == top ||
         (key.size() > top.size() && key.compare(0, top.size(), top) == 0 && key[top.size()] == '/');
}

}  // namespace

bool split_entry_path(const std::string& path, std::vector<std::string>& comps) {
  comps.clear();
  if (!path.empty() && path.front() == '/') return false;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string c = path.substr(i, j - i);
    if (c == "..") return false;
    if (!c.empty() && c != ".") comps.push_back(std::move(c));
    i = j + 1;
  }
  return true;
}

void LayerMerge::begin_layer(const std::string& name) {
  ++layer_no_;
  layer_name_ = name;
  this_layer_.clear();
}

std::string LayerMerge::where(const std::string& path) const {
  return "image `" + image_ + "` layer `" + layer_name_ + "` entry " + util::quoted(path) + ": ";
}

// The key of comps[0..upto) with every symlink met on the way followed
// inside the image. A link must lead to something the image has.
std::string LayerMerge::resolve(const std::vector<std::string>& comps, size_t upto, const std::string& where,
                                int* links) const {
  int own = 0;
  if (!links) links = &own;
  std::vector<std::string> out;
  for (size_t i = 0; i < upto; ++i) {
    const std::string& c = comps[i];
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.push_back(c);
    const std::string key = util::join(out, '/');
    auto it = nodes_.find(key);
    if (it == nodes_.end()) continue;
    if (it->second.type == S_IFLNK) {
      if (++*links > 40) throw Error(where + "too many levels of symbolic links (more than 40 followed)");
      out.pop_back();
      std::vector<std::string> target = out;  // relative links start from the link's directory
      const std::string& t = it->second.link;
      if (!t.empty() && t.front() == '/') target.clear();
      for (auto& x : util::split(t, '/')) target.push_back(x);
      std::string resolved = resolve(target, target.size(), where, links);
      if (!resolved.empty() && !nodes_.count(resolved))
        throw Error(where + "`" + key + "` is not a directory (a symlink to a path the image lacks)");
      out = resolved.empty() ? std::vector<std::string>{} : util::split(resolved, '/');
    } else if (i + 1 < upto && !is_dir(it->second.type)) {
      throw Error(where + "`" + key + "` is not a directory");
    }
  }
  return util::join(out, '/');
}

std::vector<std::string> LayerMerge::erase_tree(const std::string& key) {
  bool any = nodes_.erase(key) > 0;
  auto [lo, hi] = under(nodes_, key);
  any = any || lo != hi;
  nodes_.erase(lo, hi);
  return any ? std::vector<std::string>{key} : std::vector<std::string>{};
}

std::vector<std::string> LayerMerge::remove_lower(const std::string& key, bool keep_key) {
  // What this layer made there, and the directories on the way to it, stay.
  std::set<std::string> keep;
  if (keep_key) keep.insert(key);
  auto mark = [&](std::string k) {
    while (keep.insert(k).second && k != key) k = k.rfind('/') == std::string::npos ? "" : k.substr(0, k.rfind('/'));
  };
  if (this_layer_.count(key)) mark(key);
  for (auto [it, hi] = under(this_layer_, key); it != hi; ++it) mark(*it);
  if (!key.empty() && nodes_.count(key) && !keep.count(key)) return erase_tree(key);
  std::vector<std::string> removed;
  auto [it, hi] = under(nodes_, key);
  const std::string end = hi == nodes_.end() ? std::string() : hi->first;  // the first key past the range
  while (it != nodes_.end() && (end.empty() || it->first < end)) {
    if (keep.count(it->first)) {
      ++it;
      continue;
    }
    const std::string top = it->first;
    removed.push_back(top);
    erase_tree(top);
    it = nodes_.upper_bound(top);
  }
  return removed;
}

void LayerMerge::ensure_parents(const std::string& key, const std::string& where) {
  for (size_t pos = key.find('/'); pos != std::string::npos; pos = key.find('/', pos + 1)) {
    const std::string p = key.substr(0, pos);
    auto it = nodes_.find(p);
    if (it == nodes_.end()) {
      Node d;
      d.type = S_IFDIR;
      nodes_[p] = d;
    } else if (!is_dir(it->second.type)) {
      throw Error(where + "`" + p + "` is not a directory");
    }
  }
}

MergeStep LayerMerge::apply(const MergeEntry& e, uint64_t index) {
  const std::string at = where(e.path);
  std::vector<std::string> comps;
  if (!split_entry_path(e.path, comps)) throw Error(at + "absolute or `..` paths are not allowed in a layer");
  MergeStep step;
  if (comps.empty()) return step;  // the root itself
  const std::string parent = resolve(comps, comps.size() - 1, at);
  const std::string& name = comps.back();

  // Whiteouts (OCI image spec, layer.md "Whiteouts"): of lower layers only.
  if (name.starts_with(".wh.")) {
    step.whiteout = true;
    if (!parent.empty() && !nodes_.count(parent)) return step;  // nothing there to hide
    if (name == ".wh..wh..opq") {
      step.remove = remove_lower(parent, true);
      return step;
    }
    const std::string victim = name.substr(4);
    if (victim.empty() || victim == "." || victim == "..") throw Error(at + "malformed whiteout");
    step.remove = remove_lower(child_of(parent, victim), false);
    return step;
  }

  const unsigned type = e.type;
  if (e.hardlink.empty() && (type == S_IFCHR || type == S_IFBLK || type == S_IFSOCK ||
                             (type != S_IFREG && type != S_IFDIR && type != S_IFLNK && type != S_IFIFO))) {
    step.kind = MergeStep::Kind::Skipped;
    return step;
  }
  step.key = child_of(parent, name);
  Node n;
  n.type = type;
  n.perm = e.perm & 07777;
  n.mtime = e.mtime;
  n.xattrs = e.xattrs;
  n.layer = layer_no_;
  n.index = index;
  if (!e.hardlink.empty()) {
    std::vector<std::string> t;
    if (!split_entry_path(e.hardlink, t) || t.empty())
      throw Error(at + "hard link target " + util::quoted(e.hardlink) + " is outside the image");
    const std::string tkey = child_of(resolve(t, t.size() - 1, at), t.back());
    auto it = nodes_.find(tkey);
    if (it == nodes_.end() || is_dir(it->second.type))
      throw Error(at + "hard link target " + util::quoted(e.hardlink) + " does not exist or is a directory");
    n.type = 0;
    n.link = it->second.type == 0 ? it->second.link : tkey;  // to the first name of the file
    step.hardlink = n.link;
    if (at_or_under(step.hardlink, step.key))
      throw Error(at + "hard link target " + util::quoted(e.hardlink) + " is what the entry replaces");
  } else if (type == S_IFLNK) {
    n.link = e.symlink;
  }

  auto old = nodes_.find(step.key);
  this_layer_.insert(step.key);
  if (old != nodes_.end() && is_dir(old->second.type) && is_dir(n.type)) {
    old->second.perm = n.perm;  // directories merge
    old->second.xattrs = std::move(n.xattrs);
    old->second.mtime = n.mtime;
    old->second.layer = n.layer;
    old->second.index = n.index;
    step.kind = MergeStep::Kind::MergeDir;
    return step;
  }
  step.remove = erase_tree(step.key);
  ensure_parents(step.key, at);
  nodes_[step.key] = n;
  step.kind = MergeStep::Kind::Make;
  return step;
}

}  // namespace rt::image
