// Root emulation's place in the exec path (container): the filter itself is
// built with libseccomp, which only the full program (rt-image) links; the
// static per-rank rt hands --seccomp runs to it. rt-image provides the
// filter here at start (rt::enable_root_emulation, app/seccomp).
#pragma once
#include <string>
#include <vector>

namespace rt::run {

struct RootEmulation {
  const std::vector<std::string>& (*calls)();       // the calls emulated, for -v
  const std::vector<std::string>& (*sync_calls)();  // those skip_sync adds
  void (*install)(bool skip_sync);                  // loads the filter; throws rt::Error
};

void provide_root_emulation(const RootEmulation* emulation);
// nullptr in the static rt.
const RootEmulation* root_emulation();

}  // namespace rt::run
