// The public entry point of `rt exec`, `rt run` and `rt shell`.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rt {

struct BindSpec {
  std::string src;  // host path
  std::string dst;  // path inside the container; empty: where SRC is on the host
  bool readonly = false;
};

// Parses "SRC[:DST[:ro|rw]]"; throws rt::Error on malformed input.
BindSpec parse_bind(std::string_view spec);

enum class ExecMode {
  Exec,   // run `command` (PROG ARGS...)
  Run,    // image ENTRYPOINT + (command if given, else CMD), in WORKDIR
  Shell,  // an interactive shell: $SHELL if the image has it, else /bin/sh
  Test,   // the image's test script (/.singularity.d/test) with `command` as its arguments
};

struct ExecOptions {
  ExecMode mode = ExecMode::Exec;
  std::string image;                 // directory (root filesystem or bundle) or store name
  std::string storage;               // image store; empty: $RT_STORAGE or /var/tmp/$USER.rt
  std::vector<std::string> command;  // PROG ARGS... (Exec), ARGS... (Run)

  std::optional<uid_t> uid;  // inside the container; default: the caller's
  std::optional<gid_t> gid;

  std::vector<BindSpec> binds;
  bool write = false;        // image writable (directory images)
  bool write_tmpfs = false;  // ephemeral overlay, discarded at exit
  // --overlay DIR[:ro]: directories laid over the image, the first lowest;
  // one without :ro takes the container's writes and keeps them (DIR/upper).
  std::vector<std::string> overlays;
  // --app NAME: a SCIF app of the image (/scif/apps/NAME): its environment,
  // and for run and test its runscript and test script.
  std::string app;
  bool private_tmp = false;  // a private tmpfs on /tmp instead of the host's
  bool image_tmp = false;    // the image's own /tmp, neither the host's nor a tmpfs (rt build's RUN)
  bool no_home = false;      // do not bind $HOME
  // "SRC[:DST]": SRC bound at DST (default SRC) as the home directory
  // (HOME and the passwd entry say DST) instead of the caller's home.
  std::string home;
  // Share no file system with the host beyond /dev, /proc, /sys, binds and
  // home: a private /tmp and /var/tmp, an empty home directory (unless
  // `home` is given), the working directory not bound (the program starts
  // in the home directory unless `cd` is given).
  bool contain = false;
  std::vector<std::string> tmpfs;  // directories inside given a private empty tmpfs
  std::string cd;            // working directory inside; default: the caller's
  // Namespaces beyond user and mount: a network namespace with only a
  // loopback interface (--net none), System V IPC of its own (--ipc).
  bool net_none = false;
  bool ipc_namespace = false;
  // A directory given as a path is the root filesystem even without bin,
  // usr or etc (Apptainer's sandbox directories).
  bool any_directory = false;

  bool clean_env = false;
  std::vector<std::string> env_unset;  // globs
  std::vector<std::string> env_files;
  std::vector<std::string> env_set;  // K=V

  // Host injection (HPC): "" none, "auto", "openmpi", "mpich" or a libmpi path.
  std::string mpi;
  enum class Inject { Auto, On, Off };
  Inject gpu = Inject::Auto;         // Auto: when the image sets NVIDIA_VISIBLE_DEVICES
  Inject ib = Inject::Auto;          // Auto: when the host has a verbs device (/dev/infiniband/uverbs*)
  bool fabric = false;               // only the host's libfabric (and xpmem), under the image's MPI
  bool glibc_replace = true;         // the host's glibc in place of an image's too old for what is injected
  std::vector<std::string> devices;  // CDI device names
  // One container per node shared by the ranks of a launch (run/join).
  // Auto: when the launcher reports more than one rank on this node.
  Inject join = Inject::Auto;

  int verbosity = 0;     // -1 quiet, 0 default, 1 plan, 2 plan + timings
  bool dry_run = false;  // print the plan, change nothing
  bool no_pull = false;  // an image reference not in the store is an error, not pulled
  std::string policy;    // --policy: the trust policy of that pull (else rt pull's default)
  std::vector<std::string> verify_keys;  // --verify-key FILE: a SIF image must verify with these (rt verify)
  bool seccomp = false;  // root emulation: chown, set*id, device mknod succeed without effect
  bool skip_sync = false;  // with seccomp: fsync & co return at once (rt build's RUN: its tree is scratch until stored)
  // Descriptors: the caller's inherited ones pass to the program (a
  // launcher's PMI_FD, pipes); with only_stdio, 0-2 alone (RUN, instances).
  bool only_stdio = false;
  // A PID namespace of its own, so that nothing it starts outlives the
  // program (RUN, instances); costs two waiting processes.
  bool pid_namespace = false;
  // The environment the container's starts from instead of rt's own (rt
  // build's RUN: PATH, TERM and the build arguments, which must never
  // steer rt itself, as PMIX_* paths would).
  std::optional<std::vector<std::string>> base_env;
};

// Replaces the calling process with the container's program (host ->
// namespace -> container root). Returns only when dry_run is set, or for
// ExecMode::Test when the image has no test script (said at -v); throws
// rt::Error (exit code 125/126/127) when anything fails before the program
// starts.
void exec(const ExecOptions& options);

// Whether the user's store (`storage` as ExecOptions::storage) holds an
// image named `name`; false when there is no store.
bool stored_image(const std::string& name, const std::string& storage);

// A stored image (a reference) in a Slurm step over several nodes comes
// from the step's first node, once per job (rt stage --step), not from a
// registry on every node. Called by every rank before exec: makes the
// node's staged/JOB directory (where the copy arrives) and returns true on
// the first node while the copy has not been sent to this step's nodes.
bool step_image_to_send(const ExecOptions& options);

// A SIF image that must verify before it runs: with --verify-key, or the
// site configuration's sif.keys (then every SIF file). nullopt when none
// is asked, or when this file (its device, inode, size and times) was
// verified with these keys before (a record in the store's verified/).
// Throws rt::Error for --verify-key with an image that is no SIF file.
struct SifVerification {
  std::string file;
  std::vector<std::string> keys;
  bool from_site = false;  // the keys are the site's (sif.keys)
  std::string storage;     // the store that keeps the record (as ExecOptions::storage)
  std::string identity;    // the file's device, inode, size and times, and the keys' contents
};
std::optional<SifVerification> sif_verification_needed(const ExecOptions& options);
// Keeps the record: `v` passed rt verify.
void remember_sif_verified(const SifVerification& v);
// On another node of such a step, when exec found the image neither stored
// nor staged: waits for the copy ($RT_STAGE_TIMEOUT seconds, default 600).
// False outside such a step; throws rt::Error naming the node when the
// copy cannot come.
bool wait_for_step_image(const ExecOptions& options);

// Makes root emulation (ExecOptions::seccomp) available to exec: the full
// program (rt-image), which links libseccomp, calls it at start; the static
// rt hands --seccomp runs to it.
void enable_root_emulation();

}  // namespace rt
