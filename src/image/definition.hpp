// Apptainer definition files (pure): a header of `Key: value` lines and
// %sections, one or more stages, read as Apptainer's own parser reads
// them. What `rt build` runs on its one builder, beside Dockerfiles.
//
// Read: `{{ NAME }}` replaced first, from --build-arg values and the
// %arguments section's `NAME=default` lines; then comments (#) and blank
// lines of the header skipped, header keys in any case, a new stage at
// each `Bootstrap:` after the first stage's sections, section names in any
// case with the rest of their line kept (`%post -c /bin/bash`,
// `%files from build`, `%apprun NAME`), a section given twice appended to
// the first. An empty file, a header line that is no `Key: value`, an
// unknown section, a `{{ NAME }}` with no value are an rt::Error naming
// FILE:LINE.
#pragma once
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace rt::image {

struct DefSection {
  std::string name;  // lower case, without %: post, files, appinstall, ...
  std::string args;  // the rest of its line, trimmed
  std::string body;  // its lines, each ending in a newline
  int line = 0;      // of the %name line
};

struct DefStage {
  std::map<std::string, std::string> header;  // keys lower case: bootstrap, from, stage, includecmd, ...
  int line = 0;                               // of its first header line
  std::vector<DefSection> sections;
  // The section named `name` (and, for %app* sections and %files, with
  // those args), or nullptr.
  const DefSection* section(std::string_view name) const;
  std::string value(const std::string& key) const {
    auto it = header.find(key);
    return it == header.end() ? std::string() : it->second;
  }
};

struct Definition {
  std::string text;  // the file as substituted: what SIF files and /.singularity.d/Singularity keep
  std::vector<DefStage> stages;
};

// Whether `text` reads as a definition file rather than a Dockerfile: its
// first line that is neither blank nor a comment is a `Bootstrap:` header.
bool looks_like_definition(std::string_view text);

// `args`: --build-arg values; the names used are added to `used`. Throws
// rt::Error "FILE:LINE: WHY".
Definition parse_definition(std::string_view text, const std::string& file,
                            const std::map<std::string, std::string>& args, std::set<std::string>& used);

// The lines of a %files section: SOURCE [DEST], DEST defaulting to SOURCE;
// words may be quoted with "..." or '...'. Throws rt::Error naming `where`.
std::vector<std::pair<std::string, std::string>> def_files(const DefSection& s, const std::string& where);

// The lines of a %labels section: NAME VALUE (the rest of the line).
std::vector<std::pair<std::string, std::string>> def_labels(const DefSection& s);

}  // namespace rt::image
