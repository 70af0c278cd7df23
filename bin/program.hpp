// What the two programs differ in (program_rt.cpp, program_full.cpp): the
// rest of bin/ is compiled once for both. Light on purpose: no CLI11.
#pragma once
#include <vector>

namespace CLI {
class App;
}

namespace rt::cli {

struct Command;

struct Program {
  bool full;                                               // rt-image (else the static rt)
  void (*setup)();                                         // before anything runs (root emulation)
  void (*before_commands)();                               // before a command of the CLI11 parser
  void (*add_commands)(CLI::App&, std::vector<Command>&);  // its own commands (rt-image's image commands)
};
extern const Program kProgram;

// cmd_image.cpp: pull, import, images, inspect, rm, prune, login (rt-image only).
void add_image_commands(CLI::App& app, std::vector<Command>& out);

}  // namespace rt::cli
