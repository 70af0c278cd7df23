// The store's layout: where it is and every name below it, in one place.
//
//   ROOT/blobs/sha256/HEX      verified blobs (layers, configs, manifests)
//   ROOT/images/NAME/          one bundle per image: rootfs/ (or image.sqfs),
//                              image-config.json, rt-image.json, file-attrs
//                              (set-id bits and xattrs rootfs/ cannot hold)
//   ROOT/tmp/                  work in progress, each piece with a held lock
//   ROOT/locks/                one lock per image name
//   ROOT/mnt/                  where SquashFS servers mount their image
//   ROOT/sqfs-facts/HASH       what exec reads from a SquashFS file
//   ROOT/elf-cache             host ELF facts for the injection
//   ROOT/plan-cache/KEY        whole injection plans, with what they were made from
//   ROOT/host-trees/HASH/      the injected files' links, made once, bound at each start
//   ROOT/secret                the user's secret (keyed socket names)
//   ROOT/instances/NAME/       an instance: record.json, out.log, err.log
//   ROOT/build-cache/KEY       rt build's cached steps (their layers are blobs)
//   ROOT/run-cache/HEX         rt build's RUN --mount=type=cache directories, one per id
//   ROOT/compressed/HEX.ALG    a layer's compressed blob (gzip, zstd) by its tar's digest, for push and export
//   ROOT/staged/JOB/           images staged on this node for Slurm job JOB (store/staged.hpp)
//   ROOT/verified/HASH         files checked once: SIF signatures, site images' digests (store/verified.hpp)
#pragma once
#include <string>

namespace rt::store {

// $RT_STORAGE, else /var/tmp/$USER.rt: node-local disk, because home
// directories are often on NFS.
std::string default_root();
// --storage when given (not empty), else default_root().
std::string store_path(const std::string& storage);

inline constexpr const char* kBlobsDir = "blobs/sha256";
inline constexpr const char* kImagesDir = "images";
inline constexpr const char* kTmpDir = "tmp";
inline constexpr const char* kLocksDir = "locks";
inline constexpr const char* kMountDir = "mnt";
inline constexpr const char* kSqfsFactsDir = "sqfs-facts";
inline constexpr const char* kElfCacheFile = "elf-cache";
// Whole injection plans with the identities of what they were made from.
inline constexpr const char* kPlanCacheDir = "plan-cache";
// The injected files' trees (run/injection: kept_host_files_tree).
inline constexpr const char* kHostTreesDir = "host-trees";
inline constexpr const char* kSecretFile = "secret";
inline constexpr const char* kInstancesDir = "instances";
inline constexpr const char* kBuildCacheDir = "build-cache";
inline constexpr const char* kCompressedDir = "compressed";
inline constexpr const char* kRunCacheDir = "run-cache";
inline constexpr const char* kStagedDir = "staged";
inline constexpr const char* kVerifiedDir = "verified";
// In an image's directory.
inline constexpr const char* kMetaFile = "rt-image.json";
// An image kept as one SquashFS file (--format sqfs) has it in place of rootfs/.
inline constexpr const char* kSquashFile = "image.sqfs";

}  // namespace rt::store
