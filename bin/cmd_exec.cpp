// `rt exec`, `rt run`, `rt shell`: fill rt::ExecOptions, call rt::exec.
#include <memory>

#include "cli_split.hpp"
#include "commands.hpp"
#include "rt/error.hpp"
#include "rt/exec.hpp"

namespace rt::cli {
namespace {

struct State {
  ExecOptions opts;
  std::vector<std::string> binds;
  std::vector<std::string> command;
  int verbose = 0;
  bool quiet = false;
  bool root = false;
};

void add_options(CLI::App* sub, State& s) {
  sub->add_flag("-v,--verbose", s.verbose, "print the plan (ids, mounts, environment); twice adds timings");
  sub->add_flag("-q,--quiet", s.quiet, "print errors only");
  sub->add_option("--uid", s.opts.uid, "user id inside the container (default: yours)")
      ->type_name("UID");
  sub->add_option("--gid", s.opts.gid, "group id inside the container (default: yours)")
      ->type_name("GID");
  sub->add_flag("--root", s.root, "be uid 0 and gid 0 inside (same as --uid 0 --gid 0)");
  sub->add_option("-b,--bind", s.binds, "bind SRC at DST (default: SRC), read-only with :ro; repeatable")
      ->type_name("SRC[:DST[:ro]]")
      ->allow_extra_args(false);
  sub->add_flag("-w,--write", s.opts.write, "make a directory image writable");
  sub->add_flag("--write-tmpfs", s.opts.write_tmpfs,
                "writable image with changes kept in memory and discarded at exit");
  sub->add_flag("--private-tmp", s.opts.private_tmp, "a private empty /tmp instead of the host's");
  sub->add_flag("--no-home", s.opts.no_home, "do not bind your home directory");
  sub->add_option("--cd", s.opts.cd, "start in DIR inside the container")->type_name("DIR");
  sub->add_option("-e,--env", s.opts.env_set, "set NAME=VALUE inside; repeatable")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
  sub->add_option("--env-file", s.opts.env_files, "read NAME=VALUE lines from FILE; repeatable")
      ->type_name("FILE")
      ->allow_extra_args(false);
  sub->add_option("--unset-env", s.opts.env_unset, "remove variables matching GLOB; repeatable")
      ->type_name("GLOB")
      ->allow_extra_args(false);
  sub->add_flag("--clean-env", s.opts.clean_env,
                "start from an empty environment (keeping HOME, USER, TERM, LANG and launcher variables)");
  sub->add_flag("-n,--dry-run", s.opts.dry_run, "print the plan and exit without running anything");
  sub->add_option("--storage", s.opts.storage, "image store (default: $RT_STORAGE or /var/tmp/$USER.rt)")
      ->type_name("DIR");
  sub->add_option("image", s.opts.image, "image directory")->required()->type_name("IMAGE");
}

void add_one(CLI::App& app, std::vector<Command>& out, const char* name, const char* help,
             ExecMode mode) {
  auto state = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand(name, help);
  add_options(sub, *state);
  if (mode == ExecMode::Exec) sub->footer(std::string("Usage: ") + "rt exec [OPTIONS] IMAGE [--] PROG [ARGS...]");
  if (mode == ExecMode::Run) sub->footer(std::string("Usage: ") + "rt run [OPTIONS] IMAGE [--] [ARGS...]");
  if (mode == ExecMode::Shell) sub->footer(std::string("Usage: ") + "rt shell [OPTIONS] IMAGE");
  Command c;
  c.app = sub;
  c.pre_parse = [sub, state](const std::vector<std::string>& words) {
    Split split = split_command(*sub, words);
    state->command = std::move(split.command);
    return std::move(split.options_and_image);
  };
  c.run = [state, mode]() {
    State& s = *state;
    s.opts.mode = mode;
    if (mode == ExecMode::Shell && !s.command.empty())
      throw Error("rt shell takes no command; use rt exec IMAGE PROG [ARGS...]");
    s.opts.command = s.command;
    for (const auto& b : s.binds) s.opts.binds.push_back(parse_bind(b));
    if (s.root) {
      s.opts.uid = 0;
      s.opts.gid = 0;
    }
    s.opts.verbosity = s.quiet ? -1 : s.verbose;
    exec(s.opts);
    return 0;  // reached only with --dry-run
  };
  out.push_back(std::move(c));
}

} // namespace

bool is_exec_verb(const std::string& w) { return w == "exec" || w == "run" || w == "shell"; }

void add_exec_commands(CLI::App& app, std::vector<Command>& out, const std::string& only) {
  struct Verb {
    const char* name;
    const char* help;
    ExecMode mode;
  };
  static constexpr Verb kVerbs[] = {
      {"exec", "run PROG in IMAGE", ExecMode::Exec},
      {"run", "run the image's ENTRYPOINT/CMD in its WORKDIR", ExecMode::Run},
      {"shell", "start an interactive shell in IMAGE", ExecMode::Shell},
  };
  bool known = false;
  for (const auto& v : kVerbs) known = known || only == v.name;
  for (const auto& v : kVerbs)
    if (!known || only == v.name) add_one(app, out, v.name, v.help, v.mode);
}

} // namespace rt::cli
