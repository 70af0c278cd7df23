#!/bin/bash
# The cost of a job start as nodes are added, on a real Slurm cluster of
# eight nodes (test/hpc/cluster.sh), as the unprivileged rt-test:
#  1. in one allocation per N = 1, 2, 4, 8 nodes: `rt stage` of a SquashFS
#     image (its time), then rounds of steps `srun -N N -n N*R X /bin/true`
#     for R = 1, 4, 16 ranks per node, X = nothing (bare), `rt exec` of a
#     directory and of a SquashFS image on the shared file system, and of
#     the staged SquashFS copy, and srun --container-image= of the SquashFS
#     image (rt's Slurm plugin); and an MPI init + allreduce + finalize
#     (Open MPI, srun --mpi=pmix) bare and in rt (the image's Open MPI) for
#     R = 1, 4; all interleaved. Round 1 is the job's first step (in
#     brackets: no container, no image server yet); the medians are of the
#     later rounds.
#  2. on one node, with strace: what one node's start reads from the
#     shared file system (metadata operations on its paths, bytes read from
#     its files), for each image form, first and later steps; and rt's
#     memory there (peak RSS of a rank, RSS of a SquashFS image's server).
# Usage (as root): bench/scale.sh [ROUNDS] (default 6). Builds the Debian
# image with mmdebstrap (Debian mirror) once per machine.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-6}
[ "$(id -u)" = 0 ] || { echo "bench/scale.sh: run it as root (it starts a cluster)" >&2; exit 1; }
. "$src/bench/common.sh"
debian_rootfs
[ -c /dev/fuse ] && chmod 0666 /dev/fuse
work=/var/tmp/rt-bench-scale
cluster=/var/tmp/rt-bench-scale-cluster
cleanup() { bash "$src/test/hpc/cluster.sh" stop "$cluster" || true; }
trap cleanup EXIT
copy_tree "$work"
as_user() { runuser -u rt-test -- "$@"; }
as_user bash -c "cd '$work' && . bench/common.sh && src='$work' && build_release rt rt-image rt_spank"
rt=$work/build-bench/rt
as_user bash "$work/examples/make-busybox-image.sh" "$work/img" >/dev/null
as_user mksquashfs "$work/img" "$work/img.sqfs" -comp zstd -all-root -quiet -no-progress >/dev/null
as_user cp "$work/img.sqfs" "$work/staged.sqfs"  # its own server and facts
as_user env RT_STORAGE="$work/store" "$rt" import -q "$BENCH_DEBIAN" debian
as_user env RT_STORAGE="$work/store" "$rt" convert -q debian "$work/debian.sqfs"
as_user rm -rf "$work/store"
as_user mpicc -O2 -o "$work/hello" "$work/test/hpc/mpi_hello.c"
bash "$src/test/hpc/cluster.sh" start 8 "$cluster" "$work" >/dev/null
install -m 0644 "$work/build-bench/rt_spank.so" "$cluster/rt_spank.so"  # root's: slurmstepd loads it
echo "required $cluster/rt_spank.so rt=$rt" >"$cluster/plugstack.conf"
on() { CLUSTER_DIR=$cluster bash "$cluster/cluster.sh" on "$1" --user rt-test "${@:2}"; }

echo "$("$rt" --version 2>&1 | head -1), $(on head srun --version), kernel $(uname -r), $(nproc) cores, 8 emulated nodes"

# --- 1. Job starts ----------------------------------------------------------------
# One allocation per N; the steps run inside it, each timed there.
cat >"$work/steps.sh" <<'STEPS'
set -euo pipefail
rt=$1 work=$2 n=$3 rounds=$4
cd "$work"  # the steps' working directory, which rt binds: the MPI program is there
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx \
  OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 OMPI_MCA_oob_tcp_disable_ipv6_family=1
step() {  # KEY ROUND COMMAND...: a step that fails or hangs (120 s) is counted as failed
  local key=$1 round=$2 s e
  shift 2
  s=$(date +%s%N)
  if ! timeout 120 "$@" >/dev/null 2>"$work/err.$n"; then
    echo "bench: $key (round $round) failed: $(tail -3 "$work/err.$n")" >&2
    echo "$key|$round|fail"
    return
  fi
  e=$(date +%s%N)
  echo "$key|$round|$(( (e - s) / 1000 ))"
}
step "$n stage" 1 "$rt" stage -q "$work/staged.sqfs"
for r in $(seq "$rounds"); do
  for per in 1 4 16; do
    np=$((n * per))
    step "$n $per bare" "$r" srun -O -N "$n" -n "$np" /bin/true
    step "$n $per dir" "$r" srun -O -N "$n" -n "$np" "$rt" exec "$work/img" /bin/true
    step "$n $per sqfs" "$r" srun -O -N "$n" -n "$np" "$rt" exec "$work/img.sqfs" /bin/true
    step "$n $per staged" "$r" srun -O -N "$n" -n "$np" "$rt" exec "$work/staged.sqfs" /bin/true
    step "$n $per plugin" "$r" srun -O -N "$n" -n "$np" --container-image="$work/img.sqfs" /bin/true
    [ "$per" -le 4 ] || continue
    step "$n $per mpi-bare" "$r" srun -O --mpi=pmix -N "$n" -n "$np" "$work/hello" "$np"
    step "$n $per mpi-rt" "$r" srun -O --mpi=pmix -N "$n" -n "$np" "$rt" exec "$work/debian.sqfs" "$work/hello" "$np"
  done
done
"$rt" stage -q --clean
STEPS
chown rt-test "$work/steps.sh"
declare -A t first failed
for n in 1 2 4 8; do
  on head salloc -O -N "$n" -n $((n * 16)) bash "$work/steps.sh" "$rt" "$work" "$n" "$rounds" \
    >"$work/steps.out" 2>"$work/salloc.err" || { echo "bench: salloc -N $n failed: $(cat "$work/salloc.err")" >&2; exit 1; }
  while IFS='|' read -r key round us; do
    if [ "$us" = fail ]; then failed[$key]=$(( ${failed[$key]:-0} + 1 ));
    elif [ "$round" = 1 ]; then first[$key]=$us; else t[$key]+="$us "; fi
  done <"$work/steps.out"
  grep "^bench:" "$work/salloc.err" >&2 || true
done
ms() { awk -v us="$1" 'BEGIN {printf "%.1f", us / 1000}'; }
cell() { printf '%s [%s]%s' "$(ms "$(echo "${t[$1]:-0}" | median)")" "$(ms "${first[$1]:-0}")" "${failed[$1]:+ ${failed[$1]}x failed}"; }
minus() { ms $(( $(echo "${t[$1]:-0}" | median) - $(echo "${t[$2]:-0}" | median) )); }
echo
echo "rt stage of a $(( $(stat -c %s "$work/staged.sqfs") / 1024 )) KiB SquashFS file (sbcast), ms:" \
  "$(for n in 1 2 4 8; do printf 'N=%s %s  ' "$n" "$(ms "${first[$n stage]}")"; done)"
echo
echo "srun -N N -n N*R X /bin/true inside one allocation, wall ms: median of rounds 2..$rounds [round 1]"
printf '%-3s %-3s %16s %16s %16s %16s %16s %9s %9s %9s %9s\n' N R bare "rt dir" "rt sqfs" "rt staged" "plugin sqfs" \
  dir-bare sqfs-bare stgd-bare plug-sqfs
for n in 1 2 4 8; do
  for per in 1 4 16; do
    c="$n $per"
    printf '%-3s %-3s %16s %16s %16s %16s %16s %9s %9s %9s %9s\n' "$n" "$per" "$(cell "$c bare")" "$(cell "$c dir")" \
      "$(cell "$c sqfs")" "$(cell "$c staged")" "$(cell "$c plugin")" "$(minus "$c dir" "$c bare")" \
      "$(minus "$c sqfs" "$c bare")" "$(minus "$c staged" "$c bare")" "$(minus "$c plugin" "$c sqfs")"
  done
done
echo
echo "srun --mpi=pmix -N N -n N*R mpi_hello (init, allreduce, finalize), wall ms: median [round 1]"
printf '%-3s %-3s %16s %16s %9s\n' N R bare "rt sqfs" rt-bare
for n in 1 2 4 8; do
  for per in 1 4; do
    c="$n $per"
    printf '%-3s %-3s %16s %16s %9s\n' "$n" "$per" "$(cell "$c mpi-bare")" "$(cell "$c mpi-rt")" \
      "$(minus "$c mpi-rt" "$c mpi-bare")"
  done
done

# --- 2. One node's reads of the shared file system, and rt's memory ---------------
# strace -f -y of one rank (and the image server it starts, which exits with
# the container: RT_SQUASHFS_LINGER=0), in a fresh node-local store for the
# first step, then again for a later one (facts kept; a directory image's
# node has nothing to keep). Operations: calls naming a path under $work;
# bytes: reads from descriptors of files there.
cat >"$work/io.sh" <<'IO'
set -euo pipefail
rt=$1 work=$2
store=/var/tmp/rt-bench-io.$$
rm -rf "$store"
trace() {  # WHAT IMAGE
  strace -f -y -qq -o "$work/trace" -e trace=%file,read,pread64,readv,preadv \
    env RT_SQUASHFS_LINGER=0 "$rt" exec "$2" /bin/true
  awk -v w="$work/" -v what="$1" '
    /^[0-9]+ +(read|pread64|readv|preadv)\(/ { if (index($0, "<" w)) { n = $NF; if (n > 0) bytes += n }; next }
    index($0, "\"" w) || index($0, "<" w) { ops++ }
    END { printf "%-34s %5d operations %9d bytes\n", what, ops, bytes }' "$work/trace"
}
export RT_STORAGE=$store
"$rt" stage -q "$work/staged.sqfs"
trace "directory image, first step" "$work/img"
trace "directory image, later step" "$work/img"
trace "SquashFS on shared FS, first step" "$work/img.sqfs"
trace "SquashFS on shared FS, later step" "$work/img.sqfs"
trace "staged SquashFS copy, first step" "$work/staged.sqfs"
trace "staged SquashFS copy, later step" "$work/staged.sqfs"
echo "peak RSS of a rank (rt exec, then /bin/true): $(command time -f %M "$rt" exec "$work/img.sqfs" /bin/true 2>&1 >/dev/null) KiB"
"$rt" exec "$work/img.sqfs" /bin/true  # leaves the image's server running (it lingers)
echo "RSS of the image's server: $(ps -o rss= -p "$(pgrep -n -u "$(id -u)" -f '^rt-sqfs ')") KiB"
"$rt" stage -q --clean
rm -rf "$store"
IO
chown rt-test "$work/io.sh"
echo
echo "One node's start, what it asks of the shared file system (strace):"
on head salloc -N 1 srun -N 1 -n 1 bash "$work/io.sh" "$rt" "$work"
