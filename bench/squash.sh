#!/bin/bash
# SquashFS: reading a whole Debian image inside the container
# (`tar -cf - usr etc var | cat > /dev/null`) from a directory and from one
# SquashFS file (zstd), with rt and ch-run, interleaved; and the time of
# `rt convert` beside mksquashfs alone. As root it builds the Debian image
# with mmdebstrap (Debian mirror needed) and re-runs itself as rt-test.
# "rt sqfs" is the default: the image's server outlives each container
# (RT_SQUASHFS_LINGER), so from the second round on the kernel's caches of
# the mount are warm, as the page cache is for the directory image. "rt
# sqfs cold" uses a copy of the file with RT_SQUASHFS_LINGER=0: every round
# mounts afresh and decompresses everything, as ch-run does every time.
# Every row runs from an empty directory of its own, so all read the same.
# Target: rt SquashFS whole-image read <= 3x rt directory.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
. "$src/bench/common.sh"
debian_rootfs
as_rt_test squash "$rounds"
debian_in_store sqbench
s=$(date +%s%N); "$RT" convert -q debian "$T/debian.sqfs"; e=$(date +%s%N)
echo "rt convert (mksquashfs zstd-3, $(nproc) threads): $(( (e - s) / 1000000 )) ms, $(stat -c %s "$T/debian.sqfs") bytes"
cp "$T/debian.sqfs" "$T/cold.sqfs"
# Every row runs from a fresh empty directory in /tmp: rt binds the working
# directory into the container, and from the source copy (under /var, with
# its build output) `tar ... var` would read that tree too in rt's rows and
# not in ch-run's. The host's /tmp is bound anyway and tar does not read it.
cwd=$(mktemp -d /tmp/rt-squash-cwd.XXXXXX)
trap 'rmdir "$cwd"; chmod -R u+w "$T"; rm -rf "$T"' EXIT
cd "$cwd"
read_all='cd / && tar -cf - usr etc var 2>/dev/null | cat > /dev/null'
declare -A t
timeit() {
  local label=$1 s e
  shift
  sync
  s=$(date +%s%N)
  "$@" >/dev/null 2>&1 || { echo "bench: $label failed" >&2; exit 1; }
  e=$(date +%s%N)
  t[$label]+="$(( (e - s) / 1000000 )) "
}
for r in $(seq "$rounds"); do
  timeit "rt dir" "$RT" exec "$dir" sh -c "$read_all"
  timeit "rt sqfs" "$RT" exec "$T/debian.sqfs" sh -c "$read_all"
  timeit "rt sqfs cold" env RT_SQUASHFS_LINGER=0 "$RT" exec "$T/cold.sqfs" sh -c "$read_all"
  timeit "ch-run dir" ch-run "$dir" -- sh -c "$read_all"
  timeit "ch-run sqfs" ch-run "$T/debian.sqfs" -- sh -c "$read_all"
done
for l in "rt dir" "rt sqfs" "rt sqfs cold" "ch-run dir" "ch-run sqfs"; do printf '%-12s median %6d ms  (%s)\n' "$l" "$(echo "${t[$l]}" | median)" "${t[$l]}"; done
awk -v a="$(echo "${t[rt sqfs]}" | median)" -v b="$(echo "${t[rt dir]}" | median)" 'BEGIN {printf "rt sqfs / rt dir       = %.2f\n", a / b}'
awk -v a="$(echo "${t[rt sqfs cold]}" | median)" -v b="$(echo "${t[rt dir]}" | median)" 'BEGIN {printf "rt sqfs cold / rt dir  = %.2f\n", a / b}'
awk -v a="$(echo "${t[ch-run sqfs]}" | median)" -v b="$(echo "${t[ch-run dir]}" | median)" 'BEGIN {printf "ch-run sqfs / ch-run dir = %.2f\n", a / b}'
awk -v a="$(echo "${t[rt sqfs]}" | median)" -v b="$(echo "${t[ch-run sqfs]}" | median)" 'BEGIN {printf "rt sqfs / ch-run sqfs  = %.2f\n", a / b}'
awk -v a="$(echo "${t[rt sqfs cold]}" | median)" -v b="$(echo "${t[ch-run sqfs]}" | median)" 'BEGIN {printf "rt sqfs cold / ch-run sqfs = %.2f\n", a / b}'
