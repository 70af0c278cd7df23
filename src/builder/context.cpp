// rt build: COPY, ADD and WORKDIR: files from the context, a stage or an image (host).
#include "builder/builder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace rt::builder {

void Builder::do_copy(Stage& s, const Instruction& ins) {
  const bool add = ins.keyword == "ADD";
  std::string from, checksum;
  bool parents = false;
  image::CopyOptions copt;
  for (const auto& [k, v] : ins.flags) {
    if (k == "from" && !add) {
      from = v;
    } else if (k == "chown") {
      util::info(where(ins) + ": --chown=" + v + " is recorded as a no-op (root emulation: one owner)");
    } else if (k == "chmod") {
      if (v.empty() || v.size() > 4 || v.find_first_not_of("01234567") != std::string::npos)
        throw Error(where(ins) + ": --chmod takes an octal mode, not `" + v + "`");
      copt.chmod = static_cast<unsigned>(std::stoul(v, nullptr, 8));
    } else if (k == "link") {  // the same tree either way: the layer is its own already
    } else if (k == "parents" && !add) {
      parents = v.empty() || v == "true";
    } else if (k == "checksum" && add) {
      checksum = v;
    } else {
      throw Error(where(ins) + ": " + ins.keyword + " --" + k + " is not supported");
    }
  }
  const image::Lookup look = lookup_for(&s);
  std::vector<std::string> words;
  if (ins.exec_form)
    for (const auto& w : ins.argv) words.push_back(image::substitute(w, look, df_.escape, where(ins)));
  else
    words = image::split_words(ins.args, df_.escape, where(ins), &look);
  if (words.size() < 2) throw Error(where(ins) + ": " + ins.keyword + " needs SOURCE... DEST");
  std::string dest = words.back();
  const std::string dest_given = dest;
  words.pop_back();
  // COPY <<NAME DEST: files of the heredocs' bodies, mode 0644, from a
  // scratch directory of their own; variables expanded as in the
  // instruction's words unless the word is quoted (<<"NAME", <<'NAME').
  std::optional<app::WorkDir> inline_dir;
  std::optional<image::SourceTree> inline_src;
  if (!ins.heredocs.empty()) {
    inline_dir.emplace(store_.tmp_dir(), "heredoc");
    for (auto& w : words) {
      if (!w.starts_with("<<"))
        throw Error(where(ins) + ": " + ins.keyword + " of heredocs and other sources at once is not supported",
                    "give the heredocs a " + ins.keyword + " of their own");
      std::string name = w.substr(w.starts_with("<<-") ? 3 : 2);
      auto d = std::find_if(ins.heredocs.begin(), ins.heredocs.end(),
                            [&](const image::Heredoc& h) { return h.word == name; });
      if (d == ins.heredocs.end() || name.find('/') != std::string::npos || name == "." || name == "..")
        throw Error(where(ins) + ": `" + w + "` is not a heredoc of this line");
      const std::string file = inline_dir->path() + "/" + name;
      util::UniqueFd fd = util::open_fd(file, O_WRONLY | O_CREAT | O_EXCL, 0644);
      util::write_all(fd.get(), d->quoted ? d->body : image::substitute(d->body, look, df_.escape, where(ins)), file);
      w = name;
    }
    inline_src.emplace(inline_dir->path());
  }
  for (const auto& w : words)
    if (w.find("://") != std::string::npos)
      throw Error(where(ins) + ": " + ins.keyword + " of a URL (`" + w + "`) is not supported",
                  "download it with RUN curl or wget, or put it in the build context");
  const std::string workdir = cfg_string(s.state, "WorkingDir");
  const bool dest_dir_syntax = dest.ends_with("/") || dest == "." || dest.ends_with("/.");
  if (dest.empty() || dest.front() != '/') dest = (workdir.empty() ? "/" : workdir) + "/" + dest;
  dest = util::normalize_path(dest, "/");

  // Where the sources come from: the context, or a stage's tree.
  const image::SourceTree* src = inline_src ? &*inline_src : &*context_;
  std::optional<image::SourceTree> stage_src;
  Stage* from_stage = nullptr;
  std::string src_key = "context";
  if (!from.empty() && inline_src) throw Error(where(ins) + ": --from with heredocs is not supported");
  if (!from.empty()) {
    Stage* b = earlier_stage(from, s.index);
    if (!b) {
      // An image, as FROM would take it: a stage of its own, unnamed.
      auto& img = from_images_[from];
      if (!img) {
        img = std::make_unique<Stage>();
        img->index = -1;
        set_base(*img, from);
      }
      b = img.get();
    }
    // Its key says what its tree holds: the tree is made only on a miss.
    from_stage = b;
    src_key = "stage " + b->state.key;
  }
  std::vector<std::string> rels;
  auto match = [&] {
    rels.clear();
    for (const auto& w : words)
      for (auto& r : src->match(w, where(ins))) rels.push_back(std::move(r));
  };
  if (!from_stage) match();
  const std::string shown_step =
      ins.keyword + (from.empty() ? "" : " --from=" + from) + " " + util::join(words, ' ') + " " + dest_given;
  note_step(s, shown_step);
  if (!checksum.empty()) {
    // ADD --checksum: the one file it names must hash to it.
    if (rels.size() != 1 || src->is_dir(rels[0])) throw Error(where(ins) + ": ADD --checksum takes one file");
    auto f = util::open_in_root(src->fd(), rels[0], O_RDONLY);
    if (!f.fd) throw SysError(f.err, "open", src->path() + "/" + rels[0], "");
    image::Sha256 h;
    std::vector<char> buf(1 << 20);
    for (size_t n; (n = util::read_some(f.fd.get(), buf.data(), buf.size(), rels[0])) > 0;) h.update(buf.data(), n);
    const std::string got = h.digest();
    if (got != checksum)
      throw Error(where(ins) + ": `" + rels[0] + "` hashes to " + got + ", not the --checksum " + checksum);
  }
  const std::string content = from_stage ? src_key : src->digest(rels);
  json extra = {from_stage ? json(words) : json(rels), content, copt.chmod ? static_cast<int>(*copt.chmod) : -1,
                dest_dir_syntax, parents};
  fs_step(s, shown_step, extra.dump(), [&] {
    if (from_stage) {
      materialize(*from_stage);
      stage_src.emplace(from_stage->rootfs);
      src = &*stage_src;
      match();
    }
    const bool into_dir = dest_dir_syntax || rels.size() > 1 || image::dir_in_tree(s.root.get(), dest);
    if (rels.size() > 1 && !dest_dir_syntax && !image::dir_in_tree(s.root.get(), dest))
      throw Error(where(ins) + ": with more than one source the destination must end with /");
    for (const auto& r : rels) {
      // ADD unpacks a local tar archive (plain, gzip or zstd) into DEST.
      if (add && !src->is_dir(r)) {
        app::WorkDir scratch(store_.tmp_dir(), "build");
        if (image::add_archive(*src, r, s.root.get(), dest, scratch.path(), copt, where(ins), &step_xattrs_)) continue;
      }
      // --parents: the source's own directories come along below DEST.
      const std::string parent = util::dir_name("/" + r);
      if (parents && parent != "/") {
        image::copy_into(*src, r, s.root.get(), util::normalize_path(dest + parent, "/"), true, copt, where(ins));
        continue;
      }
      image::copy_into(*src, r, s.root.get(), dest, into_dir, copt, where(ins));
    }
  });
}

void Builder::do_workdir(Stage& s, const Instruction& ins) {
  const image::Lookup look = lookup_for(&s);
  std::string dir = image::substitute(util::trim(ins.args), look, df_.escape, where(ins));
  const std::string cur = cfg_string(s.state, "WorkingDir");
  dir = util::normalize_path(dir, cur.empty() ? "/" : cur);
  cfg_of(s.state)["WorkingDir"] = dir;
  const std::string shown = "WORKDIR " + dir;
  note_step(s, shown);
  fs_step(s, shown, "", [&] {
    std::string prefix;
    for (const auto& c : util::split(dir, '/')) {
      if (c.empty()) continue;
      const std::string parent = prefix.empty() ? "/" : prefix;
      prefix += "/" + c;
      if (image::dir_in_tree(s.root.get(), prefix)) continue;
      auto p = util::open_in_root(s.root.get(), parent, O_PATH | O_DIRECTORY);
      if (!p.fd || ::mkdirat(p.fd.get(), c.c_str(), 0755) != 0)
        throw SysError{p.fd ? errno : p.err, "mkdir", where(ins) + ": " + prefix};
    }
  });
}

}  // namespace rt::builder
