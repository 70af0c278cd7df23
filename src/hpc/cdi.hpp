// Container Device Interface specs (/etc/cdi, /var/run/cdi; JSON): the
// device nodes, mounts and environment a vendor declares (host).
#pragma once
#include <string>
#include <vector>

#include "hpc/inject.hpp"

namespace rt::hpc {

// Applies the edits of each named device ("nvidia.com/gpu=0",
// "nvidia.com/gpu=all") found in the spec files of `dirs` to `out`.
// Throws rt::Error for an unknown kind or device, or a broken spec.
void apply_cdi(const std::vector<std::string>& names, const std::vector<std::string>& dirs, Injection& out);

}  // namespace rt::hpc
