// Apptainer definition files (pure): see definition.hpp.
#include "image/definition.hpp"

#include <algorithm>
#include <utility>

#include "rt/error.hpp"
#include "util/strings.hpp"

namespace rt::image {
namespace {

const std::set<std::string, std::less<>> kSections = {
    "setup",    "files",   "post",     "environment", "runscript", "startscript", "test",    "labels",
    "help",     "arguments", "appinstall", "appfiles", "appenv",   "apprun",      "applabels", "apphelp",
    "apptest",  "appstart"};

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

// A section header: `%name args`, the name a word at the line's start.
bool section_header(std::string_view line, std::string& name, std::string& args) {
  if (line.empty() || line[0] != '%') return false;
  size_t end = 1;
  while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
  if (end == 1) return false;
  name = util::ascii_lower(std::string(line.substr(1, end - 1)));
  args = util::trim(std::string(line.substr(end)));
  return true;
}

// The %arguments section's NAME=VALUE lines (found before anything else is
// read: the rest of the file is substituted from them).
std::map<std::string, std::string> argument_defaults(const std::vector<std::string_view>& lines,
                                                     const std::string& file) {
  std::map<std::string, std::string> out;
  bool in = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string name, args;
    if (section_header(lines[i], name, args)) {
      in = name == "arguments";
      continue;
    }
    if (!in) continue;
    std::string l = util::trim(std::string(lines[i]));
    if (l.empty() || l[0] == '#') continue;
    const size_t eq = l.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(file + ":" + std::to_string(i + 1) + ": %arguments takes NAME=VALUE lines, not `" + l + "`");
    std::string v = l.substr(eq + 1);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    out[util::trim(l.substr(0, eq))] = v;
  }
  return out;
}

// {{ NAME }} replaced, line by line (for the line numbers of errors).
std::string substitute_args(const std::vector<std::string_view>& lines, const std::string& file,
                            const std::map<std::string, std::string>& given,
                            const std::map<std::string, std::string>& defaults, std::set<std::string>& used) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    size_t at = 0;
    while (true) {
      const size_t open = l.find("{{", at);
      if (open == std::string_view::npos) break;
      const size_t close = l.find("}}", open + 2);
      if (close == std::string_view::npos) break;
      const std::string name = util::trim(std::string(l.substr(open + 2, close - open - 2)));
      const bool word = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                        std::all_of(name.begin(), name.end(), [](unsigned char c) {
                          return std::isalnum(c) || c == '_' || c == '-' || c == '.';
                        });
      out.append(l.substr(at, open - at));
      if (!word) {  // not a template: kept as written
        out.append(l.substr(open, close + 2 - open));
        at = close + 2;
        continue;
      }
      if (auto g = given.find(name); g != given.end()) {
        used.insert(name);
        out += g->second;
      } else if (auto d = defaults.find(name); d != defaults.end()) {
        out += d->second;
      } else {
        throw Error(file + ":" + std::to_string(i + 1) + ": `{{ " + name + " }}` has no value",
                    "give --build-arg " + name + "=VALUE, or a default in %arguments");
      }
      at = close + 2;
    }
    out.append(l.substr(at));
    out += '\n';
  }
  return out;
}

// Words as a shell reads simple ones: blanks separate, "..." and '...' quote.
std::vector<std::string> words_of(const std::string& line, const std::string& where) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        cur += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
      have = true;
    } else if (c == ' ' || c == '\t') {
      if (have) out.push_back(std::exchange(cur, {}));
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (quote) throw Error(where + ": a quote is not closed in `" + line + "`");
  if (have) out.push_back(cur);
  return out;
}

}  // namespace

const DefSection* DefStage::section(std::string_view name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

bool looks_like_definition(std::string_view text) {
  for (auto l : lines_of(text)) {
    std::string t = util::trim(std::string(l));
    if (t.empty() || t[0] == '#') continue;
    return util::ascii_lower(t).starts_with("bootstrap:");
  }
  return false;
}

Definition parse_definition(std::string_view text, const std::string& file,
                            const std::map<std::string, std::string>& args, std::set<std::string>& used) {
  const auto raw = lines_of(text);
  Definition def;
  def.text = substitute_args(raw, file, args, argument_defaults(raw, file), used);
  const auto lines = lines_of(def.text);
  DefStage* stage = nullptr;
  DefSection* section = nullptr;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int no = static_cast<int>(i) + 1;
    const std::string where = file + ":" + std::to_string(no);
    std::string name, sargs;
    if (section_header(lines[i], name, sargs)) {
      if (!kSections.count(name))
        throw Error(where + ": unknown section %" + name,
                    "sections are %setup %files %post %environment %runscript %startscript %test %labels %help "
                    "%arguments and the SCIF %app* sections");
      if (!stage) throw Error(where + ": %" + name + " before any header", "begin with `Bootstrap: docker` and `From:`");
      // A section given again is appended to the first (for %files and
      // the %app* sections: the one with the same arguments).
      const bool keyed = name == "files" || name.starts_with("app");
      auto same = std::find_if(stage->sections.begin(), stage->sections.end(), [&](const DefSection& s) {
        return s.name == name && (!keyed || s.args == sargs);
      });
      if (same != stage->sections.end()) {
        section = &*same;
      } else {
        stage->sections.push_back({name, sargs, "", no});
        section = &stage->sections.back();
      }
      continue;
    }
    const std::string t = util::trim(std::string(lines[i]));
    // In a section, every line is its own but one that begins a stage.
    if (section && !util::ascii_lower(std::string(lines[i])).starts_with("bootstrap:")) {
      section->body.append(lines[i]);
      section->body += '\n';
      continue;
    }
    if (t.empty() || t[0] == '#') continue;
    const size_t colon = t.find(':');
    if (colon == std::string::npos || colon == 0)
      throw Error(where + ": `" + t + "` is neither a `Key: value` header line nor a %section");
    const std::string key = util::ascii_lower(util::trim(t.substr(0, colon)));
    const std::string value = util::trim(t.substr(colon + 1));
    if (key == "bootstrap" && (!stage || section)) {
      def.stages.emplace_back();
      stage = &def.stages.back();
      stage->line = no;
      section = nullptr;
    } else if (!stage) {
      throw Error(where + ": the first header line must be `Bootstrap: AGENT`, not `" + t + "`");
    }
    if (stage->header.count(key)) throw Error(where + ": `" + key + "` is given twice in this stage's header");
    stage->header[key] = value;
  }
  if (def.stages.empty()) throw Error(file + ": an empty definition file", "it needs `Bootstrap:` and `From:` lines");
  return def;
}

std::vector<std::pair<std::string, std::string>> def_files(const DefSection& s, const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  int no = s.line;
  for (const auto& l : util::split(s.body, '\n')) {
    ++no;
    std::string t = util::trim(l);
    if (t.empty() || t[0] == '#') continue;
    const std::string at = where + ":" + std::to_string(no);
    auto w = words_of(t, at);
    if (w.size() > 2) throw Error(at + ": %files takes SOURCE [DESTINATION] a line, not `" + t + "`");
    out.emplace_back(w[0], w.size() == 2 ? w[1] : w[0]);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> def_labels(const DefSection& s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& l : util::split(s.body, '\n')) {
    std::string t = util::trim(l);
    if (t.empty() || t[0] == '#') continue;
    const size_t sp = t.find_first_of(" \t");
    out.emplace_back(t.substr(0, sp), sp == std::string::npos ? "" : util::trim(t.substr(sp)));
  }
  return out;
}

}  // namespace rt::image
