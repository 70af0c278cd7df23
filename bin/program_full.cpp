// rt-image, the full program: root emulation and the image commands too
// (commands.hpp, Program).
#include "program.hpp"
#include "rt/exec.hpp"
#include "rt/image.hpp"

namespace rt::cli {
const Program kProgram{true, &enable_root_emulation, &handle_signals_for_image_commands, &add_image_commands};
}
