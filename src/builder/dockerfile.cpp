// rt build: the Dockerfile read, its arguments and its stages planned (host).
#include "builder/builder.hpp"

#include <unistd.h>

namespace rt::builder {

void Builder::read_dockerfile() {
  // rt build -t NAME FILE: the file (a definition file, say) in the
  // working directory as the context.
  if (o_.file.empty() && !o_.context.empty() && !util::is_directory(o_.context) && util::path_exists(o_.context)) {
    o_.file = o_.context;
    o_.context = ".";
  }
  std::string ctx = o_.context.empty() ? "." : o_.context;
  if (!util::is_directory(ctx)) throw Error("build context `" + ctx + "` is not a directory");
  std::string text;
  if (o_.file == "-") {
    file_shown_ = "Dockerfile (stdin)";
    text = util::read_fd(0, "stdin", 1 << 20);
  } else {
    const std::string f = o_.file.empty() ? ctx + "/Dockerfile" : o_.file;
    file_shown_ = f;
    auto t = util::read_file_if_exists(f, 1 << 20);
    if (!t) throw Error("cannot read the Dockerfile `" + f + "`", o_.file.empty() ? "name it with -f FILE" : "");
    text = *t;
  }
  if (read_definition(text)) return;
  df_ = image::parse_dockerfile(text, file_shown_);
  std::optional<image::DockerIgnore> ignore;
  if (auto t = util::read_regular_if_exists(ctx + "/.dockerignore", 1 << 20)) ignore = image::DockerIgnore::parse(*t);
  context_.emplace(ctx, std::move(ignore));
}

std::optional<std::string> Builder::arg_value(const std::string& name, const std::optional<std::string>& dflt) {
  auto g = given_args_.find(name);
  if (g != given_args_.end()) {
    used_args_.insert(name);
    return g->second;
  }
  return dflt;
}

image::Lookup Builder::lookup_for(const Stage* s) {
  return [this, s](const std::string& name) -> std::optional<std::string> {
    if (s) {
      for (const auto& e : cfg_env(s->state))
        if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
          return e.substr(name.size() + 1);
      auto a = s->args.find(name);
      if (a != s->args.end()) return a->second;
      return std::nullopt;
    }
    auto a = global_args_.find(name);
    return a != global_args_.end() ? a->second : std::nullopt;
  };
}

Stage* Builder::target_stage() {
  if (o_.target.empty()) return &stages_.back();
  for (auto& s : stages_)
    if (s.name == lower(o_.target)) return &s;
  throw Error("--target: " + file_shown_ + " has no stage `" + o_.target + "`");
}

Stage* Builder::earlier_stage(const std::string& name, int before) {
  for (auto& st : stages_)
    if (st.index < before && (st.name == lower(name) || std::to_string(st.index) == name)) return &st;
  return nullptr;
}

void Builder::plan_stages() {
  const char esc = df_.escape;
  Stage* cur = nullptr;
  for (const auto& ins : df_.instructions) {
    if (ins.keyword == "FROM") {
      Stage s;
      s.index = static_cast<int>(stages_.size());
      s.from = &ins;
      for (const auto& [k, v] : ins.flags)
        if (k != "platform") throw Error(where(ins) + ": FROM has no flag --" + k);
      auto w = image::split_words(ins.args, esc, where(ins));
      if (w.size() == 3 && lower(w[1]) == "as")
        s.name = lower(w[2]);
      else if (w.size() != 1)
        throw Error(where(ins) + ": FROM takes IMAGE [AS NAME]");
      stages_.push_back(std::move(s));
      cur = &stages_.back();
      continue;
    }
    if (!cur) {
      if (ins.keyword != "ARG")
        throw Error(where(ins) + ": only ARG may come before the first FROM, not " + ins.keyword);
      const image::Lookup look = lookup_for(nullptr);
      for (auto& [k, v] : image::key_values(ins.args, image::Pairs::Arg, esc, where(ins), &look))
        global_args_[k] = arg_value(k, v);
      continue;
    }
    cur->body.push_back(&ins);
  }
  // The target and what it needs: stages named by FROM and COPY --from.
  Stage* target = target_stage();
  std::function<void(Stage&)> need = [&](Stage& s) {
    if (s.needed) return;
    s.needed = true;
    const image::Lookup look = lookup_for(nullptr);
    auto w = image::split_words(s.from->args, esc, where(*s.from), &look);
    if (Stage* b = earlier_stage(w[0], s.index)) need(*b);
    for (const Instruction* i : s.body)
      for (const auto& [k, v] : i->flags) {
        if (i->keyword == "RUN" && k == "mount")
          for (const auto& part : util::split(v, ','))
            if (part.starts_with("from="))
              if (Stage* b = earlier_stage(part.substr(5), s.index)) need(*b);
        if ((i->keyword == "COPY" || i->keyword == "ADD") && k == "from") {
          if (v.find('$') != std::string::npos)
            throw Error(where(*i) + ": " + i->keyword + " --from=" + v + ": variables are not expanded in --from",
                        "name the stage or image itself (or use ARG in a FROM line and --from that stage)");
          if (Stage* b = earlier_stage(v, s.index)) need(*b);
        }
      }
  };
  need(*target);
  stages_.resize(static_cast<size_t>(target->index) + 1);  // later stages are not built
  for (const auto& s : stages_)
    if (s.needed) steps_ += 1 + static_cast<int>(s.body.size());
}

}  // namespace rt::builder
