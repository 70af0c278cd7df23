// Dockerfiles and .dockerignore files as rt build reads them
// (image/dockerfile): the parser, the NAME=VALUE forms, word splitting and
// substitution with variables set, and context patterns.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "image/dockerfile.hpp"
#include "rt/error.hpp"

using namespace rt::image;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Lookup lookup = [](const std::string& name) -> std::optional<std::string> {
    if (name.empty() || name[0] == 'U') return std::nullopt;  // some unset
    return "v-" + name;
  };
  try {
    const Dockerfile df = parse_dockerfile(text, "Dockerfile");
    for (const auto& ins : df.instructions) {
      const std::string where = "Dockerfile:" + std::to_string(ins.line);
      try {
        if (ins.keyword == "ENV") key_values(ins.args, Pairs::Env, df.escape, where, &lookup);
        if (ins.keyword == "ARG") key_values(ins.args, Pairs::Arg, df.escape, where, &lookup);
        if (ins.keyword == "LABEL") key_values(ins.args, Pairs::Label, df.escape, where, &lookup);
        split_words(ins.args, df.escape, where, &lookup);
        substitute(ins.args, lookup, df.escape, where);
      } catch (const rt::Error&) {
      }
    }
  } catch (const rt::Error&) {
  }
  const DockerIgnore ignore = DockerIgnore::parse(text);
  for (const char* path : {"a", "a/b/c.log", "secret/key", ".git/config", "deep/x/y/z/w.txt"}) ignore.excluded(path);
  return 0;
}
