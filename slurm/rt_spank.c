/*
 * rt's Slurm plugin (SPANK): srun --container-image=IMAGE PROG puts each
 * task in an rt container, with pyxis's option names, so that job scripts
 * written for pyxis run unchanged.
 *
 * A thin front-end: it never enters a namespace or mounts anything itself.
 * In each task, after Slurm has dropped to the user and just before it
 * executes the program, it passes the options to rt in RT_SLURM_TASK and
 * makes rt the task's program (argv[0]); rt then does what `rt exec` does
 * (one container per node, injection, the SquashFS server, one pull per
 * job), as the user. Nothing runs with slurmd's privileges. In srun (and
 * sbatch, salloc) the options are checked by `rt --slurm-check` before
 * any task starts. See rt-slurm(8).
 *
 * plugstack.conf arguments: rt=PATH (the rt program), enabled=0|1 (0:
 * register no option), storage=DIR (the image store), mounts=A,B (binds
 * added to every container), mount_home=0|1 (the default of
 * --container-mount-home).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(rt, 1);

#ifndef RT_PROGRAM
#define RT_PROGRAM "/usr/local/bin/rt"
#endif

/* The options, by pyxis's names without "container-"; the keys rt reads. */
enum { O_IMAGE, O_MOUNTS, O_WORKDIR, O_ENV, O_NAME, O_SAVE, O_MOUNT_HOME, O_WRITABLE, O_REMAP_ROOT, O_ENTRYPOINT, O_N };
static const char *const keys[O_N] = {"image", "mounts",   "workdir",    "env",       "name",
                                      "save",  "mount_home", "writable", "remap_root", "entrypoint"};
static char *values[O_N];

static char rt_program[PATH_MAX] = RT_PROGRAM;
static int enabled = 1;
static char *site_storage;
static char *site_mounts;
static char *site_mount_home;

/* A flag option: val = key * 2 + (1 for the positive form). */
static int flag_cb(int val, const char *optarg, int remote) {
  (void)optarg;
  (void)remote;
  free(values[val / 2]);
  values[val / 2] = strdup(val % 2 ? "1" : "0");
  return 0;
}

static int value_cb(int val, const char *optarg, int remote) {
  (void)remote;
  if (!optarg || !*optarg || strchr(optarg, '\n')) {
    slurm_error("rt: --container-%s needs a value on one line", keys[val]);
    return -1;
  }
  free(values[val]);
  values[val] = strdup(optarg);
  return 0;
}

#define VALUE(n, k, arg, help) {(char *)n, (char *)arg, (char *)help, 1, k, value_cb}
#define FLAG(n, k, on, help) {(char *)n, NULL, (char *)help, 0, (k) * 2 + (on), flag_cb}
static struct spank_option options[] = {
    VALUE("container-image", O_IMAGE, "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
          "[rt] the image to run the tasks in: a stored name, a registry reference or a SquashFS, SIF or directory path"),
    VALUE("container-mounts", O_MOUNTS, "SRC[:DST[:FLAGS]][,...]",
          "[rt] bind mounts; FLAGS joined by '+': ro, rw, bind, rbind, private, rprivate, slave, rslave, nosuid, nodev"),
    VALUE("container-workdir", O_WORKDIR, "PATH", "[rt] the working directory inside the container"),
    VALUE("container-env", O_ENV, "NAME[,NAME...]",
          "[rt] variables whose values from the host override the image's"),
    VALUE("container-name", O_NAME, "NAME[:create|exec|no_exec|auto]",
          "[rt] a writable container kept for the job's later steps on each node"),
    VALUE("container-save", O_SAVE, "PATH", "[rt] save the container to a SquashFS file once the step's task 0 ends"),
    FLAG("container-mount-home", O_MOUNT_HOME, 1, "[rt] bind the user's home directory (rt's default)"),
    FLAG("no-container-mount-home", O_MOUNT_HOME, 0, "[rt] do not bind the user's home directory"),
    FLAG("container-writable", O_WRITABLE, 1, "[rt] a writable container (changes are discarded at exit unless named)"),
    FLAG("container-readonly", O_WRITABLE, 0, "[rt] a read-only container (rt's default)"),
    FLAG("container-remap-root", O_REMAP_ROOT, 1, "[rt] be root (uid 0) inside the container"),
    FLAG("no-container-remap-root", O_REMAP_ROOT, 0, "[rt] keep your own uid inside the container (the default)"),
    FLAG("container-entrypoint", O_ENTRYPOINT, 1, "[rt] run the image's ENTRYPOINT with the task's command"),
    FLAG("no-container-entrypoint", O_ENTRYPOINT, 0, "[rt] do not run the image's ENTRYPOINT (the default)"),
    SPANK_OPTIONS_TABLE_END};

static int site_arg(const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq) goto bad;
  size_t n = (size_t)(eq - arg);
  const char *v = eq + 1;
  if (n == 2 && !strncmp(arg, "rt", n)) {
    if (v[0] != '/' || strlen(v) >= sizeof rt_program) goto bad;
    strcpy(rt_program, v);
  } else if (n == 7 && !strncmp(arg, "enabled", n)) {
    enabled = strcmp(v, "0") != 0;
  } else if (n == 7 && !strncmp(arg, "storage", n)) {
    site_storage = strdup(v);
  } else if (n == 6 && !strncmp(arg, "mounts", n)) {
    site_mounts = strdup(v);
  } else if (n == 10 && !strncmp(arg, "mount_home", n)) {
    site_mount_home = strdup(strcmp(v, "0") ? "1" : "0");
  } else {
    goto bad;
  }
  return 0;
bad:
  slurm_error("rt: plugstack.conf argument `%s` is not rt=/PATH, enabled=0|1, storage=DIR, mounts=LIST or "
              "mount_home=0|1",
              arg);
  return -1;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
  for (int i = 0; i < ac; ++i)
    if (site_arg(av[i]) != 0) return -1;
  if (!enabled) return 0;
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR) return 0;
  for (struct spank_option *o = options; o->name; ++o)
    if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
      slurm_error("rt: cannot register --%s", o->name);
      return -1;
    }
  return 0;
}

static int any_option(void) {
  return values[O_IMAGE] || values[O_NAME];
}

/* "key=value" lines for rt; "mounts" may come more than once (the site's
 * first, then the user's, then the batch script's), and rt takes them all.
 * NULL when nothing asks for a container. */
static char *task_lines(const char *argv0, int batch) {
  if (!any_option()) return NULL;
  size_t size = 128 + (site_storage ? strlen(site_storage) : 0) + (site_mounts ? strlen(site_mounts) : 0);
  for (int k = 0; k < O_N; ++k) size += values[k] ? strlen(values[k]) + 16 : 0;
  size += argv0 ? 3 * strlen(argv0) : 0;
  char *out = malloc(size), *p = out;
  if (!out) return NULL;
  *p = 0;
  if (site_mounts) p += sprintf(p, "mounts=%s\n", site_mounts);
  if (site_storage) p += sprintf(p, "storage=%s\n", site_storage);
  for (int k = 0; k < O_N; ++k) {
    const char *v = values[k] ? values[k] : k == O_MOUNT_HOME ? site_mount_home : NULL;
    if (v) p += sprintf(p, "%s=%s\n", keys[k], v);
  }
  /* The batch script lives in slurmd's spool directory: bound in. */
  if (batch) p += sprintf(p, "mounts=%s:%s:ro\n", argv0, argv0);
  if (argv0) sprintf(p, "argv0=%s\n", argv0);
  return out;
}

/* rt --slurm-check with the options: rt says what is wrong. */
static int check(void) {
  char *lines = task_lines(NULL, 0);
  if (!lines) return 0;
  pid_t pid = fork();
  if (pid < 0) {
    slurm_error("rt: fork: %s", strerror(errno));
    free(lines);
    return -1;
  }
  if (pid == 0) {
    setenv("RT_SLURM_TASK", lines, 1);
    execl(rt_program, "rt", "--slurm-check", (char *)NULL);
    fprintf(stderr, "rt: cannot run %s: %s\n", rt_program, strerror(errno));
    _exit(126);
  }
  free(lines);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  (void)sp;
  (void)ac;
  (void)av;
  if (!enabled) return 0;
  /* srun, sbatch (#SBATCH lines), salloc: checked before any task starts. */
  spank_context_t ctx = spank_context();
  return ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR ? check() : 0;
}

/* srun --multi-prog: srun has read its configuration file into argv[1]
 * (argv[0] is the file's name). Slurm takes each task's program from that
 * file after this plugin's last word, so rt cannot be put in front of it. */
static int is_multi_prog(int argc, char **argv) {
  if (argc != 2 || !argv[0] || !argv[1] || !strchr(argv[1], '\n')) return 0;
  FILE *f = fopen(argv[0], "r");
  if (!f) return 0;
  size_t n = strlen(argv[1]), got = 0;
  char *buf = malloc(n + 2);
  if (buf) got = fread(buf, 1, n + 1, f);
  fclose(f);
  int same = buf && got == n && memcmp(buf, argv[1], n) == 0;
  free(buf);
  return same;
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (!enabled || !any_option()) return 0;
  int argc = 0;
  char **argv = NULL;
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS) return 0;
  if (!is_multi_prog(argc, argv)) return 0;
  slurm_error("rt: srun --multi-prog cannot run its tasks in a container (--container-image or "
              "--container-name): Slurm picks each task's program from %s after rt's plugin has run; "
              "put `rt exec IMAGE` in front of each program in that file instead",
              argv[0]);
  return -1;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (!enabled || spank_remote(sp) != 1) return 0;
  uint32_t step = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) return 0;
  /* The batch script runs in the container when sbatch was given the
   * options (#SBATCH lines), as with pyxis; other special steps (extern,
   * interactive) never do. */
  int batch = step == 0xfffffffbu;
  if (step >= 0xfffffff0u && !batch) return 0;
  int argc = 0;
  char **argv = NULL;
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv || !argv[0]) {
    if (!any_option()) return 0;
    slurm_error("rt: the task has no program");
    return -1;
  }
  char *lines = task_lines(argv[0], batch);
  if (!lines) return 0;
  int rc = spank_setenv(sp, "RT_SLURM_TASK", lines, 1);
  free(lines);
  if (rc != ESPANK_SUCCESS) {
    slurm_error("rt: cannot set RT_SLURM_TASK: %s", spank_strerror(rc));
    return -1;
  }
  /* This process is the task's own (forked, as the user): Slurm executes
   * argv[0] with these arguments, so rt gets the task's arguments and
   * runs the program it was given in RT_SLURM_TASK. */
  argv[0] = rt_program;
  return 0;
}
