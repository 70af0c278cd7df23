// Parsing of --bind SRC[:DST[:ro|rw]] (pure).
#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "util/strings.hpp"

namespace rt {

BindSpec parse_bind(std::string_view spec) {
  auto parts = util::split(spec, ':');
  if (parts.size() > 3 || parts[0].empty())
    throw Error("bad --bind " + util::quoted(spec) + ": expected SRC[:DST[:ro]]");
  BindSpec b;
  b.src = parts[0];
  if (parts.size() >= 2) b.dst = parts[1];
  if (parts.size() == 3) {
    if (parts[2] == "ro")
      b.readonly = true;
    else if (parts[2] != "rw")
      throw Error("bad --bind " + util::quoted(spec) + ": the third field must be `ro` or `rw`");
  }
  if (!b.dst.empty() && b.dst.front() != '/')
    throw Error("bad --bind " + util::quoted(spec) + ": the destination must be an absolute path");
  return b;
}

}  // namespace rt
