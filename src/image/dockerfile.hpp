// Dockerfiles (pure): the instructions of a file as Docker's reference
// reads them, and its variable substitution. What `rt build` will run.
//
// Read: parser directives (escape, syntax) at the top; comment lines,
// also between continued lines; the escape character at a line's end
// continues it; keywords in any case; leading --name=value flags; the JSON
// (exec) form of RUN, CMD, ENTRYPOINT and SHELL; heredocs of RUN, COPY and
// ADD. Anything else (an unknown keyword, a malformed flag or ENV, a
// heredoc never ended) is an rt::Error naming FILE:LINE.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rt::image {

// A heredoc of RUN, COPY or ADD: <<[-]["]WORD["] and the lines after the
// instruction up to one holding WORD alone.
struct Heredoc {
  std::string word;
  std::string body;         // its lines, each ending in a newline
  bool strip_tabs = false;  // <<-: leading tabs removed
  bool quoted = false;      // <<"WORD": no expansion in the body
};

struct Instruction {
  std::string keyword;                                     // upper case: FROM, RUN, COPY, ...
  int line = 0;                                            // where it starts in the file
  std::vector<std::pair<std::string, std::string>> flags;  // --from=stage ...
  std::string args;                                        // the rest, continuations joined
  bool exec_form = false;                                  // args was a JSON list of strings:
  std::vector<std::string> argv;                           // ... these
  std::vector<Heredoc> heredocs;                           // in the order they appear in args
};

struct Dockerfile {
  char escape = '\\';
  std::vector<std::pair<std::string, std::string>> directives;  // the parser directives read (name lower case)
  std::vector<Instruction> instructions;
};

// Throws rt::Error "FILE:LINE: WHY". ONBUILD's trigger is checked (not
// FROM, MAINTAINER or ONBUILD) and kept as its text in `args`.
Dockerfile parse_dockerfile(std::string_view text, const std::string& file);
// One instruction, as an ONBUILD trigger holds it (`where` names it in
// errors); throws rt::Error.
Instruction parse_instruction(std::string_view text, const std::string& where, char escape);

// What a variable expands to, or nullopt when it is not set.
using Lookup = std::function<std::optional<std::string>(const std::string& name)>;

// Docker's substitution in `word`: $NAME, ${NAME}, ${NAME:-default},
// ${NAME:+alternative}; ESCAPE$ is a literal $. Throws rt::Error naming
// `where` for a malformed ${...}.
std::string substitute(std::string_view word, const Lookup& lookup, char escape, const std::string& where);

// The NAME=VALUE pairs of ENV, LABEL and ARG. Values are read as a shell
// reads words ("..." and '...' quoting, ESCAPE taking the next character),
// with variables expanded through `lookup` when given (not inside '...').
// ENV also takes the old form ENV NAME VALUE; ARG's NAME alone has no
// value (nullopt). Throws rt::Error naming `where`.
enum class Pairs { Env, Label, Arg };
std::vector<std::pair<std::string, std::optional<std::string>>> key_values(std::string_view args, Pairs form,
                                                                           char escape, const std::string& where,
                                                                           const Lookup* lookup = nullptr);

// The words of `args` as key_values reads values (quotes, the escape
// character, variables through `lookup` when given): COPY's sources.
std::vector<std::string> split_words(std::string_view args, char escape, const std::string& where,
                                     const Lookup* lookup = nullptr);

// A build context's .dockerignore, as Docker reads it: one pattern a line
// (# comments, blank lines skipped), relative to the context (a leading /
// and ./ are dropped), * ? [...] within a path component, ** across any
// number of them, !PATTERN re-including what an earlier one excluded. The
// last pattern that matches a path or one of its parent directories
// decides.
class DockerIgnore {
public:
  static DockerIgnore parse(std::string_view text);
  // `path`: relative to the context, '/'-separated.
  bool excluded(std::string_view path) const;
  // Has `!` patterns: an excluded directory may still hold included
  // entries, so walkers go into it.
  bool reincludes() const {
    for (const auto& r : rules_)
      if (r.reinclude) return true;
    return false;
  }

private:
  struct Rule {
    std::vector<std::string> parts;
    bool reinclude = false;
  };
  std::vector<Rule> rules_;
};

}  // namespace rt::image
