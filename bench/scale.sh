#!/bin/bash
# The cost of a job start as nodes are added: the wall time from `srun` to
# every rank having run /bin/true, bare against `rt exec` of a directory
# and of a SquashFS image on the shared file system, for N = 1, 2, 4 nodes
# and R = 1, 4, 16 ranks per node, interleaved in one run on a real Slurm
# cluster of four nodes (test/hpc/cluster.sh), as the unprivileged rt-test.
# The first round is a job's first step on every node (cold: no container,
# no image server, no facts yet); the medians are of the later rounds.
# Usage (as root): bench/scale.sh [ROUNDS] (default 10).
# Every command goes through `cluster.sh on head` (nsenter, runuser): a
# constant the bare rows pay too, so differences and ratios are rt's.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-10}
[ "$(id -u)" = 0 ] || { echo "bench/scale.sh: run it as root (it starts a cluster)" >&2; exit 1; }
bash "$src/test/install-deps.sh"
[ -c /dev/fuse ] && chmod 0666 /dev/fuse
id rt-test >/dev/null 2>&1 || useradd --create-home --shell /bin/bash rt-test
work=/var/tmp/rt-bench-scale
cluster=/var/tmp/rt-bench-scale-cluster
cleanup() { bash "$src/test/hpc/cluster.sh" stop "$cluster" || true; }
trap cleanup EXIT
rm -rf "$work"
install -d -o rt-test "$work"
(cd "$src" && tar --exclude=./build --exclude=./build-bench --exclude=./.git -cf - .) |
  runuser -u rt-test -- tar -xf - -C "$work"
runuser -u rt-test -- bash -c "cd '$work' && . bench/common.sh && src='$work' && build_release rt"
runuser -u rt-test -- bash "$work/examples/make-busybox-image.sh" "$work/img" >/dev/null
runuser -u rt-test -- mksquashfs "$work/img" "$work/img.sqfs" -comp zstd -all-root -quiet -no-progress >/dev/null
bash "$src/test/hpc/cluster.sh" start 4 "$cluster" "$work" >/dev/null
on_head() { CLUSTER_DIR=$cluster bash "$cluster/cluster.sh" on head --user rt-test "$@"; }
rt=$work/build-bench/rt

echo "$("$rt" --version 2>&1 | head -1), $(on_head srun --version), kernel $(uname -r), $(nproc) cores, 4 emulated nodes"
declare -A t first
timeit() {  # KEY ROUND COMMAND...
  local key=$1 round=$2 s e
  shift 2
  s=$(date +%s%N)
  on_head "$@" >/dev/null 2>"$work/err" || { echo "bench: $key failed: $(cat "$work/err")" >&2; exit 1; }
  e=$(date +%s%N)
  if [ "$round" = 1 ]; then first[$key]=$(( (e - s) / 1000 )); else t[$key]+="$(( (e - s) / 1000 )) "; fi
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
configs=("1 1" "1 4" "1 16" "2 1" "2 4" "2 16" "4 1" "4 4" "4 16")
for r in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    read -r n per <<<"$c"
    np=$((n * per))
    timeit "$c bare" "$r" srun -O -N "$n" -n "$np" /bin/true
    timeit "$c dir" "$r" srun -O -N "$n" -n "$np" "$rt" exec "$work/img" /bin/true
    timeit "$c sqfs" "$r" srun -O -N "$n" -n "$np" "$rt" exec "$work/img.sqfs" /bin/true
  done
done
ms() { awk -v us="$1" 'BEGIN {printf "%8.1f", us / 1000}'; }
echo
echo "srun -N N -n N*R X /bin/true, wall ms: median of rounds 2..$rounds (first round, cold, in brackets)"
printf '%-4s %-4s %18s %18s %18s %9s %9s\n' N R bare "rt dir" "rt sqfs" "dir-bare" "sqfs-bare"
for c in "${configs[@]}"; do
  read -r n per <<<"$c"
  b=$(echo "${t[$c bare]}" | median)
  d=$(echo "${t[$c dir]}" | median)
  q=$(echo "${t[$c sqfs]}" | median)
  printf '%-4s %-4s %8s [%7s] %8s [%7s] %8s [%7s] %9s %9s\n' "$n" "$per" \
    "$(ms "$b")" "$(ms "${first[$c bare]}")" "$(ms "$d")" "$(ms "${first[$c dir]}")" \
    "$(ms "$q")" "$(ms "${first[$c sqfs]}")" "$(ms $((d - b)))" "$(ms $((q - b)))"
done
