#include <catch2/catch.hpp>

#include "cli_split.hpp"

using V = std::vector<std::string>;

namespace {
struct App {
  CLI::App app;
  CLI::App* sub;
  App() {
    sub = app.add_subcommand("exec");
    static std::vector<std::string> binds;
    static int v;
    static bool w;
    sub->add_option("-b,--bind", binds)->allow_extra_args(false);
    sub->add_flag("-v", v);
    sub->add_flag("-w,--write", w);
    sub->add_option("image");
  }
};
} // namespace

TEST_CASE("options of PROG are passed to PROG as in rt exec img ls -l") {
  App a;
  auto s = rt::cli::split_command(*a.sub, {"img", "ls", "-l", "--write"});
  CHECK(s.options_and_image == V{"img"});
  CHECK(s.command == V{"ls", "-l", "--write"});
}

TEST_CASE("options before IMAGE belong to rt with their values") {
  App a;
  auto s = rt::cli::split_command(*a.sub, {"-v", "-b", "/a:/b", "--bind=/c", "-w", "img", "--", "ls"});
  CHECK(s.options_and_image == V{"-v", "-b", "/a:/b", "--bind=/c", "-w", "img"});
  CHECK(s.command == V{"ls"});
}

TEST_CASE("double dash before IMAGE ends the options of rt") {
  App a;
  auto s = rt::cli::split_command(*a.sub, {"-v", "--", "-img", "x"});
  CHECK(s.options_and_image == V{"-v", "--", "-img"});
  CHECK(s.command == V{"x"});
}

TEST_CASE("a value attached to a short option") {
  App a;
  auto s = rt::cli::split_command(*a.sub, {"-vb/x", "img", "p"});
  CHECK(s.options_and_image == V{"-vb/x", "img"});
  CHECK(s.command == V{"p"});
}
