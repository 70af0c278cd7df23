// The static rt: exec, run, shell and instances; every other command is
// handed to rt-image (commands.hpp, Program).
#include "program.hpp"

namespace rt::cli {
const Program kProgram{false, nullptr, nullptr, nullptr};
}
