/* rt-old-kernel [--no-move-root] PROG [ARG...]: runs PROG (and all it
 * starts) as an older kernel would answer it. Every system call that Linux
 * added after 4.18 (the kernel of RHEL 8 and its rebuilds) fails with
 * ENOSYS, as it does there; with --no-move-root, mount(2) with MS_MOVE
 * alone fails with EINVAL too (a kernel that refuses to move a mount onto
 * "/"). A seccomp filter under no_new_privs: no privilege is needed, and
 * nothing is granted. Exit status 125 when the filter cannot be loaded. */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

/* By the kernel version that added them (after 4.18). */
static const char* const newer[] = {
    "io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_send_signal", /* 5.1 */
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",         /* 5.2 */
    "pidfd_open", "clone3",                                                        /* 5.3 */
    "openat2", "pidfd_getfd",                                                      /* 5.6 */
    "faccessat2",                                                                  /* 5.8 */
    "close_range",                                                                 /* 5.9 */
    "process_madvise",                                                             /* 5.10 */
    "epoll_pwait2",                                                                /* 5.11 */
    "mount_setattr",                                                               /* 5.12 */
    "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",      /* 5.13 */
    "quotactl_fd", "memfd_secret",                                                 /* 5.14 */
    "process_mrelease",                                                            /* 5.15 */
    "futex_waitv",                                                                 /* 5.16 */
    "set_mempolicy_home_node",                                                     /* 5.17 */
    "cachestat",                                                                   /* 6.5 */
    "fchmodat2", "map_shadow_stack",                                               /* 6.6 */
};

int main(int argc, char** argv) {
  int no_move_root = argc > 1 && strcmp(argv[1], "--no-move-root") == 0;
  char** prog = argv + 1 + no_move_root;
  if (!*prog) {
    fprintf(stderr, "usage: rt-old-kernel [--no-move-root] PROG [ARG...]\n");
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return 125;
  /* i386 calls (rt's root emulation is tested with them) answered alike. */
  if (seccomp_arch_add(ctx, SCMP_ARCH_X86) != 0 && seccomp_arch_exist(ctx, SCMP_ARCH_X86) != 0) return 125;
  if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW) != 0) return 125;
  for (size_t i = 0; i < sizeof newer / sizeof *newer; ++i) {
    int nr = seccomp_syscall_resolve_name(newer[i]);
    if (nr == __NR_SCMP_ERROR) continue; /* unknown to this libseccomp: unknown to 4.18 too */
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0) != 0) {
      fprintf(stderr, "rt-old-kernel: cannot filter %s\n", newer[i]);
      return 125;
    }
  }
  if (no_move_root &&
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(mount), 1, SCMP_A3(SCMP_CMP_EQ, MS_MOVE)) != 0) {
    fprintf(stderr, "rt-old-kernel: cannot filter mount(MS_MOVE)\n");
    return 125;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(ctx) != 0) {
    fprintf(stderr, "rt-old-kernel: cannot load the filter: %s\n", strerror(errno));
    return 125;
  }
  seccomp_release(ctx);
  execvp(prog[0], prog);
  fprintf(stderr, "rt-old-kernel: %s: %s\n", prog[0], strerror(errno));
  return 127;
}
