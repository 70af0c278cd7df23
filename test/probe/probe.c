/* rt-probe: a static program run inside containers by the integration
 * tests. Each subcommand prints one line that the tests compare. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

/* A kernel without the i386 entry point (IA32 emulation off, some
 * hypervisors' guests) answers int 0x80 with SIGSEGV: said, not died of. */
static sigjmp_buf no_i386;
static void on_segv(int sig) {
  (void)sig;
  siglongjmp(no_i386, 1);
}

static int result(int rc) {
  if (rc == 0)
    puts("ok");
  else
    printf("%s\n", strerrorname_np(errno));
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: rt-probe ids|fds|nnp|flags P|write P|mknod P|fifo P|chown P|chown-i386 P|setuid U|env N|argv ...|kill N|exit N|pid [S]|xattr P "
            "NAME|ptrace PID|chroot-escape P\n");
    return 2;
  }
  const char* cmd = argv[1];
  const char* arg = argc > 2 ? argv[2] : "";
  if (!strcmp(cmd, "ids")) {
    printf("uid=%d gid=%d euid=%d egid=%d\n", getuid(), getgid(), geteuid(), getegid());
  } else if (!strcmp(cmd, "fds")) {
    DIR* d = opendir("/proc/self/fd");
    if (!d) return result(-1);
    int self = dirfd(d), first = 1;
    struct dirent* e;
    int fds[1024], n = 0;
    while ((e = readdir(d)) && n < 1024)
      if (e->d_name[0] != '.' && atoi(e->d_name) != self) fds[n++] = atoi(e->d_name);
    closedir(d);
    for (int i = 0; i < n; i++) /* sort for stable output */
      for (int j = i + 1; j < n; j++)
        if (fds[j] < fds[i]) {
          int t = fds[i];
          fds[i] = fds[j];
          fds[j] = t;
        }
    for (int i = 0; i < n; i++) {
      printf(first ? "%d" : " %d", fds[i]);
      first = 0;
    }
    putchar('\n');
  } else if (!strcmp(cmd, "nnp")) {
    printf("%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
  } else if (!strcmp(cmd, "flags")) {
    struct statvfs sv;
    if (statvfs(arg, &sv)) return result(-1);
    printf("%s%s%s\n", sv.f_flag & ST_RDONLY ? "ro" : "rw", sv.f_flag & ST_NOSUID ? " nosuid" : "",
           sv.f_flag & ST_NODEV ? " nodev" : "");
  } else if (!strcmp(cmd, "write")) {
    int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
    return result(fd >= 0 ? 0 : -1);
  } else if (!strcmp(cmd, "mknod")) {
    return result(mknod(arg, S_IFCHR | 0666, makedev(1, 3)));
  } else if (!strcmp(cmd, "setuid")) {
    return result(setuid((uid_t)atoi(arg)));
  } else if (!strcmp(cmd, "fifo")) {
    return result(mknod(arg, S_IFIFO | 0644, 0));
  } else if (!strcmp(cmd, "chown")) {
    return result(chown(arg, 1234, 1234));
  } else if (!strcmp(cmd, "chown-i386")) {
#if defined(__x86_64__)
    /* The i386 entry point (int 0x80, seen by seccomp as AUDIT_ARCH_I386):
     * chown32 is 212 there. The path must be below 4 GiB: a static buffer. */
    static char path[4096];
    snprintf(path, sizeof path, "%s", arg);
    signal(SIGSEGV, on_segv);
    if (sigsetjmp(no_i386, 1)) {
      puts("no-i386");
      return 0;
    }
    long rc;
    __asm__ volatile("int $0x80" : "=a"(rc) : "a"(212L), "b"(path), "c"(1234L), "d"(1234L) : "memory");
    if (rc < 0) errno = (int)-rc;
    return result(rc < 0 ? -1 : 0);
#else
    puts("unsupported");
    return 0;
#endif
  } else if (!strcmp(cmd, "env")) {
    const char* v = getenv(arg);
    printf("%s\n", v ? v : "<unset>");
  } else if (!strcmp(cmd, "argv")) {
    for (int i = 2; i < argc; i++) printf(i > 2 ? " [%s]" : "[%s]", argv[i]);
    putchar('\n');
  } else if (!strcmp(cmd, "cwd")) {
    char buf[4096];
    puts(getcwd(buf, sizeof buf) ? buf : "?");
  } else if (!strcmp(cmd, "kill")) {
    fflush(stdout);
    kill(getpid(), atoi(arg));
    pause();
  } else if (!strcmp(cmd, "exit")) {
    return atoi(arg);
  } else if (!strcmp(cmd, "xattr")) {
    char buf[256];
    ssize_t n = lgetxattr(arg, argc > 3 ? argv[3] : "", buf, sizeof buf - 1);
    if (n < 0) return result(-1);
    buf[n] = 0;
    puts(buf);
  } else if (!strcmp(cmd, "ptrace")) {
    return result((int)ptrace(PTRACE_SEIZE, (pid_t)atoi(arg), 0, 0));
  } else if (!strcmp(cmd, "chroot-escape")) {
    /* The classic way out of a chroot: chroot into P with a descriptor of
     * "/" kept, walk ".." from it, chroot there. "contained" when that
     * leads back to this root, "escaped" when it leads elsewhere. */
    struct stat before, after;
    int fd = open("/", O_RDONLY | O_DIRECTORY);
    if (fd < 0 || stat("/", &before) || chroot(arg)) return result(-1);
    if (fchdir(fd)) return result(-1);
    for (int i = 0; i < 64; i++)
      if (chdir("..")) return result(-1);
    if (chroot(".") || stat("/", &after)) return result(-1);
    puts(before.st_dev == after.st_dev && before.st_ino == after.st_ino ? "contained" : "escaped");
  } else if (!strcmp(cmd, "pid")) {
    printf("%d\n", getpid());
    fflush(stdout);
    if (argc > 2) sleep((unsigned)atoi(arg));
  } else {
    fprintf(stderr, "rt-probe: unknown subcommand %s\n", cmd);
    return 2;
  }
  return 0;
}
