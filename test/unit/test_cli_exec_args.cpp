// bin/exec_args: the words of exec, run and shell, read by the one parser.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "exec_args.hpp"
#include "rt/error.hpp"

using rt::ExecMode;
using rt::ExecOptions;
using rt::cli::parse_exec_args;
using V = std::vector<std::string>;

namespace {

ExecOptions parse(const V& words, ExecMode mode = ExecMode::Exec) {
  auto o = parse_exec_args(mode, words);
  REQUIRE(o.has_value());
  return *o;
}

std::string refusal(const V& words, ExecMode mode = ExecMode::Exec) {
  try {
    parse_exec_args(mode, words);
  } catch (const rt::Error& e) {
    return e.what() + std::string(" | ") + e.hint();
  }
  return "";
}

}  // namespace

TEST_CASE("exec args: the image and the command, whose options stay its own") {
  struct Row {
    V words;
    std::string image;
    V command;
  };
  const Row rows[] = {
      {{"img", "ls", "-l", "--write"}, "img", {"ls", "-l", "--write"}},
      {{"-v", "img", "--", "ls"}, "img", {"ls"}},
      {{"img", "--", "--", "x"}, "img", {"--", "x"}},  // one "--" after IMAGE is dropped
      {{"--", "-img", "x"}, "-img", {"x"}},            // "--" before IMAGE ends rt's options
      {{"-", "x"}, "-", {"x"}},
      {{"img"}, "img", {}},
  };
  for (const auto& r : rows) {
    INFO(r.words.front());
    ExecOptions o = parse(r.words);
    CHECK(o.image == r.image);
    CHECK(o.command == r.command);
  }
}

TEST_CASE("exec args: option forms fill the options") {
  ExecOptions o = parse({"-v", "-vb/a:/b:ro", "--bind", "/c", "--bind=/d:/e", "-e", "A=1", "--env=B=2", "--uid", "5",
                         "--gid=6", "--mpi", "--no-join", "--device", "x.com/y=z", "--cd", "/w", "img", "p"});
  CHECK(o.verbosity == 2);
  REQUIRE(o.binds.size() == 3);
  CHECK(o.binds[0].src == "/a");
  CHECK(o.binds[0].dst == "/b");
  CHECK(o.binds[0].readonly);
  CHECK(o.binds[1].src == "/c");
  CHECK(o.binds[2].dst == "/e");
  CHECK(o.env_set == V{"A=1", "B=2"});
  CHECK(o.uid == std::optional<uid_t>(5));
  CHECK(o.gid == std::optional<gid_t>(6));
  CHECK(o.mpi == "auto");  // --mpi takes a value only as --mpi=...
  CHECK(o.join == ExecOptions::Inject::Off);
  CHECK(o.devices == V{"x.com/y=z"});
  CHECK(o.cd == "/w");
  CHECK(o.command == V{"p"});
  CHECK(parse({"--mpi=mpich", "img", "p"}).mpi == "mpich");
  CHECK(parse({"-q", "-v", "img", "p"}).verbosity == -1);
  ExecOptions root = parse({"--root", "img", "p"});
  CHECK(root.uid == std::optional<uid_t>(0));
  CHECK(root.gid == std::optional<gid_t>(0));
  CHECK(parse({"img"}, ExecMode::Run).mode == ExecMode::Run);
}

TEST_CASE("exec args: help is asked for before IMAGE only") {
  CHECK_FALSE(parse_exec_args(ExecMode::Exec, {"--help"}).has_value());
  CHECK_FALSE(parse_exec_args(ExecMode::Exec, {"-v", "-h", "img"}).has_value());
  CHECK_FALSE(parse_exec_args(ExecMode::Exec, {"-vh"}).has_value());
  CHECK(parse({"img", "prog", "--help"}).command == V{"prog", "--help"});
}

TEST_CASE("exec args: what cannot be read is refused with the usage") {
  CHECK(refusal({"--bogus", "img", "p"}).starts_with("rt exec: unknown option `--bogus`"));
  CHECK(refusal({"-x", "img"}).starts_with("rt exec: unknown option `-x`"));
  CHECK(refusal({"-vx", "img"}).starts_with("rt exec: unknown option `-x`"));
  CHECK(refusal({"-b"}).starts_with("rt exec: option `-b` needs a value (SRC[:DST[:ro]])"));
  CHECK(refusal({"--bind"}).starts_with("rt exec: option `--bind` needs a value"));
  CHECK(refusal({"--write=yes", "img"}).starts_with("rt exec: option `--write` takes no value"));
  CHECK(refusal({"-v"}).starts_with("rt exec needs an IMAGE"));
  CHECK(refusal({}, ExecMode::Run).starts_with("rt run needs an IMAGE"));
  CHECK(refusal({}).find("usage: rt exec [OPTIONS] IMAGE [--] PROG [ARGS...]") != std::string::npos);
  CHECK(refusal({"--uid", "x", "img"}).starts_with("--uid needs a numeric id, not `x`"));
  CHECK(refusal({"img", "sh"}, ExecMode::Shell).starts_with("rt shell takes no command"));
}

TEST_CASE("exec args: an rt option after IMAGE is named, with where options go") {
  std::string msg = refusal({"img", "--bind", "/a:/b", "ls"});
  CHECK_THAT(msg, Catch::Contains("`--bind` comes after IMAGE `img`"));
  CHECK_THAT(refusal({"img", "-v", "ls"}), Catch::Contains("`-v` comes after IMAGE"));
  CHECK_THAT(refusal({"img", "--env=A=1", "ls"}), Catch::Contains("`--env=A=1` comes after IMAGE"));
  // A program of that name after `--`; options of the program itself; rt run's arguments.
  CHECK(parse({"img", "--", "--bind", "x"}).command == V{"--bind", "x"});
  CHECK(parse({"img", "ls", "--bind"}).command == V{"ls", "--bind"});
  CHECK(parse({"img", "--verbose"}, ExecMode::Run).command == V{"--verbose"});
}
