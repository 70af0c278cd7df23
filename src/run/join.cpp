// One container per node (host -> namespace); see join.hpp.
#include "run/join.hpp"

#include <unistd.h>

#include "run/holder.hpp"

namespace rt::run {
namespace {

using std::chrono::milliseconds;

// With no rank left: how long the holder waits for ranks still expected
// (they may be slow to start), and, when the count is unknown, for more.
constexpr auto kWaitForExpected = milliseconds(10000);
constexpr auto kWaitUnknown = milliseconds(1000);

} // namespace

std::string join_key(const MountPlan& plan, const hpc::Launcher& launcher) {
  std::string s = launcher.job;
  s += '\0' + std::to_string(::getppid());
  s += '\0' + plan.rootfs + '\0' + plan.staging;
  s += '\0' + std::to_string(static_cast<int>(plan.root_mode)) + (plan.squashfs ? "s" : "d");
  s += '\0' + std::to_string(plan.outer_uid) + ':' + std::to_string(plan.inner_uid) + ':' +
       std::to_string(plan.outer_gid) + ':' + std::to_string(plan.inner_gid);
  for (const auto& m : plan.mounts) {
    s += '\0' + std::to_string(static_cast<int>(m.kind)) + (m.readonly ? "r" : "w") + (m.optional ? "o" : "-") +
         (m.if_target ? "t" : "-");
    s += '\0' + m.src + '\0' + m.dst;
  }
  for (const auto& f : plan.staged) s += '\0' + f.name + '\0' + f.content;
  return holder_key("rt-join", s);
}

void join_container(const std::string& key, int expected, const std::function<void()>& build) {
  HolderPolicy policy;
  policy.entry = HolderPolicy::Entry::Share;
  policy.what = "the node's shared container `" + key + "`";
  policy.hint = "run with --no-join";
  policy.comm = "rt-join";
  policy.linger = [expected](int joined) {
    if (expected <= 0) return kWaitUnknown;
    return joined < expected ? kWaitForExpected : milliseconds(0);
  };
  enter_holder(key, policy, build);
}

} // namespace rt::run
