#!/bin/bash
# MPI start-up and latency, interleaved in one run:
#  1. `mpirun -np N --oversubscribe X /bin/true` for X = nothing (bare),
#     ch-run DIR --, ch-run IMG.sqfs --, rt exec DIR, rt exec IMG.sqfs (one
#     container per node, the default under mpirun) and rt exec --no-join
#     IMG.sqfs; medians and ratios to bare.
#  2. ping-pong and allreduce latency (Open MPI, shared memory) bare and
#     inside rt (the image's Open MPI, and the host's injected with --mpi).
# As root it builds the Debian image (minbase + python3 + libopenmpi3) with
# mmdebstrap and re-runs itself as rt-test.
# Targets: rt SquashFS (joined) <= 1.3x bare; latency within 2 % of bare.
# RT_BASELINE=DIR (a directory holding another build's rt, readable by
# rt-test) adds its dir and sqfs rows to the same interleaved run.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-10}
np=${2:-16}
. "$src/bench/common.sh"
debian_rootfs
as_rt_test mpi-start "$rounds" "$np"
debian_in_store mpibench
"$RT" convert -q debian "$T/debian.sqfs"
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_disable_ipv6_family=1 \
  OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi OMPI_MCA_rmaps_base_oversubscribe=1

declare -A t
BENCH_UNIT_NS=1000  # timeit in µs

echo "== mpirun -np $np --oversubscribe X /bin/true, $rounds rounds (ms) =="
labels=("bare" "ch-run dir" "ch-run sqfs" "rt dir" "rt sqfs" "rt sqfs --no-join")
[ -z "${RT_BASELINE:-}" ] || labels+=("baseline rt dir" "baseline rt sqfs")
for r in $(seq "$rounds"); do
  timeit "bare" mpirun -np "$np" /bin/true
  timeit "ch-run dir" mpirun -np "$np" ch-run "$dir" -- /bin/true
  timeit "ch-run sqfs" mpirun -np "$np" ch-run "$T/debian.sqfs" -- /bin/true
  timeit "rt dir" mpirun -np "$np" "$RT" exec "$dir" /bin/true
  timeit "rt sqfs" mpirun -np "$np" "$RT" exec "$T/debian.sqfs" /bin/true
  timeit "rt sqfs --no-join" mpirun -np "$np" "$RT" exec --no-join "$T/debian.sqfs" /bin/true
  if [ -n "${RT_BASELINE:-}" ]; then
    timeit "baseline rt dir" mpirun -np "$np" "$RT_BASELINE/rt" exec "$dir" /bin/true
    timeit "baseline rt sqfs" mpirun -np "$np" "$RT_BASELINE/rt" exec "$T/debian.sqfs" /bin/true
  fi
done
bare=$(echo "${t[bare]}" | median)
for l in "${labels[@]}"; do
  m=$(echo "${t[$l]}" | median)
  awk -v l="$l" -v m="$m" -v b="$bare" 'BEGIN {printf "%-18s median %7.1f ms  %.2fx bare\n", l, m / 1000, m / b}'
done

echo "== latency, 2 ranks, best of 5 x 20000 (us) =="
cd "$T"  # the working directory is bound: the program lives here
mpicc -O2 -o "$T/lat" "$src/bench/mpi_latency.c"
declare -A pp ar
lat() {
  local label=$1 out
  shift
  out=$(mpirun -np 2 "$@" "$T/lat" 20000 5 2>"$T/err") || { echo "bench: $label failed: $(cat "$T/err")" >&2; exit 1; }
  pp[$label]+="$(echo "$out" | awk '{print $2}') "
  ar[$label]+="$(echo "$out" | awk '{print $4}') "
}
fmedian() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
llabels=("bare" "rt sqfs" "rt sqfs --mpi")
for r in $(seq 5); do
  lat "bare"
  lat "rt sqfs" "$RT" exec "$T/debian.sqfs"
  lat "rt sqfs --mpi" "$RT" exec --mpi "$T/debian.sqfs"
done
bpp=$(echo "${pp[bare]}" | fmedian)
bar=$(echo "${ar[bare]}" | fmedian)
for l in "${llabels[@]}"; do
  awk -v l="$l" -v p="$(echo "${pp[$l]}" | fmedian)" -v a="$(echo "${ar[$l]}" | fmedian)" -v bp="$bpp" -v ba="$bar" \
    'BEGIN {printf "%-14s ping-pong %.3f us (%+.1f %%)  allreduce %.3f us (%+.1f %%)\n", l, p, (p / bp - 1) * 100, a, (a / ba - 1) * 100}'
done
