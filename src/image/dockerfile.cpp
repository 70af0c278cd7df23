// Dockerfiles (pure); see dockerfile.hpp.
#include "image/dockerfile.hpp"

#include <fnmatch.h>
#include <algorithm>

#include <cctype>
#include <nlohmann/json.hpp>

#include "rt/error.hpp"

namespace rt::image {
namespace {

constexpr const char* kKeywords[] = {"FROM", "RUN",        "CMD",         "LABEL",  "EXPOSE",     "ENV",
                                     "ADD",  "COPY",       "ENTRYPOINT",  "VOLUME", "USER",       "WORKDIR",
                                     "ARG",  "STOPSIGNAL", "HEALTHCHECK", "SHELL",  "MAINTAINER", "ONBUILD"};
// Where the JSON (exec) form may stand instead of a shell command line.
constexpr const char* kExecForm[] = {"RUN", "CMD", "ENTRYPOINT", "SHELL", "COPY", "ADD", "VOLUME"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_comment(std::string_view line) {
  line = trim(line);
  return !line.empty() && line.front() == '#';
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool valid_name(std::string_view n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  return std::all_of(n.begin(), n.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// A parser directive line ("# escape=`"): its name (lower case) and value.
std::optional<std::pair<std::string, std::string>> directive(std::string_view line) {
  line = trim(line);
  if (line.empty() || line.front() != '#') return std::nullopt;
  line = trim(line.substr(1));
  const size_t eq = line.find('=');
  if (eq == std::string_view::npos) return std::nullopt;
  std::string name(trim(line.substr(0, eq)));
  std::string value(trim(line.substr(eq + 1)));
  if (name.empty() || value.empty() ||
      !std::all_of(name.begin(), name.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::pair{name, value};
}

// Shell-like words: unquoted whitespace separates; '...' keeps everything;
// "..." and unquoted text expand variables (when `lookup` is given); the
// escape character takes the next character as it is.
std::vector<std::string> words(std::string_view s, char escape, const Lookup* lookup, const std::string& where) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
      ++i;
      continue;
    }
    in_word = true;
    if (c == escape && i + 1 < s.size()) {
      cur += s[i + 1];
      i += 2;
    } else if (c == '\'') {
      const size_t end = s.find('\'', i + 1);
      if (end == std::string_view::npos) throw Error(where + ": a ' is not closed");
      cur += s.substr(i + 1, end - i - 1);
      i = end + 1;
    } else if (c == '"') {
      std::string inner;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != '"'; ++j) {
        if (s[j] == escape && j + 1 < s.size() && (s[j + 1] == '"' || s[j + 1] == escape)) ++j;
        inner += s[j];
      }
      if (j >= s.size()) throw Error(where + ": a \" is not closed");
      cur += lookup ? substitute(inner, *lookup, escape, where) : inner;
      i = j + 1;
    } else {
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j])) && s[j] != '\'' && s[j] != '"' &&
             s[j] != escape)
        ++j;
      if (j == i) ++j;  // a lone escape at the end
      const std::string_view part = s.substr(i, j - i);
      cur += lookup ? substitute(part, *lookup, escape, where) : std::string(part);
      i = j;
    }
  }
  if (in_word) out.push_back(std::move(cur));
  return out;
}

}  // namespace

Dockerfile parse_dockerfile(std::string_view text, const std::string& file) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at <= text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view l = text.substr(at, nl - at);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    lines.push_back(l);
    at = nl + 1;
  }
  Dockerfile df;
  size_t i = 0;
  // Parser directives: only before anything else.
  for (; i < lines.size(); ++i) {
    auto d = directive(lines[i]);
    if (!d) break;
    df.directives.emplace_back(d->first, d->second);
    if (d->first == "escape") {
      if (d->second != "\\" && d->second != "`")
        throw Error(file + ":" + std::to_string(i + 1) + ": the escape directive takes \\ or `, not `" + d->second +
                    "`");
      df.escape = d->second[0];
    }
  }
  auto continued = [&](std::string_view l, std::string& into) {
    std::string_view t = l;
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
    if (!t.empty() && t.back() == df.escape) {
      into += t.substr(0, t.size() - 1);
      return true;
    }
    into += l;
    return false;
  };
  for (; i < lines.size(); ++i) {
    if (trim(lines[i]).empty() || is_comment(lines[i])) continue;
    const int first = static_cast<int>(i) + 1;
    const std::string where = file + ":" + std::to_string(first);
    std::string joined;
    bool more = continued(lines[i], joined);
    while (more && i + 1 < lines.size()) {
      ++i;
      // Comments and empty lines between continued lines are dropped, as Docker does.
      if (is_comment(lines[i]) || trim(lines[i]).empty()) continue;
      more = continued(lines[i], joined);
    }
    std::string_view rest = trim(joined);
    size_t sp = 0;
    while (sp < rest.size() && !std::isspace(static_cast<unsigned char>(rest[sp]))) ++sp;
    Instruction ins;
    const std::string given(rest.substr(0, sp));
    ins.keyword = upper(given);
    ins.line = first;
    rest = trim(rest.substr(sp));
    if (std::find(std::begin(kKeywords), std::end(kKeywords), ins.keyword) == std::end(kKeywords))
      throw Error(where + ": unknown or unsupported instruction `" + given + "`");
    while (rest.starts_with("--")) {
      size_t end = 0;
      while (end < rest.size() && !std::isspace(static_cast<unsigned char>(rest[end]))) ++end;
      const std::string_view flag = rest.substr(2, end - 2);
      const size_t eq = flag.find('=');
      const std::string name(flag.substr(0, eq));
      if (name.empty() || !std::all_of(name.begin(), name.end(),
                                       [](char c) { return std::islower(static_cast<unsigned char>(c)) || c == '-'; }))
        throw Error(where + ": `--" + std::string(flag) + "` is not a flag of " + ins.keyword);
      ins.flags.emplace_back(name, eq == std::string_view::npos ? "" : std::string(flag.substr(eq + 1)));
      rest = trim(rest.substr(end));
    }
    // Heredocs (<<WORD, <<-WORD, <<"WORD", <<'WORD'): their bodies are the
    // lines that follow, each up to a line holding WORD alone.
    if (ins.keyword == "RUN" || ins.keyword == "COPY" || ins.keyword == "ADD") {
      for (size_t at = rest.find("<<"); at != std::string_view::npos; at = rest.find("<<", at + 2)) {
        size_t w = at + 2;
        if (w < rest.size() && rest[w] == '<') {  // a here-string (<<<): the shell's
          at = w;
          continue;
        }
        const bool strip_tabs = w < rest.size() && rest[w] == '-';
        if (strip_tabs) ++w;
        const bool quoted = w < rest.size() && (rest[w] == '"' || rest[w] == '\'');
        if (quoted) ++w;
        size_t e = w;
        while (e < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[e])) || rest[e] == '_' ||
                                   (e > w && (rest[e] == '.' || rest[e] == '-'))))
          ++e;
        if (e == w || !(std::isalpha(static_cast<unsigned char>(rest[w])) || rest[w] == '_')) continue;
        Heredoc doc{std::string(rest.substr(w, e - w)), "", strip_tabs, quoted};
        bool closed = false;
        while (++i < lines.size()) {
          std::string_view l = lines[i];
          if (strip_tabs)
            while (!l.empty() && l.front() == '\t') l.remove_prefix(1);
          if (l == doc.word) {
            closed = true;
            break;
          }
          doc.body += std::string(l) + "\n";
        }
        if (!closed) throw Error(where + ": the heredoc <<" + doc.word + " has no line `" + doc.word + "` ending it");
        ins.heredocs.push_back(std::move(doc));
      }
    }
    if (!rest.empty() && rest.front() == '[' &&
        std::find(std::begin(kExecForm), std::end(kExecForm), ins.keyword) != std::end(kExecForm)) {
      auto j = nlohmann::json::parse(rest, nullptr, false);
      if (j.is_array() && std::all_of(j.begin(), j.end(), [](const auto& e) { return e.is_string(); })) {
        ins.exec_form = true;
        for (const auto& e : j) ins.argv.push_back(e.get<std::string>());
      }
    }
    if (ins.keyword == "SHELL" && !ins.exec_form)
      throw Error(where + ": SHELL takes a JSON list, e.g. SHELL [\"/bin/bash\", \"-c\"]");
    ins.args = std::string(rest);
    if (ins.args.empty() && ins.keyword != "CMD" && ins.keyword != "ENTRYPOINT")
      throw Error(where + ": " + ins.keyword + " needs arguments");
    if (ins.keyword == "ONBUILD") {
      const std::string trigger = upper(std::string(rest.substr(0, rest.find_first_of(" \t"))));
      if (trigger == "ONBUILD" || trigger == "FROM" || trigger == "MAINTAINER")
        throw Error(where + ": ONBUILD " + trigger + " is not allowed");
    }
    df.instructions.push_back(std::move(ins));
  }
  if (df.instructions.empty() || df.instructions.front().keyword != "FROM") {
    for (const auto& ins : df.instructions)
      if (ins.keyword == "FROM") return df;
    throw Error(file + ": no FROM instruction", "a Dockerfile starts with FROM IMAGE (or FROM scratch)");
  }
  return df;
}

Instruction parse_instruction(std::string_view text, const std::string& where, char escape) {
  std::string file = std::string(escape == '`' ? "# escape=`\n" : "") + "FROM scratch\n" + std::string(text);
  Dockerfile df = parse_dockerfile(file, where);
  if (df.instructions.size() != 2) throw Error(where + ": `" + std::string(text) + "` is not one instruction");
  Instruction ins = std::move(df.instructions[1]);
  ins.line = 1;
  return ins;
}

std::string substitute(std::string_view word, const Lookup& lookup, char escape, const std::string& where) {
  std::string out;
  for (size_t i = 0; i < word.size();) {
    const char c = word[i];
    if (c == escape && i + 1 < word.size() && word[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (c != '$' || i + 1 >= word.size()) {
      out += c;
      ++i;
      continue;
    }
    if (word[i + 1] == '{') {
      size_t depth = 1, j = i + 2;
      for (; j < word.size() && depth; ++j) {
        if (word[j] == '{') ++depth;
        if (word[j] == '}') --depth;
      }
      if (depth) throw Error(where + ": `" + std::string(word.substr(i)) + "`: a ${ is not closed");
      const std::string_view inner = word.substr(i + 2, j - 1 - (i + 2));
      size_t n = 0;
      while (n < inner.size() && (std::isalnum(static_cast<unsigned char>(inner[n])) || inner[n] == '_')) ++n;
      const std::string name(inner.substr(0, n));
      if (!valid_name(name)) throw Error(where + ": `${" + std::string(inner) + "}` names no variable");
      const std::optional<std::string> v = lookup(name);
      std::string_view op = inner.substr(n);
      if (op.empty()) {
        out += v.value_or("");
      } else {
        const bool colon = op.front() == ':';
        if (colon) op.remove_prefix(1);
        if (op.empty() || (op.front() != '-' && op.front() != '+'))
          throw Error(where + ": `${" + std::string(inner) + "}`: only ${NAME:-word} and ${NAME:+word} are supported");
        const bool set = v && (!colon || !v->empty());
        const std::string alt = substitute(op.substr(1), lookup, escape, where);
        out += op.front() == '-' ? (set ? *v : alt) : (set ? alt : "");
      }
      i = j;
    } else if (std::isalpha(static_cast<unsigned char>(word[i + 1])) || word[i + 1] == '_') {
      size_t j = i + 1;
      while (j < word.size() && (std::isalnum(static_cast<unsigned char>(word[j])) || word[j] == '_')) ++j;
      out += lookup(std::string(word.substr(i + 1, j - i - 1))).value_or("");
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::optional<std::string>>> key_values(std::string_view args, Pairs form,
                                                                           char escape, const std::string& where,
                                                                           const Lookup* lookup) {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  args = trim(args);
  size_t sp = 0;
  while (sp < args.size() && !std::isspace(static_cast<unsigned char>(args[sp]))) ++sp;
  if (form != Pairs::Arg && args.substr(0, sp).find('=') == std::string_view::npos) {
    // ENV NAME VALUE, LABEL NAME VALUE (the old forms): the rest of the
    // line is the value.
    const char* what = form == Pairs::Env ? "ENV" : "LABEL";
    const std::string name(args.substr(0, sp));
    if (form == Pairs::Env && !valid_name(name)) throw Error(where + ": `" + name + "` is not a variable name");
    if (sp == args.size())
      throw Error(where + ": " + what + " " + name + " has no value",
                  std::string("write ") + what + " " + name + "=VALUE");
    std::string value;
    for (const auto& w : words(args.substr(sp), escape, lookup, where)) value += (value.empty() ? "" : " ") + w;
    out.emplace_back(name, value);
    return out;
  }
  for (const auto& w : words(args, escape, lookup, where)) {
    const size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    if (name.empty() || (form != Pairs::Label && !valid_name(name)))
      throw Error(where + ": `" + w + "` is not NAME=VALUE");
    if (eq == std::string::npos) {
      if (form != Pairs::Arg) throw Error(where + ": `" + w + "` is not NAME=VALUE");
      out.emplace_back(name, std::nullopt);
    } else {
      out.emplace_back(name, w.substr(eq + 1));
    }
  }
  return out;
}

std::vector<std::string> split_words(std::string_view args, char escape, const std::string& where,
                                     const Lookup* lookup) {
  return words(args, escape, lookup, where);
}

namespace {

// The components of a relative path, with "." and empty ones dropped and
// ".." taking one back (never above the context).
std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= path.size();) {
    size_t slash = path.find('/', at);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view c = path.substr(at, slash - at);
    if (c == "..") {
      if (!out.empty()) out.pop_back();
    } else if (!c.empty() && c != ".") {
      out.emplace_back(c);
    }
    at = slash + 1;
  }
  return out;
}

// Pattern components against path components; ** matches any number of them.
bool match_parts(const std::vector<std::string>& pat, size_t p, const std::vector<std::string>& path, size_t i) {
  if (p == pat.size()) return i == path.size();
  if (pat[p] == "**") {
    for (size_t k = i; k <= path.size(); ++k)
      if (match_parts(pat, p + 1, path, k)) return true;
    return false;
  }
  return i < path.size() && ::fnmatch(pat[p].c_str(), path[i].c_str(), 0) == 0 && match_parts(pat, p + 1, path, i + 1);
}

}  // namespace

DockerIgnore DockerIgnore::parse(std::string_view text) {
  DockerIgnore d;
  for (size_t at = 0; at <= text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = trim(text.substr(at, nl - at));
    at = nl + 1;
    if (line.empty() || line.front() == '#') continue;
    Rule r;
    if (line.front() == '!') {
      r.reinclude = true;
      line = trim(line.substr(1));
    }
    r.parts = components(line);
    if (!r.parts.empty()) d.rules_.push_back(std::move(r));
  }
  return d;
}

bool DockerIgnore::excluded(std::string_view path) const {
  const std::vector<std::string> parts = components(path);
  bool out = false;
  for (const auto& r : rules_) {
    bool hit = false;
    for (size_t n = parts.size(); n > 0 && !hit; --n)  // the path, then its parents
      hit = match_parts(r.parts, 0, std::vector<std::string>(parts.begin(), parts.begin() + static_cast<long>(n)), 0);
    if (hit) out = !r.reinclude;
  }
  return out;
}

}  // namespace rt::image
