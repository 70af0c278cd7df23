#!/bin/bash
# The whole test suite. As root (CI): installs the packages, creates the
# unprivileged user rt-test, builds and runs every test as that user with
# skips turned into failures; root only prepares the setuid fixtures. As any
# other user: builds in build/ and runs the suite as that user.
#   --sanitize  the same suite built with AddressSanitizer and UBSan
#   --fuzz      the fuzz targets under libFuzzer (clang), a minute each
#   --cluster   only the multi-node tests (label `cluster`), which the
#               default suite runs too, on a four-node Slurm cluster
#               (test/hpc/cluster.sh)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
suffix="" cmake_args=(-DRT_DEVELOPER=ON) ctest_args=(-LE fuzz) with_cluster=1
case "${1:-}" in
  "") ;;
  --cluster)
    ctest_args=(-L cluster)
    ;;
  --sanitize)
    suffix=-sanitize cmake_args+=(-DRT_SANITIZE=ON)
    # Leaks at exit are not errors for a program that execs and forks.
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
    ;;
  --fuzz)
    suffix=-fuzz cmake_args+=(-DRT_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++) ctest_args=(-L fuzz)
    with_cluster=""
    ;;
  *)
    echo "usage: $0 [--sanitize|--fuzz|--cluster]" >&2
    exit 2
    ;;
esac

if [ "$(id -u)" != 0 ]; then
  cmake -S "$src" -B "$src/build$suffix" "${cmake_args[@]}" >/dev/null
  cmake --build "$src/build$suffix" -j"$jobs"
  exec ctest --test-dir "$src/build$suffix" --output-on-failure -j"$jobs" "${ctest_args[@]}"
fi

bash "$src/test/install-deps.sh" ${suffix:+"${1}"}
user=rt-test
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
# A second unprivileged user, the attacker of the shared-node tests:
# rt-test may run commands as rt-test2 (and as nobody else) through sudo.
user2=rt-test2
id "$user2" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user2"
printf '%s ALL=(%s) NOPASSWD: ALL\n' "$user" "$user2" >/etc/sudoers.d/rt-test
chmod 0440 /etc/sudoers.d/rt-test
# SquashFS images are mounted through /dev/fuse, which udev makes 0666;
# minimal machines leave it 0600.
[ -c /dev/fuse ] && chmod 0666 /dev/fuse
if [ "$(cat /proc/sys/user/max_user_namespaces)" = 0 ]; then
  echo "run-all: user.max_user_namespaces is 0 on this machine; rt cannot work here" >&2
  exit 1
fi

work=/var/tmp/rt-test-suite$suffix
fixtures=/var/tmp/rt-test-fixtures
slurm=/var/tmp/rt-test-slurm
cluster=/var/tmp/rt-test-cluster
cleanup() {
  bash "$src/test/hpc/slurm-testbed.sh" stop "$slurm" || true
  bash "$src/test/hpc/cluster.sh" stop "$cluster" || true
  rm -f /etc/sudoers.d/rt-test-cluster
  rm -rf "$fixtures"
}
trap cleanup EXIT
rm -rf "$work" "$fixtures"
install -d -o "$user" "$work" "$work/src"
(cd "$src" && tar --exclude=./build --exclude=./.git -cf - .) | runuser -u "$user" -- tar -xf - -C "$work/src"
cd "$work"
runuser -u "$user" -- cmake -S "$work/src" -B "$work/build" "${cmake_args[@]}" >/dev/null
runuser -u "$user" -- cmake --build "$work/build" -j"$jobs"

# A Debian bookworm root filesystem (minbase + python3) for the realistic
# pull test; built once per machine from the Debian mirror.
debian=/var/tmp/rt-test-debian.tar
if [ ! -s "$debian" ]; then
  mmdebstrap --quiet --format=tar --variant=minbase --include=python3 bookworm "$debian.tmp"
  mv "$debian.tmp" "$debian"
fi
chmod 644 "$debian"
# The same with Open MPI and MPICH inside, for MPI programs that bring
# their own MPI.
debian_mpi=/var/tmp/rt-test-debian-mpi.tar
if [ ! -s "$debian_mpi" ]; then
  mmdebstrap --quiet --format=tar --variant=minbase --include=libopenmpi3,libmpich12 bookworm "$debian_mpi.tmp"
  mv "$debian_mpi.tmp" "$debian_mpi"
fi
chmod 644 "$debian_mpi"
# A Debian trixie (13) root filesystem, minbase with AppArmor (whose parser,
# 4.1, knows the `userns` rule that bookworm's 3.0 does not: apparmor.sh
# checks rt's profile with it), libstdc++6, and skopeo 1.18 (which signs and
# checks sigstore signatures: sigstore.sh's peer; bookworm's 1.9 cannot), for
# tests that need a newer Debian; built once per machine.
debian13=/var/tmp/rt-test-debian13-skopeo.tar
if [ ! -s "$debian13" ]; then
  mmdebstrap --quiet --format=tar --variant=minbase --include=apparmor,libstdc++6,skopeo trixie "$debian13.tmp"
  mv "$debian13.tmp" "$debian13"
fi
chmod 644 "$debian13"

# rt build's Dockerfiles built by podman build (as root, --isolation=chroot)
# from the same Debian tree, for the comparison in build.sh; redone only
# when they change.
podman_ref=/var/tmp/rt-test-podman
bash "$src/test/build/podman-reference.sh" "$podman_ref" "$debian"

# A real single-node Slurm on 127.0.0.1 for the srun tests.
bash "$src/test/hpc/slurm-testbed.sh" start "$slurm" >/dev/null
# A real cluster of four nodes (network, mount and UTS
# namespaces of their own), sharing the suite's directory as the parallel
# file system; rt-test reaches it through sudo $cluster/on, as rt-test.
if [ -n "$with_cluster" ]; then
  bash "$src/test/hpc/cluster.sh" start 4 "$cluster" "$work" >/dev/null
  # rt's Slurm plugin, from a root-owned copy (slurmstepd loads it as root).
  install -m 0644 "$work/build/rt_spank.so" "$cluster/rt_spank.so"
  echo "required $cluster/rt_spank.so rt=$work/build/rt" >"$cluster/plugstack.conf"
  printf '%s ALL=(root) NOPASSWD: %s/on\n' "$user" "$cluster" >/etc/sudoers.d/rt-test-cluster
  chmod 0440 /etc/sudoers.d/rt-test-cluster
fi

# Root-owned setuid fixtures, in a directory only root can write.
install -d -m 0755 "$fixtures"
install -m 4755 -o root "$work/build/test/rt-suid-id" "$fixtures/suid-id"
install -m 4755 -o root "$work/build/rt" "$fixtures/rt-suid"

runuser -u "$user" -- env RT_TEST_REQUIRE_USERNS=1 RT_DEBIAN_ROOTFS="$debian" \
  RT_DEBIAN_MPI_ROOTFS="$debian_mpi" RT_DEBIAN13_ROOTFS="$debian13" SLURM_CONF="$slurm/slurm.conf" \
  RT_PODMAN_REFERENCE="$podman_ref" RT_SUID_FIXTURE="$fixtures/suid-id" RT_SUID_RT="$fixtures/rt-suid" RT_TEST_SECOND_USER="$user2" \
  RT_CLUSTER="$cluster" \
  ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
  ctest --test-dir "$work/build" --output-on-failure -j"$jobs" "${ctest_args[@]}"
