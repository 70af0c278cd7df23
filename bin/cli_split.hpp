// Splitting `rt exec [OPTIONS] IMAGE [--] PROG [ARGS...]` (pure, CLI side).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace rt::cli {

struct Split {
  std::vector<std::string> options_and_image;  // handed to CLI11
  std::vector<std::string> command;            // PROG ARGS..., untouched
};

// `args` are the words after the subcommand. Options are recognised only
// before IMAGE (the first word that is neither an option nor an option's
// value); everything after IMAGE, dashes included, is the command, with one
// leading "--" dropped: `rt exec img ls -l` passes -l to ls.
// `takes_value("-b")` / `takes_value("--bind")` says whether an option
// consumes the next word.
Split split_command(const std::function<bool(const std::string&)>& takes_value,
                    const std::vector<std::string>& args);
Split split_command(const CLI::App& sub, const std::vector<std::string>& args);

} // namespace rt::cli
