// Public entry points for images: pull, import, and the store.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rt {

struct StoreOptions {
  std::string storage;  // empty: $RT_STORAGE or /var/tmp/$USER.rt
  int verbosity = 0;    // -1 quiet
};

struct ImportOptions : StoreOptions {
  std::string name;                  // store name; default: from the source
  uint64_t max_bytes = 0;            // unpacked size limit; 0: the default limit
  std::string squash;                // write this SquashFS file from the layers instead of storing a tree
  std::string compression = "zstd";  // for --squash: zstd, gzip, lz4, xz, lzo
  int level = 0;                     // for --squash: 0 = zstd 3, gzip 6
  std::string format;                // how the store keeps it: "dir", "sqfs"; "": $RT_STORE_FORMAT, else dir
};

// "dir" or "sqfs" from `format`, else $RT_STORE_FORMAT, else "dir"; throws
// rt::Error for anything else.
std::string store_format(const std::string& format);

struct PullOptions : ImportOptions {
  std::string platform;     // OS/ARCH[/VARIANT]; empty: the host's
  std::string ca_file;      // extra CA bundle for TLS
  bool insecure = false;    // do not verify TLS certificates (test registries only)
  bool plain_http = false;  // http:// instead of https:// (test registries only)
  int jobs = 4;             // parallel layer downloads
  bool if_missing = false;  // when the store has the image (under its lock), ask the registry nothing
  std::string policy;       // --policy: containers-policy.json(5); "": ~/.config/containers/policy.json, /etc/containers/policy.json
};

// Signing what is pushed, as skopeo copy --sign-by does: a simple-signing
// signature (containers-signature(5)) of the manifest pushed, written into
// the file:// lookaside store registries.d names for the registry.
struct PushSigning {
  std::string by;               // --sign-by: a secret key of the user's GnuPG keyring ($GNUPGHOME or ~/.gnupg)
  std::string by_key;           // --sign-by-key FILE: a secret key file instead (armoured or binary)
  std::string by_sigstore_key;  // --sign-by-sigstore-private-key FILE: a sigstore signature, attached in the registry
  std::string passphrase_file;  // --sign-passphrase-file: else $RT_SIGN_PASSPHRASE, else the terminal
  bool gpg() const { return !by.empty() || !by_key.empty(); }
  bool wanted() const { return gpg() || !by_sigstore_key.empty(); }
};

struct PushOptions : StoreOptions {
  std::string ca_file;               // extra CA bundle for TLS
  bool insecure = false;             // do not verify TLS certificates (test registries only)
  bool plain_http = false;           // http:// instead of https:// (test registries only)
  std::string compression = "gzip";  // for layers kept uncompressed: gzip (every client reads it) or zstd
  int jobs = 0;                      // compression threads; 0: the processors
  PushSigning sign;                  // --sign-by ...: sign the manifest pushed
};
// rt push: a stored image (or any image convert reads) to a registry as an
// OCI image: its layers compressed (once: remembered in the store), blobs
// the registry has skipped, then the manifest under REF's tag, and with
// `sign` its signature in the lookaside store. Returns the manifest's
// digest. Throws rt::Error.
std::string push(const std::string& image, const std::string& ref, const PushOptions& options);

// Default unpacked-size limit: 64 GiB (a guard against decompression bombs).
inline constexpr uint64_t kDefaultMaxBytes = 64ull << 30;

// Each returns the name the image was stored under. Throw rt::Error.
std::string pull(const std::string& ref, const PullOptions& options);
// rt exec oras://REF, the node's first time: the manifest resolved (the
// trust policy applied), the chunk index fetched and checked, and the
// node cache's entry made in the store with what every start reads
// (squash/lazy.hpp); a file without a chunk index is fetched whole.
// Returns the entry's file. Once per reference and store: ranks wait for
// the first.
std::string lazy_open(const std::string& ref, const PullOptions& options);
// The fetcher of the entry `dir`, serving its SquashFS server on stdin and
// stdout, filling the file in the background when idle if `fill`; returns
// at EOF.
int lazy_fetch(const std::string& dir, bool fill);
std::string import_image(const std::string& source, const ImportOptions& options);

struct ImageSummary {
  std::string name, ref, manifest_digest, config_digest, created, dir;
  uint64_t size = 0;
  std::string config;  // inspect only: the image config's `config` (Env, Cmd, User, ...) as JSON; "" if none
  std::string base_name, base_digest;  // inspect only: what rt build built it from (FROM, its config digest)
  std::string policy;  // inspect only: what the trust policy admitted a pulled image by, as JSON; "" if nothing was judged
  std::string site;    // an image of the site's store: its directory (dir is then its file); "" for the user's store
  std::string file_digest;  // ... and its file's digest, as the site's index gives it
};
struct ConvertOptions : StoreOptions {
  std::string compression = "zstd";  // zstd, gzip, lz4, xz, lzo
  int level = 0;                     // 0: the algorithm's default here (zstd 3, gzip 6)
  int jobs = 0;                      // 0: all processors
  bool force = false;                // replace an existing destination
  std::string to;                    // "sqfs", "sif", "dir", "store"; "": from DST's form
  std::string format;                // into the store: as ImportOptions::format
};
// SRC (store name, bundle, root-filesystem directory, SquashFS file,
// docker-archive, OCI layout or root-filesystem tar) into DST: a SquashFS
// file (with the image configuration inside at /.rt/image-config.json), a
// SIF file holding that SquashFS image, a bundle directory, or a store
// name. DST's form decides unless `to` is set: a name ending in
// .sqfs/.squashfs/.sqsh is SquashFS, .sif SIF, a path with a '/' a
// directory, a plain name a store name.
void convert(const std::string& src, const std::string& dst, const ConvertOptions& options);

struct OverlayCreateOptions : StoreOptions {
  unsigned size_mib = 64;         // --size: the file system's size
  bool sparse = false;            // --sparse: blocks allocated as written, not at once
  std::vector<std::string> dirs;  // --create-dir DIR: made in the overlay (as /DIR in the container)
};
// rt overlay create: FILE, a new ext3 overlay image as Apptainer makes
// one (upper/ and work/ at its root, the user's), for `rt exec --overlay
// FILE`. Throws rt::Error naming FILE; an existing FILE is refused, and
// nothing is left of a failed one.
void overlay_create(const std::string& file, const OverlayCreateOptions& options);

struct BuildOptions : StoreOptions {
  std::string tag;                      // -t: the store name of the result
  std::string file;                     // -f: the Dockerfile; "": CONTEXT/Dockerfile; "-": stdin
  std::string context = ".";            // the directory COPY and ADD read from
  std::vector<std::string> build_args;  // --build-arg K=V (or K: from the environment)
  std::vector<std::string> build_arg_files;  // --build-arg-file FILE: K=V lines (# comments)
  std::string target;                   // --target: the stage to build; "": the last
  bool no_cache = false;                // run every step; the cache is still written
  std::string format;                   // how the store keeps it, as ImportOptions::format
  std::string output;                   // -o: also write the image there, in any form rt convert writes
  std::string push;                     // --push: then push it there (rt push's defaults)
  PushSigning push_sign;                // --sign-by ...: and sign it, as rt push does
  std::vector<std::string> secrets;     // --secret id=ID,src=FILE | id=ID[,env=VAR]: for RUN --mount=type=secret
  std::vector<std::string> ssh;         // --ssh default | ID=SOCKET: SSH agents for RUN --mount=type=ssh
  bool host_paths = false;              // --from-host: FROM and COPY --from may name host paths
  bool no_test = false;                 // --notest: a definition file's %test is not run
  bool warn_unused_args = false;        // --warn-unused-build-args: a definition file's unused ones only warned of
  std::string policy;                   // --policy: the trust policy for FROM images pulled, as PullOptions::policy
};
// rt build: runs a Dockerfile's instructions (or an Apptainer definition
// file's sections) without root (RUN under root
// emulation) into an image of the store with one layer per step that
// changes files; each step's result is cached. Returns the name stored.
// Throws rt::Error (a failing RUN: exit_code 1, the step's status in the
// message).
std::string build(const BuildOptions& options);

std::vector<ImageSummary> list_images(const StoreOptions& options);
ImageSummary inspect_image(const std::string& name, const StoreOptions& options);
// rt inspect FILE.sif: the header, the objects (partitions, signatures,
// definition file, labels) and Apptainer's scripts, as JSON. Throws
// rt::Error when `path` is not a readable SIF file.
std::string inspect_sif(const std::string& path);

struct VerifyOptions : StoreOptions {
  std::vector<std::string> keys;       // --key FILE: OpenPGP public keys (armoured or binary), repeatable
  std::vector<std::string> gpg_homes;  // --gpg-home DIR: every public key of these GnuPG homes
  bool legacy = false;                 // --legacy-insecure: accept legacy signatures (data only)
};
// rt verify FILE.sif: every object group of the file is signed (as
// Apptainer signs, SIF's pkg/integrity format) by one of the keys given,
// and the header, descriptors and data match what was signed. Returns a
// line per group ("object group 1 (objects 1, 2): signed by FPR");
// throws rt::Error naming the file, group, signature and object of every
// failure.
std::vector<std::string> verify_sif(const std::string& path, const VerifyOptions& options);

struct SignOptions : StoreOptions {
  std::string key;          // --key FILE: the OpenPGP secret key (armoured or binary)
  std::string fingerprint;  // --fingerprint: which key of FILE (needed when it holds several)
};
// rt sign FILE.sif: adds a signature of every object group, as Apptainer
// signs (clear-signed JSON of the digests, the key's fingerprint in the
// descriptor), in place. The key's passphrase, when it has one, comes from
// $RT_SIGN_PASSPHRASE, else a prompt on /dev/tty. Returns a line per
// signature added; throws rt::Error.
std::vector<std::string> sign_sif(const std::string& path, const SignOptions& options);
struct KeyGenerateOptions : StoreOptions {
  std::string output_prefix;    // --output-prefix: PREFIX.private and PREFIX.pub
  std::string passphrase_file;  // --passphrase-file: else $RT_SIGN_PASSPHRASE, else asked
};
// rt key generate: a sigstore key pair as skopeo generate-sigstore-key and
// cosign generate-key-pair write one (ECDSA P-256; the private key
// encrypted with the passphrase: scrypt, NaCl secretbox), for rt push
// --sign-by-sigstore-private-key and a policy's sigstoreSigned. Neither
// file may exist; the private one is made 0600. Returns the two paths.
std::pair<std::string, std::string> generate_key(const KeyGenerateOptions& options);
// One of Apptainer's files in an image (a path, a SIF or SquashFS file, a
// stored name), as apptainer inspect --deffile and the like print it:
// `section` is deffile, labels, runscript, startscript, test, help or
// environment (each env/*.sh after a `=== PATH ===` line). nullopt when the
// image has none; throws rt::Error for an unknown section or image.
std::optional<std::string> inspect_section(const std::string& image, const std::string& section,
                                           const StoreOptions& options);
// Whether every command takes `name` as a path rather than a store name:
// it begins with /, ./ or ../, or holds a / and is no registry reference
// and not a stored name (rt-image(1), IMAGE NAMES).
bool image_is_path(const std::string& name, const StoreOptions& options);
void remove_image(const std::string& name, const StoreOptions& options);
// What rt prune removed.
struct PruneReport {
  size_t blobs = 0;  // cached layers no image uses
  uint64_t blob_bytes = 0;
  size_t facts = 0;  // remembered facts of SquashFS files changed or gone
  uint64_t fact_bytes = 0;
  size_t debris = 0;       // work of interrupted runs
  size_t instances = 0;    // records of instances whose processes have all exited
  size_t build_cache = 0;  // rt build's cached steps (their layers go with the blobs)
  size_t run_caches = 0;   // rt build's RUN --mount=type=cache directories
  size_t staged = 0;       // jobs' staged images (rt stage) whose jobs have ended
  uint64_t freed() const { return blob_bytes + fact_bytes; }
};
PruneReport prune_store(const StoreOptions& options);

// rt site-store index DIR, for the site's administrators: (re)writes
// DIR/index.json (atomically, mode 0644) from the SquashFS and SIF files
// in DIR, each with its format, size and SHA-256 digest; names an earlier
// index gave are kept, a new file is named after the file (app-1.0.sqfs:
// app-1.0). Refuses what users' rt would refuse (a directory or file
// another user could change). Returns a line per image and one for the
// index; throws rt::Error naming the file.
std::vector<std::string> index_site_store(const std::string& dir, const StoreOptions& options);

// rt stage: in a Slurm job (batch script or salloc), copies each image
// once to every node's store (staged/JOB/, by sbcast) for the job's steps,
// which then run it from there; a stored image the store lacks is pulled
// once, as SquashFS. `clean`: removes the job's copies from every node.
struct StageOptions : StoreOptions {
  bool clean = false;
};
void stage(const std::vector<std::string>& images, const StageOptions& options);
// On one node (run by stage through srun): makes the job's directory, or
// removes it.
void stage_node(const std::string& job, bool clean, const StoreOptions& options);
// The first node of a step over several nodes whose ranks run a stored
// image: once per job and node list, sends it to the step's other nodes
// (pulled first when missing); a failure is sent to them too.
void stage_step(const std::string& image, const StoreOptions& options);

// Saves credentials for `registry` (a host[:port], or a reference whose
// registry is meant) in ~/.docker/config.json; returns the registry host.
struct LoginOptions {
  std::string ca_file;
  bool insecure = false, plain_http = false;
  bool check = true;  // ask the registry first; nothing is saved when it refuses
};
std::string login(const std::string& registry, const std::string& user, const std::string& password,
                  const LoginOptions& options = {});
// rt logout: removes the saved credentials of `registry` (an error when
// there are none), or all of them for an empty `registry`; the keys of
// ~/.docker/config.json removed.
std::vector<std::string> logout(const std::string& registry);

// rt doctor: one check of what rt needs or uses on this node.
struct DoctorCheck {
  enum class Status { Ok, Warn, Fail };
  std::string name;
  Status status = Status::Ok;
  std::string detail;  // what was found
  std::string fix;     // what to do, when not Ok
};
// Checks user namespaces, /dev/fuse, overlayfs in a user namespace,
// openat2, the store, launchers and MPI, NVIDIA GPUs and CDI specs,
// InfiniBand and the site configuration. Creates nothing.
std::vector<DoctorCheck> doctor(const StoreOptions& o);

// For a program running image commands, first thing in main: temporary
// files are removed on SIGINT, SIGTERM and SIGHUP, and SIGPIPE is ignored
// (a helper such as tar2sqfs that dies is an error with a message, not a
// silent exit 141).
void handle_signals_for_image_commands();

}  // namespace rt
