// Dockerfiles as Docker's reference reads them: directives, comments,
// continuations, flags, the exec form, substitution and NAME=VALUE pairs.
#include <catch2/catch.hpp>
#include <map>

#include "image/dockerfile.hpp"
#include "rt/error.hpp"

using namespace rt::image;
using V = std::vector<std::string>;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_dockerfile(text, "Dockerfile");
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "accepted";
}

Lookup vars(std::map<std::string, std::string> m) {
  return [m](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("instructions, lines, comments and continuations") {
  const auto df = parse_dockerfile(
      "# a comment\n"
      "\n"
      "from debian:12 AS base\n"
      "RUN apt-get update && \\\n"
      "# a comment between continued lines\n"
      "    apt-get install -y \\\n"
      "      python3\n"
      "COPY --from=base --chown=1:1 a b /dst/\n"
      "CMD [\"python3\", \"-c\", \"print(1)\"]\n"
      "ENTRYPOINT [not json\n",
      "Dockerfile");
  REQUIRE(df.instructions.size() == 5);
  CHECK(df.instructions[0].keyword == "FROM");
  CHECK(df.instructions[0].args == "debian:12 AS base");
  CHECK(df.instructions[0].line == 3);
  CHECK(df.instructions[1].keyword == "RUN");
  CHECK(df.instructions[1].line == 4);
  CHECK(df.instructions[1].args == "apt-get update &&     apt-get install -y       python3");
  CHECK(df.instructions[2].flags ==
        std::vector<std::pair<std::string, std::string>>{{"from", "base"}, {"chown", "1:1"}});
  CHECK(df.instructions[2].args == "a b /dst/");
  CHECK(df.instructions[3].exec_form);
  CHECK(df.instructions[3].argv == V{"python3", "-c", "print(1)"});
  CHECK_FALSE(df.instructions[4].exec_form);  // not JSON: the shell form
  CHECK(df.instructions[4].args == "[not json");
}

TEST_CASE("the escape directive changes the continuation character") {
  const auto df = parse_dockerfile("# escape=`\nFROM scratch\nRUN dir c:\\ `\n  /w\n", "Dockerfile");
  CHECK(df.escape == '`');
  REQUIRE(df.instructions.size() == 2);
  CHECK(df.instructions[1].args == "dir c:\\   /w");
  CHECK_THAT(error_of("# escape=x\nFROM scratch\n"), Catch::Contains("Dockerfile:1: the escape directive takes"));
  // After an instruction a directive is a comment.
  CHECK(parse_dockerfile("FROM scratch\n# escape=`\nRUN a \\\n b\n", "f").instructions[1].args == "a  b");
}

TEST_CASE("what is not understood is an error naming the file and line") {
  CHECK_THAT(error_of("FROM scratch\nFROBNICATE x\n"),
             Catch::Contains("Dockerfile:2: unknown or unsupported instruction `FROBNICATE`"));
  CHECK_THAT(error_of("FROM scratch\nRUN <<EOF\necho hi\n"),
             Catch::Contains("Dockerfile:2: the heredoc <<EOF has no line `EOF` ending it"));
  CHECK_THAT(error_of("FROM scratch\nSHELL /bin/bash -c\n"), Catch::Contains("Dockerfile:2: SHELL takes a JSON list"));
  CHECK_THAT(error_of("FROM scratch\nCOPY --From=x a b\n"), Catch::Contains("Dockerfile:2: `--From=x` is not a flag"));
  CHECK_THAT(error_of("FROM scratch\nWORKDIR\n"), Catch::Contains("Dockerfile:2: WORKDIR needs arguments"));
  CHECK_THAT(error_of("RUN true\n"), Catch::Contains("Dockerfile: no FROM instruction"));
  CHECK(error_of("ARG V=12\nFROM debian:$V\n") == "accepted");          // ARG before FROM
  CHECK(error_of("FROM scratch\nRUN echo $((1<<2))\n") == "accepted");  // a shift, not a heredoc
}

TEST_CASE("heredocs: their bodies are the lines after, up to the word") {
  const auto df = parse_dockerfile(
      "# syntax=docker/dockerfile:1\nFROM scratch\nRUN <<EOF\necho one\n  echo two\nEOF\n"
      "COPY <<a.conf <<-\"b\" /etc/\nx=$HOME\nEND\na.conf\n\tindented\nb\nRUN cat <<<x && echo $((1<<2))\n",
      "Dockerfile");
  REQUIRE(df.instructions.size() == 4);
  CHECK(df.directives == std::vector<std::pair<std::string, std::string>>{{"syntax", "docker/dockerfile:1"}});
  REQUIRE(df.instructions[1].heredocs.size() == 1);
  CHECK(df.instructions[1].heredocs[0].word == "EOF");
  CHECK(df.instructions[1].heredocs[0].body == "echo one\n  echo two\n");
  CHECK(df.instructions[1].args == "<<EOF");
  const auto& copy = df.instructions[2].heredocs;
  REQUIRE(copy.size() == 2);
  CHECK(copy[0].word == "a.conf");
  CHECK(copy[0].body == "x=$HOME\nEND\n");
  CHECK(copy[1].word == "b");
  CHECK(copy[1].strip_tabs);
  CHECK(copy[1].quoted);
  CHECK(copy[1].body == "indented\n");
  CHECK(df.instructions[3].heredocs.empty());  // a here-string and a shift
  CHECK(df.instructions[3].line == 13);
}

TEST_CASE("substitution as Docker does it") {
  const auto lookup = vars({{"A", "x"}, {"EMPTY", ""}});
  auto sub = [&](const char* w) { return substitute(w, lookup, '\\', "f:1"); };
  CHECK(sub("$A/${A}/$NONE/end") == "x/x//end");
  CHECK(sub("${A:-d} ${NONE:-d} ${EMPTY:-d} ${EMPTY-d}") == "x d d ");
  CHECK(sub("${A:+alt} ${NONE:+alt} ${A:+${A}y}") == "alt  xy");
  CHECK(sub("\\$A costs $5") == "$A costs $5");
  CHECK_THROWS_WITH(sub("${A"), Catch::Contains("f:1: `${A`: a ${ is not closed"));
  CHECK_THROWS_WITH(sub("${A%%x}"), Catch::Contains("only ${NAME:-word} and ${NAME:+word}"));
  CHECK_THROWS_WITH(sub("${1}"), Catch::Contains("names no variable"));
}

TEST_CASE("NAME=VALUE pairs of ENV, LABEL and ARG") {
  using P = std::vector<std::pair<std::string, std::optional<std::string>>>;
  const auto lookup = vars({{"HOME", "/root"}});
  CHECK(key_values("A=1 B=\"two words\" C='$HOME' D=$HOME E=a\\ b", Pairs::Env, '\\', "f:1", &lookup) ==
        P{{"A", "1"}, {"B", "two words"}, {"C", "$HOME"}, {"D", "/root"}, {"E", "a b"}});
  CHECK(key_values("PATH /usr/bin:$HOME/bin", Pairs::Env, '\\', "f:1", &lookup) ==
        P{{"PATH", "/usr/bin:/root/bin"}});  // the old form
  CHECK(key_values("org.opencontainers.image.title=\"rt test\"", Pairs::Label, '\\', "f:1") ==
        P{{"org.opencontainers.image.title", "rt test"}});
  CHECK(key_values("VERSION", Pairs::Arg, '\\', "f:1") == P{{"VERSION", std::nullopt}});
  CHECK(key_values("VERSION=1.0", Pairs::Arg, '\\', "f:1") == P{{"VERSION", "1.0"}});
  CHECK_THROWS_WITH(key_values("A=1 B", Pairs::Env, '\\', "f:3"), Catch::Contains("f:3: `B` is not NAME=VALUE"));
  CHECK_THROWS_WITH(key_values("A=\"open", Pairs::Env, '\\', "f:3"), Catch::Contains("a \" is not closed"));
  CHECK_THROWS_WITH(key_values("LONELY", Pairs::Env, '\\', "f:3"), Catch::Contains("ENV LONELY has no value"));
}

TEST_CASE(".dockerignore as Docker reads it") {
  const auto d = DockerIgnore::parse(
      "# build outputs\n"
      "build/\n"
      "*.o\n"
      "/secret.txt\n"
      "docs/**/*.md\n"
      "!docs/keep/README.md\n"
      "  \n"
      "./tmp*\n"
      "logs\n"
      "!logs/important.log\n");
  CHECK(d.excluded("build"));
  CHECK(d.excluded("build/x/y.c"));  // inside an excluded directory
  CHECK(d.excluded("main.o"));
  CHECK_FALSE(d.excluded("src/main.o"));  // * stays within one component
  CHECK(d.excluded("secret.txt"));
  CHECK(d.excluded("docs/a.md"));  // ** matches no directory too
  CHECK(d.excluded("docs/x/y/z.md"));
  CHECK_FALSE(d.excluded("docs/keep/README.md"));  // re-included: the last match wins
  CHECK_FALSE(d.excluded("docs/x/y/z.txt"));
  CHECK(d.excluded("tmpfile"));
  CHECK(d.excluded("./tmp2/a"));
  CHECK(d.excluded("logs/debug.log"));
  CHECK_FALSE(d.excluded("logs/important.log"));
  CHECK_FALSE(d.excluded("src/app.c"));
  CHECK_FALSE(DockerIgnore::parse("").excluded("anything"));
  CHECK(DockerIgnore::parse("a/../b\n").excluded("b/c"));  // patterns are cleaned
}

TEST_CASE("old forms: an empty line inside a continued RUN, LABEL NAME VALUE") {
  const auto df =
      parse_dockerfile("FROM scratch\nRUN a && \\\n\n   b\nLABEL maintainer me@example.org\n", "Dockerfile");
  REQUIRE(df.instructions.size() == 3);
  CHECK(df.instructions[1].args == "a &&    b");
  const auto pairs = key_values(df.instructions[2].args, Pairs::Label, '\\', "Dockerfile:5");
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].first == "maintainer");
  CHECK(pairs[0].second == "me@example.org");
  CHECK_THROWS_WITH(key_values("maintainer", Pairs::Label, '\\', "D:1"),
                    Catch::Contains("LABEL maintainer has no value"));
  // ARG's NAME alone still declares it.
  CHECK(key_values("V", Pairs::Arg, '\\', "D:1")[0].second == std::nullopt);
}

TEST_CASE("ONBUILD keeps its trigger, which may not be FROM, MAINTAINER or ONBUILD") {
  const auto df = parse_dockerfile("FROM scratch\nONBUILD RUN make -C /src\n", "Dockerfile");
  CHECK(df.instructions[1].keyword == "ONBUILD");
  CHECK(df.instructions[1].args == "RUN make -C /src");
  for (const char* t : {"FROM x", "MAINTAINER me", "onbuild RUN x"})
    CHECK_THAT(error_of(std::string("FROM scratch\nONBUILD ") + t + "\n"), Catch::Contains("is not allowed"));
  const Instruction ins = parse_instruction("COPY --chown=1 a b", "Dockerfile:3", '\\');
  CHECK(ins.keyword == "COPY");
  CHECK(ins.flags.size() == 1);
  CHECK(ins.args == "a b");
  CHECK_THROWS_AS(parse_instruction("RUN a\nRUN b", "Dockerfile:3", '\\'), rt::Error);
}
