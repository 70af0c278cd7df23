// Root emulation through seccomp (container); see seccomp.hpp.
#include "app/seccomp.hpp"

#include <seccomp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "rt/error.hpp"
#include "rt/exec.hpp"
#include "run/root_emulation.hpp"

namespace rt::app {
namespace {

// Calls that always succeed without effect. Names missing on an
// architecture (chown32 exists on i386 only) are skipped there by
// libseccomp.
constexpr const char* kFaked[] = {
    "chown",      "fchown",     "fchownat",    "lchown",      "chown32",     "fchown32",   "lchown32",
    "setuid",     "setuid32",   "setgid",      "setgid32",    "setreuid",    "setreuid32", "setregid",
    "setregid32", "setresuid",  "setresuid32", "setresgid",   "setresgid32", "setfsuid",   "setfsuid32",
    "setfsgid",   "setfsgid32", "setgroups",   "setgroups32", "capset",
};

// What skip_sync makes return at once (sync_file_range2 is arm's).
constexpr const char* kSync[] = {"fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "sync_file_range2"};

struct Filter {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  ~Filter() {
    if (ctx) seccomp_release(ctx);
  }
};

void check(int rc, const std::string& what) {
  if (rc < 0) throw Error("root emulation (--seccomp): " + what + ": " + std::strerror(-rc));
}

}  // namespace

const std::vector<std::string>& emulated_calls() {
  static const std::vector<std::string> calls = [] {
    std::vector<std::string> v(std::begin(kFaked), std::end(kFaked));
    v.push_back("mknod (devices)");
    v.push_back("mknodat (devices)");
    return v;
  }();
  return calls;
}

const std::vector<std::string>& sync_calls() {
  static const std::vector<std::string> calls(std::begin(kSync), std::end(kSync));
  return calls;
}

void install_root_emulation(bool skip_sync) {
  Filter f;
  if (!f.ctx) throw Error("root emulation (--seccomp): cannot make a seccomp filter");
#if defined(__x86_64__)
  check(seccomp_arch_add(f.ctx, SCMP_ARCH_X86), "adding i386");
  check(seccomp_arch_add(f.ctx, SCMP_ARCH_X32), "adding x32");
#elif defined(__aarch64__)
  check(seccomp_arch_add(f.ctx, SCMP_ARCH_ARM), "adding arm");
#endif
  const auto ok = SCMP_ACT_ERRNO(0);
  for (const char* name : kFaked) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // unknown to this libseccomp
    check(seccomp_rule_add(f.ctx, ok, nr, 0), name);
  }
  // Device nodes only: the file type is in mknod's second argument and
  // mknodat's third.
  for (const auto& [name, arg] : {std::pair{"mknod", 1u}, std::pair{"mknodat", 2u}}) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;
    for (unsigned type : {S_IFCHR, S_IFBLK})
      check(seccomp_rule_add(f.ctx, ok, nr, 1, scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, S_IFMT, type}), name);
  }
  // A build's tree is scratch until it is stored: dpkg's fsync per file
  // buys nothing there and costs a second of a package install.
  if (skip_sync)
    for (const char* name : kSync) {
      const int nr = seccomp_syscall_resolve_name(name);
      if (nr != __NR_SCMP_ERROR) check(seccomp_rule_add(f.ctx, ok, nr, 0), name);
    }
  check(seccomp_load(f.ctx), "loading the filter");
}

}  // namespace rt::app

namespace rt {

void enable_root_emulation() {
  static const run::RootEmulation emulation{&app::emulated_calls, &app::sync_calls, &app::install_root_emulation};
  run::provide_root_emulation(&emulation);
}

}  // namespace rt
