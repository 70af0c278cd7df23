# Shared helpers of the integration tests; sourced, never run.
# The tests drive the built rt as an unprivileged user; as root they skip
# (and fail under RT_TEST_REQUIRE_USERNS=1, as in CI): a container test that
# passes only as root proves nothing.
set -euo pipefail
# A command the test did not expect to fail ends it (set -e): say which.
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/} line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

: "${RT:?RT must name the rt binary}"
: "${RT_PROBE:?RT_PROBE must name the probe binary}"
BUSYBOX=${BUSYBOX:-/bin/busybox}

skip() {
  echo "SKIP: $*" >&2
  if [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
    echo "FAIL: skipping is not allowed here (RT_TEST_REQUIRE_USERNS=1)" >&2
    exit 1
  fi
  exit 77
}
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
# wait_until SECONDS CMD...: runs CMD every 0.1 s until it succeeds (0) or
# SECONDS have passed (1). Generous limits: a loaded machine is slow, and
# only a failure waits them out.
wait_until() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.1
  done
}

[ "$(id -u)" != 0 ] || skip "running as root; run the integration tests as an unprivileged user"
unshare -Urm true 2>/dev/null || skip "unprivileged user namespaces are not available"
[ -x "$BUSYBOX" ] || skip "$BUSYBOX missing (Debian package busybox-static)"

mkdir -p "${RT_TEST_TMP:-/tmp}"
T=$(mktemp -d "${RT_TEST_TMP:-/tmp}/rt-test.XXXXXX")
STOP_PIDS=  # processes a test started, ended on exit
cleanup() {
  [ -z "${POD_RUN:-}" ] || rootless_podman_done
  [ -z "$STOP_PIDS" ] || kill $STOP_PIDS 2>/dev/null || true  # some may have ended
  chmod -R u+w "$T" 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

# Debian's podman as this user, rootless, to read what rt writes: one uid
# mapped (no subordinate ids), vfs storage under $T, and a short private
# run directory (podman takes a run root of at most 50 characters).
# rootless_podman starts it, `pod ARGS` runs it, rootless_podman_done (also
# on exit) removes its store and ends its pause process.
rootless_podman() {
  POD_HOME=$T/podman-home
  POD_RUN=$(mktemp -d /tmp/rt-pod.XXXXXX)
  mkdir -p "$POD_HOME" "$POD_RUN/xdg"
}
pod() {
  env HOME="$POD_HOME" XDG_RUNTIME_DIR="$POD_RUN/xdg" podman --root "$POD_HOME/storage" --runroot "$POD_RUN/run" \
    --storage-driver vfs --storage-opt vfs.ignore_chown_errors=true "$@"
}
rootless_podman_done() {
  pod system reset -f >/dev/null 2>&1 || true
  [ -s "$POD_RUN/xdg/libpod/tmp/pause.pid" ] && kill "$(cat "$POD_RUN/xdg/libpod/tmp/pause.pid")" 2>/dev/null
  chmod -R u+w "$POD_RUN" 2>/dev/null
  rm -rf "$POD_RUN"
  POD_RUN=
}
export HOME=${HOME:-/tmp}
# A SquashFS image's server exits as soon as its last container has (tests
# look for leftover processes); squash.sh tests the default linger itself.
export RT_SQUASHFS_LINGER=0
# Likewise an --overlay directory's holder: none, each container mounts its
# own; overlay.sh tests the holder.
export RT_OVERLAY_LINGER=0

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
  [ "$1" == "$2" ] || fail "$3: expected [$2], got [$1]"
  pass "$3"
}
# expect_match ACTUAL REGEX WHAT
expect_match() {
  [[ "$1" =~ $2 ]] || fail "$3: [$1] does not match /$2/"
  pass "$3"
}
# expect_status EXPECTED WHAT -- COMMAND...: runs COMMAND, keeps stderr in $ERR
expect_status() {
  local want=$1 what=$2
  shift 3
  local rc=0
  "$@" >"$T/out" 2>"$T/err" || rc=$?
  OUT=$(cat "$T/out")
  ERR=$(cat "$T/err")
  [ "$rc" = "$want" ] || fail "$what: exit status $rc, expected $want; stderr: $ERR"
  pass "$what (exit $rc)"
}

# make_image DIR: the example busybox root filesystem plus the probe at /bin/rt-probe.
make_image() {
  bash "${RT_SOURCE_DIR:?}/examples/make-busybox-image.sh" "$1"
  cp "$RT_PROBE" "$1/bin/rt-probe"
}

# make_tricky_layers DIR: DIR/l1.tar(.gz) and DIR/l2.tar(.zst), valid but
# tricky: whiteouts, an opaque directory, file/dir/symlink replacements, a
# write through lib -> usr/lib, a 0555 directory, setuid, a device, a fifo,
# a hard link.
make_tricky_layers() {
  local d=$1 oci="python3 ${RT_SOURCE_DIR:?}/test/integration/ocitool.py"
  mkdir -p "$d"
  $oci tar "$d/l1.tar" dir:a dir:a/sub file:a/sub/keep file:a/gone file:x/f dir:ro:0555 file:ro/inside \
    file:suid:4755 dir:usr dir:usr/lib symlink:lib:usr/lib file:f2d dir:d2f file:d2f/x symlink:s2f:a
  $oci tar "$d/l2.tar" file:a/.wh.gone file:x/.wh..wh..opq file:x/new file:lib/viasymlink \
    dir:f2d file:f2d/child file:d2f file:s2f:0644:now-a-file chardev:dev/evil fifo:pipe hardlink:a/hl:a/sub/keep
  gzip -k "$d/l1.tar"
  zstd -q "$d/l2.tar" -o "$d/l2.tar.zst"
}

# mpi_programs: test/hpc/mpi_hello.c built for Open MPI ($T/hello-ompi) and
# MPICH ($T/hello-mpich); every MPI kept on loopback and shared memory.
mpi_programs() {
  mpicc -O2 -o "$T/hello-ompi" "$RT_SOURCE_DIR/test/hpc/mpi_hello.c"
  mpicc.mpich -O2 -o "$T/hello-mpich" "$RT_SOURCE_DIR/test/hpc/mpi_hello.c"
  export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_disable_ipv6_family=1 \
    OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi
  export UCX_TLS=self,sm UCX_NET_DEVICES=lo
}

# tree_listing DIR: names, types, modes, sizes, link targets; for "unchanged" checks.
tree_listing() { (cd "$1" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort); }

IMG="$T/img"
make_image "$IMG"

# This test's rt processes left running: its rt, and the holders and servers
# of its images and overlays (titled "rt-join PATH", "rt-sqfs PATH",
# "rt-ovl PATH"), which all lie in $T.
rt_processes() { pgrep -u "$(id -u)" -f "^($RT |rt-(join|sqfs|ovl) $T/)" || true; }

# Gives this test its own copy of rt: its processes (holders, servers) are
# then told from those of tests running beside it by the program's path.
own_rt() {
  cp "$RT" "$T/rt" && cp "$RT_IMAGE" "$T/rt-image"
  RT=$T/rt
  RT_IMAGE=$T/rt-image
}

# On the four-node cluster (hpc_cluster, hpc_slurm_plugin):
# judge_mpi WHAT OUTPUT: mpi_hello's 8 ranks, size 8, allreduce right, two
# on each node.
judge_mpi() {
  expect_eq "$(echo "$2" | grep -c ' of 8 sum 28 ok')" 8 "$1: 8 ranks, size 8, allreduce right"
  expect_eq "$(echo "$2" | grep ' of 8 sum 28 ok' | sed 's/.* on //' | sort | uniq -c | awk '{print $1 $2}' | tr '\n' ' ')" \
    "2node1 2node2 2node3 2node4 " "$1: two ranks on each node"
}
# Open MPI pinned to TCP between nodes and shared memory within one. Its
# one-sided component over UCX is left out: it loaded libucs, which now and
# then crashed (signal 11, a null pointer) at start-up on an emulated node.
ompi=(env OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx
  OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 OMPI_MCA_oob_tcp_disable_ipv6_family=1)
# ompi_run WHAT COMMAND...: an Open MPI launch across the emulated nodes,
# its output in $out. Debian 12's Open MPI 4.1.4 crashes now and then in
# MPI_Init there, more often on a loaded machine: its TCP transport hands
# a peer's first message (BTL tag 0x41, a PML match) to a callback not yet
# registered, a call through a null pointer (core files: mca_btl_tcp.so
# under opal_progress in ompi_mpi_init). srun of the same program without
# rt crashes as often (4 of 30 launches with the 2 cores busy). Such a
# launch is tried again, up to 4 times, and says so in the test's output;
# any other failure fails the test.
ompi_run() {
  local what=$1 try
  shift
  for try in 1 2 3 4; do
    if out=$("$@" 2>"$T/err"); then return 0; fi
    grep -q 'Process received signal' "$T/err" || fail "$what: $(cat "$T/err")"
    echo "note: $what: Open MPI crashed ($(grep -m1 'Signal:' "$T/err")), try $try" >&2
  done
  fail "$what (crashed 4 times): $(cat "$T/err")"
}
