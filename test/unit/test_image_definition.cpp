// Apptainer definition files as rt build reads them: headers and stages,
// sections (appended when repeated), {{ }} arguments, %files and %labels
// lines, and the errors that name FILE:LINE.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "image/definition.hpp"
#include "rt/error.hpp"

using namespace rt::image;

namespace {

Definition parse(const std::string& text, std::map<std::string, std::string> args = {}) {
  std::set<std::string> used;
  return parse_definition(text, "x.def", args, used);
}

std::string definition_error(const std::string& text, std::map<std::string, std::string> args = {}) {
  try {
    parse(text, args);
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("definition: header, sections and their arguments") {
  auto d = parse(
      "# comment\n"
      "BootStrap: docker\n"
      "From: debian:12\n"
      "\n"
      "%post -c /bin/bash\n"
      "  apt-get update\n"
      "%ENVIRONMENT\n"
      "  export A=1\n"
      "%files from build\n"
      "  /a /b\n");
  REQUIRE(d.stages.size() == 1);
  const auto& s = d.stages[0];
  CHECK(s.value("bootstrap") == "docker");
  CHECK(s.value("from") == "debian:12");
  CHECK(s.line == 2);
  REQUIRE(s.sections.size() == 3);
  CHECK(s.sections[0].name == "post");
  CHECK(s.sections[0].args == "-c /bin/bash");
  CHECK(s.sections[0].body == "  apt-get update\n");
  CHECK(s.sections[0].line == 5);
  CHECK(s.section("environment")->body == "  export A=1\n");
  CHECK(s.section("files")->args == "from build");
}

TEST_CASE("definition: a section given twice is appended to the first") {
  auto d = parse("Bootstrap: scratch\n%post\necho 1\n%labels\nA b\n%post\necho 2\n");
  const auto& s = d.stages[0];
  REQUIRE(s.sections.size() == 2);
  CHECK(s.section("post")->body == "echo 1\necho 2\n");
  // %files of different stages stay apart.
  auto f = parse("Bootstrap: scratch\n%files\na\n%files from x\nb\n%files\nc\n");
  REQUIRE(f.stages[0].sections.size() == 2);
  CHECK(f.stages[0].sections[0].body == "a\nc\n");
  CHECK(f.stages[0].sections[1].body == "b\n");
}

TEST_CASE("definition: stages begin at each Bootstrap after sections") {
  auto d = parse(
      "Bootstrap: docker\nFrom: debian\nStage: build\n%post\nmake\n"
      "Bootstrap: docker\nFrom: debian\nStage: final\n%files from build\n/out /out\n");
  REQUIRE(d.stages.size() == 2);
  CHECK(d.stages[0].value("stage") == "build");
  CHECK(d.stages[0].section("post")->body == "make\n");
  CHECK(d.stages[1].value("stage") == "final");
  CHECK(d.stages[1].line == 6);
}

TEST_CASE("definition: {{ }} arguments from --build-arg and %arguments") {
  std::set<std::string> used;
  auto d = parse_definition(
      "Bootstrap: docker\nFrom: debian:{{ TAG }}\n%arguments\nTAG=12\nMSG=\"hi there\"\n%post\necho {{MSG}} {{ OTHER }}\n",
      "x.def", {{"TAG", "13"}, {"OTHER", "o"}}, used);
  CHECK(d.stages[0].value("from") == "debian:13");  // given wins over the default
  CHECK(d.stages[0].section("post")->body == "echo hi there o\n");
  CHECK(used == std::set<std::string>{"TAG", "OTHER"});
  CHECK(d.text.find("debian:13") != std::string::npos);  // the text kept is the substituted one
  CHECK_THAT(definition_error("Bootstrap: docker\nFrom: {{ NOPE }}\n"), Catch::Contains("x.def:2: `{{ NOPE }}` has no value"));
  // Not a name: kept as written (shell or Go templates in a script).
  CHECK(parse("Bootstrap: scratch\n%post\necho '{{ .Name }}'\n").stages[0].section("post")->body ==
        "echo '{{ .Name }}'\n");
}

TEST_CASE("definition: errors name the file and line") {
  CHECK_THAT(definition_error(""), Catch::Contains("x.def: an empty definition file"));
  CHECK_THAT(definition_error("# only a comment\n\n"), Catch::Contains("empty definition file"));
  CHECK_THAT(definition_error("Bootstrap: docker\n%pots\n"), Catch::Contains("x.def:2: unknown section %pots"));
  CHECK_THAT(definition_error("From: debian\n"), Catch::Contains("x.def:1: the first header line must be `Bootstrap:"));
  CHECK_THAT(definition_error("Bootstrap: docker\nnonsense here\n"), Catch::Contains("x.def:2: `nonsense here` is neither"));
  CHECK_THAT(definition_error("Bootstrap: docker\nFrom: a\nfrom: b\n"), Catch::Contains("x.def:3: `from` is given twice"));
  CHECK_THAT(definition_error("%post\necho\n"), Catch::Contains("x.def:1: %post before any header"));
  CHECK_THAT(definition_error("Bootstrap: x\n%arguments\nnovalue\n"), Catch::Contains("x.def:3: %arguments takes NAME=VALUE"));
}

TEST_CASE("definition: %files and %labels lines") {
  auto d = parse(
      "Bootstrap: scratch\n%files\n  # c\n  a.txt\n  \"my file\" /opt/x\n  src/ 'dst dir'\n%labels\n  Author A. Person\n"
      "  Empty\n");
  auto f = def_files(*d.stages[0].section("files"), "x.def");
  REQUIRE(f.size() == 3);
  CHECK(f[0] == std::pair<std::string, std::string>{"a.txt", "a.txt"});
  CHECK(f[1] == std::pair<std::string, std::string>{"my file", "/opt/x"});
  CHECK(f[2] == std::pair<std::string, std::string>{"src/", "dst dir"});
  auto l = def_labels(*d.stages[0].section("labels"));
  REQUIRE(l.size() == 2);
  CHECK(l[0] == std::pair<std::string, std::string>{"Author", "A. Person"});
  CHECK(l[1] == std::pair<std::string, std::string>{"Empty", ""});
  auto bad = parse("Bootstrap: scratch\n%files\na b c\n");
  CHECK_THROWS_WITH(def_files(*bad.stages[0].section("files"), "x.def"), Catch::Contains("x.def:3: %files takes"));
}

TEST_CASE("definition: told from a Dockerfile") {
  CHECK(looks_like_definition("# c\n\nbootstrap: docker\n"));
  CHECK_FALSE(looks_like_definition("FROM debian\n"));
  CHECK_FALSE(looks_like_definition(""));
}
