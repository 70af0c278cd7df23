// `rt exec`, `rt run`, `rt shell`: read the words (exec_args), call rt::exec.
#include <memory>
#include <string>

#include "commands.hpp"
#include "exec_args.hpp"
#include "rt/exec.hpp"

namespace rt::cli {
namespace {

// One usage line, with PROG, in place of CLI11's.
class Usage : public CLI::Formatter {
public:
  explicit Usage(std::string line) : line_(std::move(line)) {}
  std::string make_usage(const CLI::App*, std::string) const override { return "Usage: " + line_ + "\n"; }

private:
  std::string line_;
};

// The option table, shown by CLI11 as --help (it parses nothing else).
void add_one(CLI::App& app, std::vector<Command>& out, const char* name, const char* help, ExecMode mode) {
  CLI::App* sub = app.add_subcommand(name, help);
  for (const auto& o : exec_options()) {
    if (o.value)
      sub->add_option(o.names, o.help)->type_name(o.value);
    else
      sub->add_flag(o.names, o.help);
  }
  sub->add_option("image", "image directory, SquashFS file or stored image name")->type_name("IMAGE");
  sub->formatter(std::make_shared<Usage>(mode == ExecMode::Exec  ? "rt exec [OPTIONS] IMAGE [--] PROG [ARGS...]"
                                         : mode == ExecMode::Run ? "rt run [OPTIONS] IMAGE [--] [ARGS...]"
                                                                 : "rt shell [OPTIONS] IMAGE"));
  Command c;
  c.app = sub;
  c.run = [] { return 0; };
  out.push_back(std::move(c));
}

ExecMode mode_of(const std::string& verb) {
  return verb == "exec" ? ExecMode::Exec : verb == "run" ? ExecMode::Run : ExecMode::Shell;
}

}  // namespace

bool is_exec_verb(const std::string& w) { return w == "exec" || w == "run" || w == "shell"; }

std::optional<int> exec_command(const std::vector<std::string>& words) {
  auto opts = parse_exec_args(mode_of(words[0]), std::vector<std::string>(words.begin() + 1, words.end()));
  if (!opts) return std::nullopt;
  exec(*opts);
  return 0;  // reached only with --dry-run
}

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

}  // namespace rt::cli
