// The definition and labels rt writes into a SIF file, from the image's
// config: the %environment and %runscript sections are run by /bin/sh here,
// as Apptainer runs them.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "image/child.hpp"
#include "image/sif_definition.hpp"
#include "rt/error.hpp"

using rt::image::sif_metadata;

namespace {

// The lines of `section` in `def`, up to the next section.
std::string section(const std::string& def, const std::string& name) {
  size_t at = def.find("\n%" + name + "\n");
  if (at == std::string::npos) return "";
  at += name.size() + 3;
  std::string s = def.substr(at, def.find("\n%", at) - at + 1);
  while (s.ends_with("\n\n")) s.pop_back();  // the blank line between sections
  return s;
}

// What /bin/sh prints running `script` with `args`.
std::string sh(const std::string& script, std::vector<std::string> args = {}) {
  int out = ::memfd_create("out", MFD_CLOEXEC);
  REQUIRE(out >= 0);
  std::vector<std::string> argv = {"/bin/sh", "-c", script, "sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  CHECK(rt::image::run_program(argv, {.out = out}) == 0);
  std::string text(4096, '\0');
  const ssize_t n = ::pread(out, text.data(), text.size(), 0);
  ::close(out);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

}  // namespace

TEST_CASE("sif_metadata: the definition's environment and runscript run as the config says", "[image][sif]") {
  const nlohmann::json config = {
      {"architecture", "amd64"},
      {"config",
       {{"Env", {"PATH=/opt/x/bin:/usr/bin", "QUOTED=it's \"so\" $HOME", "BAD-NAME=1"}},
        {"Entrypoint", {"printf", "[%s]"}},
        {"Cmd", {"a", "b c"}},
        {"Labels", {{"org.opencontainers.image.title", "demo"}, {"maintainer", "someone\nelse"}}}}}};
  const auto m = sif_metadata(config.dump(), "c.json", "demo:1");
  CHECK(m.definition.starts_with("Bootstrap: docker\nFrom: demo:1\n"));
  CHECK(nlohmann::json::parse(m.labels) ==
        nlohmann::json{{"org.opencontainers.image.title", "demo"}, {"maintainer", "someone\nelse"}});
  CHECK(section(m.definition, "labels") == "    maintainer someone else\n    org.opencontainers.image.title demo\n");
  const std::string env = section(m.definition, "environment");
  CHECK(env.find("BAD-NAME") == std::string::npos);  // no word /bin/sh can export
  CHECK(sh(env + "printf '%s|%s' \"$PATH\" \"$QUOTED\"") == "/opt/x/bin:/usr/bin|it's \"so\" $HOME");
  const std::string run = section(m.definition, "runscript");
  CHECK(sh(run) == "[a][b c]");                // Entrypoint with Cmd
  CHECK(sh(run, {"x y", "z"}) == "[x y][z]");  // arguments replace Cmd
}

TEST_CASE("sif_metadata: Cmd alone, nothing at all, no labels", "[image][sif]") {
  auto m = sif_metadata(R"({"config": {"Cmd": ["printf", "%s-"]}})", "c.json", "x");
  const std::string run = section(m.definition, "runscript");
  CHECK(sh(run) == "-");  // printf with its format only
  CHECK(sh(run, {"printf", "<%s>", "1"}) == "<1>");  // arguments are the command
  CHECK(m.labels == "{}\n");
  CHECK(section(m.definition, "labels").empty());
  m = sif_metadata("{}", "c.json", "x");
  CHECK(section(m.definition, "runscript").find("exec /bin/sh") != std::string::npos);
  CHECK_THROWS_WITH(sif_metadata("[1", "c.json", "x"), Catch::Contains("`c.json` is not a JSON object"));
}
