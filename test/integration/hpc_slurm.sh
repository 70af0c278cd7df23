#!/bin/bash
# srun rt exec on a real single-node Slurm (test/hpc/slurm-testbed.sh, started
# by test/run-all.sh), with Open MPI (PMIx) and MPICH (PMI-2): MPI inside the
# image and host MPI injected into an image without MPI, directory and
# SquashFS images, join on and off, and the ABI refusal. Every MPI case
# checks the communicator size: with the wrong PMI, MPICH runs N one-rank
# jobs and exits 0.
. "$(dirname "$0")/lib.sh"
[ -n "${SLURM_CONF:-}" ] || skip "SLURM_CONF not set (test/run-all.sh starts a Slurm with test/hpc/slurm-testbed.sh)"
[ -s "${RT_DEBIAN_ROOTFS:-}" ] || skip "RT_DEBIAN_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
[ -s "${RT_DEBIAN_MPI_ROOTFS:-}" ] || skip "RT_DEBIAN_MPI_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
for c in srun mpicc mpirun mpicc.mpich gcc; do
  command -v "$c" >/dev/null || skip "$c missing (slurm-client openmpi-bin libopenmpi-dev mpich libmpich-dev)"
done
export RT_STORAGE="$T/store"
own_rt
cd "$T"  # the working directory is bound: the test programs live here
"$RT_IMAGE" import -q "$RT_DEBIAN_ROOTFS" deb
"$RT_IMAGE" import -q "$RT_DEBIAN_MPI_ROOTFS" debmpi
"$RT_IMAGE" convert -q deb "$T/deb.sqfs"
"$RT_IMAGE" convert -q debmpi "$T/debmpi.sqfs"
# The image's Open MPI has no Debian configuration: keep it on loopback.
mpi_programs
export SLURM_OVERCOMMIT=1  # more tasks than cores

# run_mpi WHAT N PATTERN -- COMMAND...: all N ranks report size N and the allreduce.
run_mpi() {
  local what=$1 n=$2 want=$3
  shift 4
  local out
  out=$(timeout 120 "$@" 2>"$T/err") || fail "$what: exit $?: $(cat "$T/err")"
  expect_eq "$(echo "$out" | grep -c " of $n sum $((n * (n - 1) / 2)) ok")" "$n" "$what: $n ranks, size $n, allreduce right"
  [ -z "$want" ] || expect_match "$out" "$want" "$what: $want"
}

# --- Launcher detection and the basics of a rank -----------------------------
out=$(timeout 60 srun -n 2 "$RT" exec -v deb sh -c 'echo "pid=$$"' 2>&1)
expect_match "$out" "launcher: slurm, job [0-9]+\.[0-9]+, 2 ranks on this node" "srun: the launcher and local rank count are seen"
expect_match "$out" "one container per node" "srun -n 2: join is on by default"
# Only the ranks' output is counted: srun may add its own lines on stderr
# ("Job step creation temporarily disabled, retrying") on a busy machine.
out=$(timeout 60 srun -n 2 sh -c "$RT exec deb sh -c 'readlink /proc/self/ns/mnt; sleep 0.5'" 2>"$T/err") ||
  fail "srun -n 2 sh -c 'rt exec': $(cat "$T/err")"
[ "$(echo "$out" | sort -u | wc -l) $(echo "$out" | wc -l)" == "1 2" ] ||
  fail "srun -n 2 through a wrapper shell: not one container: [$out] (stderr: $(cat "$T/err"))"
pass "srun -n 2 through a wrapper shell: one container"
expect_status 3 "srun returns the rank's exit status" -- timeout 60 srun -n 2 "$RT" exec deb sh -c 'exit 3'

# --- MPI inside the image -------------------------------------------------------
for img in debmpi "$T/debmpi.sqfs"; do
  run_mpi "srun --mpi=pmix -n 4, image Open MPI ($img)" 4 "cma=ok" -- \
    srun --mpi=pmix -n 4 "$RT" exec "$img" "$T/hello-ompi" 4 cma
  run_mpi "srun --mpi=pmi2 -n 2, image MPICH ($img)" 2 "cma=ok" -- \
    srun --mpi=pmi2 -n 2 "$RT" exec "$img" "$T/hello-mpich" 2 cma
done
run_mpi "srun --mpi=pmix -n 2 --no-join, image Open MPI" 2 "" -- \
  srun --mpi=pmix -n 2 "$RT" exec --no-join debmpi "$T/hello-ompi" 2
run_mpi "mpirun -np 4, image Open MPI (SquashFS)" 4 "cma=ok" -- \
  mpirun -np 4 --oversubscribe "$RT" exec "$T/debmpi.sqfs" "$T/hello-ompi" 4 cma

# --- Host MPI injected into an image without MPI ------------------------------
for img in deb "$T/deb.sqfs"; do
  run_mpi "srun --mpi=pmix -n 4, host Open MPI injected ($img)" 4 "cma=ok" -- \
    srun --mpi=pmix -n 4 "$RT" exec --mpi "$img" "$T/hello-ompi" 4 cma
  run_mpi "srun --mpi=pmi2 -n 2, host MPICH injected ($img)" 2 "cma=ok" -- \
    srun --mpi=pmi2 -n 2 "$RT" exec --mpi=mpich "$img" "$T/hello-mpich" 2 cma
done
run_mpi "srun --mpi=pmix -n 2 --no-join, host Open MPI injected" 2 "" -- \
  srun --mpi=pmix -n 2 "$RT" exec --no-join --mpi deb "$T/hello-ompi" 2
# An image with both ABIs takes either host MPI.
run_mpi "srun --mpi=pmix -n 2, host Open MPI into an image with both ABIs" 2 "" -- \
  srun --mpi=pmix -n 2 "$RT" exec --mpi=openmpi debmpi "$T/hello-ompi" 2

# --- Refusal: host MPI of the other ABI ---------------------------------------
abi="$T/abi"
cp -a "$IMG" "$abi"
mkdir -p "$abi/usr/lib/x86_64-linux-gnu"
echo 'int MPI_Init(void){return 0;}' >"$T/m.c"
gcc -shared -fPIC -Wl,-soname,libmpich.so.12 -o "$abi/usr/lib/x86_64-linux-gnu/libmpich.so.12" "$T/m.c"
expect_status 125 "srun: Open MPI into an image with MPICH's ABI is refused" -- \
  timeout 60 srun -n 1 "$RT" exec --mpi=openmpi "$abi" true
expect_match "$ERR" "libmpich.so.12.*Open MPI" "the refusal names the image's library and the host ABI"

# Nothing of rt is left on the node once the steps are over.
no_rt() { [ -z "$(rt_processes)" ]; }
wait_until 20 no_rt || true
expect_eq "$(rt_processes)" "" "no rt process left after the steps"
