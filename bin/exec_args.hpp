// Reading the words of `rt exec|run|shell [OPTIONS] IMAGE [--] [PROG ARGS...]`
// (pure, CLI side): one option table, read by one parser; CLI11 only shows
// the table as --help.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rt/exec.hpp"

namespace rt::cli {

struct ExecState;  // what the options fill (exec_args.cpp)

struct OptSpec {
  const char* names;  // "-b,--bind"
  const char* value;  // the value's name; nullptr for a flag; "[...]": given only as --opt=VALUE
  const char* help;
  void (*apply)(ExecState&, const std::string& value);
};

// `s` cut at each `sep` (an empty string gives one empty part): the CLI
// side's own, as bin/ uses librt's public headers only.
std::vector<std::string> split_words(std::string_view s, char sep);

// The options of exec, run and shell.
std::span<const OptSpec> exec_options();

// Reads the words after the verb. Options are recognised only before IMAGE
// (the first word that is neither an option nor an option's value);
// everything after IMAGE, dashes included, is the command, with one leading
// "--" dropped: `rt exec img ls -l` passes -l to ls. nullopt when help is
// asked for (-h, --help before IMAGE). Throws rt::Error for an unknown
// option, a missing value or IMAGE, a bad id, and a command given to shell.
std::optional<ExecOptions> parse_exec_args(ExecMode mode, const std::vector<std::string>& words);

}  // namespace rt::cli
