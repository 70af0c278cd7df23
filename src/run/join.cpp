// One container per node (host -> namespace); see join.hpp.
#include "run/join.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "run/holder.hpp"
#include "util/fs.hpp"

namespace rt::run {
namespace {

using std::chrono::milliseconds;

// With no rank left: how long the holder waits for ranks still expected
// (they may be slow to start), and, when the count is unknown, for more.
constexpr auto kWaitForExpected = milliseconds(10000);
constexpr auto kWaitUnknown = milliseconds(1000);

// The parent and the command name of process `pid`, from /proc/PID/stat
// ("PID (COMM) STATE PPID ..."; COMM may hold spaces and parentheses).
bool parent_of(pid_t pid, pid_t& ppid, std::string& comm) {
  auto stat = util::read_file_if_exists("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!stat) return false;
  size_t open = stat->find('('), close = stat->rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  comm = stat->substr(open + 1, close - open - 1);
  ppid = static_cast<pid_t>(std::atol(stat->c_str() + std::min(stat->size(), close + 4)));
  return true;
}

// What the ranks of one launch on this node share: the launcher's job
// (step) when it names one (Slurm, Open MPI, PMIx); Hydra names none, so
// the nearest hydra_pmi_proxy above this process (a wrapper shell between
// the two does not hide it); else the parent.
std::string launch_of(const hpc::Launcher& launcher) {
  if (!launcher.job.empty()) return launcher.job;
  pid_t pid = ::getppid();
  std::string comm;
  for (int depth = 0; pid > 1 && depth < 16; ++depth) {
    pid_t up = 0;
    if (!parent_of(pid, up, comm)) break;
    if (comm == "hydra_pmi_proxy") return "hydra " + std::to_string(pid);
    pid = up;
  }
  return "parent " + std::to_string(::getppid());
}

}  // namespace

HolderKey join_key(const MountPlan& plan, const hpc::Launcher& launcher, const std::string& secret) {
  std::string s = launch_of(launcher);
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
  for (const auto& l : plan.overlays) s += '\0' + l.path + (l.writable ? "w" : "r");
  return {"rt-join", secret, s};
}

bool join_container(const HolderKey& key, int expected, const std::string& image, const std::function<void()>& build) {
  const HolderPolicy policy{.entry = HolderPolicy::Entry::Share,
                            .what = "the node's shared container of `" + image + "`",
                            .hint = "run with --no-join",
                            .comm = "rt-join",
                            .title = "rt-join " + image,
                            .linger = [expected](int joined) {
                              if (expected <= 0) return kWaitUnknown;
                              return joined < expected ? kWaitForExpected : milliseconds(0);
                            }};
  return enter_holder(key, policy, build);
}

}  // namespace rt::run
