#!/bin/bash
# Installs the Debian 12 packages rt needs to build, test and benchmark.
# Idempotent: does nothing when they are all there already.
#   install-deps.sh --runtime  only what rt needs to build and run
#   install-deps.sh --fuzz     adds clang and its libFuzzer (test/run-all.sh --fuzz)
set -euo pipefail
# What rt needs to build and run (the quickstart installs only these).
PACKAGES=(
  build-essential cmake pkg-config
  libcli11-dev libsodium-dev nlohmann-json3-dev libyaml-cpp-dev libseccomp-dev
  libarchive-dev libssl-dev libcurl4-openssl-dev libsquashfuse-dev libfuse3-dev
  libzstd-dev libisal-dev zlib1g-dev liblz4-dev liblzo2-dev liblzma-dev squashfs-tools squashfs-tools-ng
  busybox-static util-linux e2fsprogs fuse2fs fuse-overlayfs squashfuse
  libgpgme-dev gpg gpg-agent
)
# What the tests and benchmarks add: a registry, Slurm (iproute2 for its
# multi-node cluster, libslurm-dev for rt's Slurm plugin), both MPIs, the
# tools rt is compared with (podman: rt build's reference builder), and the
# SIF reference library (its test images, in golang-github-sylabs-sif-dev,
# and the Go compiler to build a reader of rt's SIF files against it),
# ssh-agent for RUN --mount=type=ssh.
TEST_PACKAGES=(
  catch2 sudo python3 openssl zstd zsh fish
  golang-github-sylabs-sif-dev golang-go openssh-client curl
  docker-registry skopeo apache2-utils mmdebstrap time
  charliecloud hyperfine podman
  openmpi-bin libopenmpi-dev mpich libmpich-dev
  munge slurmctld slurmd slurm-client iproute2 libslurm-dev
  snakemake cwltool toil
)
[ "${1:-}" = --runtime ] || PACKAGES+=("${TEST_PACKAGES[@]}")
[ "${1:-}" = --fuzz ] && PACKAGES+=(clang libclang-rt-14-dev)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "install-deps: run as root to install: ${missing[*]}" >&2; exit 1; }
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
