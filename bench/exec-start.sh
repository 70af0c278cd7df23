#!/bin/bash
# Start latency of `rt exec DIR /bin/true` beside `unshare -Urm /bin/true`
# and Charliecloud's `ch-run DIR -- /bin/true`, interleaved in one run, as an
# unprivileged user (as root: re-runs itself as rt-test). Prints medians,
# peak RSS and ratios. Usage: bench/exec-start.sh [ROUNDS] (default 1000).
# Also the same image as one SquashFS file (zstd), for rt and ch-run; that
# file inside a SIF file; and an instance of the directory image entered
# with instance://NAME.
# Targets: rt <= 1.2x unshare, <= 0.7x ch-run, peak RSS <= 3 MiB;
# SquashFS: rt <= 2x rt's directory start, <= 0.25x ch-run's SquashFS start.
# SIF <= 1.1x SQFS; instance:// <= rt exec DIR; `apptainer exec` of the SIF
# file through rt's Apptainer command line (a link named apptainer) <= 1.05x
# rt exec SIF.
# Host injection: `rt exec --ib` of an image with a glibc (the busybox image
# with the host's libc.so.6, and a /run as real images have) beside
# `rt exec --no-ib` of it: --ib <= 1.15x --no-ib, whatever the number of
# libraries (the host's libibverbs and fabric closure: a bind per directory).
# That image lacks /etc/libibverbs.d, so --ib alone lays an overlay on its
# /etc; GLIBC+IBCONF-DIR has the directory, as an image with rdma-core or an
# MPI built on it has (or an image without /etc/hosts, whose /etc has the
# overlay anyway, as one made by mmdebstrap has).
# Overlay: `rt exec --overlay DIR` (writes kept in DIR/upper, the overlay
# kept mounted between starts by its holder, rt-ovl) beside `rt exec` of
# the same directory image: <= 1.1x.
# RT_BASELINE=DIR (a directory holding another build's rt, readable by
# rt-test) adds its rows to the same interleaved run: before/after figures.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-1000}
. "$src/bench/common.sh"
as_rt_test exec-start "$rounds"
cd "$src"
build_release rt spawn_bench
img=$(mktemp -d /var/tmp/rt-bench-img.XXXXXX)
trap 'rm -rf "$img"' EXIT
bash examples/make-busybox-image.sh "$img"
chmod 755 "$img"  # mktemp made it 0700; as root's in the SquashFS file, nobody else could enter it
mksquashfs "$img" "$img.sqfs" -comp zstd -Xcompression-level 3 -all-root -quiet -no-progress >/dev/null
# The same SquashFS image inside a SIF file, and an instance of the directory.
python3 "$src/test/integration/siftool.py" make "$img.sif" --squashfs "$img.sqfs"
instance=bench-$$
# rt as a copy, as RT_BASELINE's is: measured here, the file as the linker
# wrote it starts some 10 % slower than a copy of it (the same fault count:
# the cause is below rt), which would skew a before/after comparison. Two
# copies of one build still differ by up to 7 % on this machine: compare
# builds by their ratios (--ib / --no-ib, SQFS / DIR), not their medians.
mkdir "$img.bin" && install -m 0755 "$src/build-bench/rt" "$img.bin/rt" && ln -s rt "$img.bin/apptainer"
rt=$img.bin/rt
"$rt" instance start -q "$img" "$instance" sleep 100000
# The injection refuses an image without glibc: the same image with the host's.
cp -a "$img" "$img.glibc"
mkdir -p "$img.glibc/lib/x86_64-linux-gnu" "$img.glibc/run"
cp /lib/x86_64-linux-gnu/libc.so.6 "$img.glibc/lib/x86_64-linux-gnu/"
cp -a "$img.glibc" "$img.ibconf"
mkdir "$img.ibconf/etc/libibverbs.d"
mkdir "$img.ov"
trap '"$rt" instance stop -q "$instance"; rm -rf "$img" "$img.sqfs" "$img.sif" "$img.bin" "$img.glibc" "$img.ibconf" "$img.out" "$img.store" "$img.ov"' EXIT
export USER=${USER:-$(id -un)}  # ch-run needs it
cd "${HOME:-/}"                  # a typical working directory: inside home
echo "$("$rt" --version 2>&1 | head -1), ch-run $(ch-run --version 2>&1 | head -1), kernel $(uname -r), $(nproc) cores"
baseline=()
# The baseline's injection keeps its own store: an STORE/elf-cache of
# another format would be rewritten by each build in turn.
if [ -n "${RT_BASELINE:-}" ]; then
  baseline=("baseline rt exec DIR|$RT_BASELINE/rt exec $img /bin/true"
            "baseline rt exec SQFS|$RT_BASELINE/rt exec $img.sqfs /bin/true"
            "baseline rt exec --no-ib GLIBC|$RT_BASELINE/rt exec --storage $img.store --no-ib $img.glibc /bin/true"
            "baseline rt exec --ib GLIBC|$RT_BASELINE/rt exec --storage $img.store --ib $img.glibc /bin/true")
fi
# ch-run's SquashFS start comes last in each round: the kernel's teardown of
# its FUSE mount goes on after it has exited, and slowed whichever row came
# next by some 0.3 ms (rt exec SQFS, placed there, measured 1.21x a directory
# start where the same image in a SIF file, one row later, measured 1.11x).
# The other rows run in an order of their own each round: in a fixed order,
# what one start leaves the kernel to finish slowed the same row every
# round.
echo "rt exec --ib injects $("$rt" exec --ib --dry-run "$img.glibc" /bin/true | sed -n 's/^host files: //p')"
SPAWN_BENCH_SHUFFLE=1 "$src/build-bench/bench/spawn_bench" "$rounds" \
  "true|/bin/true" \
  "unshare -Urm|unshare -Urm /bin/true" \
  "ch-run DIR|ch-run $img -- /bin/true" \
  "rt exec DIR|$rt exec $img /bin/true" \
  "rt exec SQFS|$rt exec $img.sqfs /bin/true" \
  "rt exec SIF|$rt exec $img.sif /bin/true" \
  "apptainer exec SIF|$img.bin/apptainer exec $img.sif /bin/true" \
  "rt exec instance://|$rt exec instance://$instance /bin/true" \
  "rt exec --overlay DIR|$rt exec --overlay $img.ov $img /bin/true" \
  "rt exec --no-ib GLIBC-DIR|$rt exec --no-ib $img.glibc /bin/true" \
  "rt exec --ib GLIBC-DIR|$rt exec --ib $img.glibc /bin/true" \
  "rt exec --no-ib GLIBC+IBCONF-DIR|$rt exec --no-ib $img.ibconf /bin/true" \
  "rt exec --ib GLIBC+IBCONF-DIR|$rt exec --ib $img.ibconf /bin/true" \
  ${baseline[@]+"${baseline[@]}"} \
  "ch-run SQFS|ch-run $img.sqfs -- /bin/true" | tee "$img.out"
echo
grep -E -e '^  rt exec --ib GLIBC-DIR +/ rt exec --no-ib GLIBC-DIR ' \
  -e '^  rt exec --ib GLIBC\+IBCONF-DIR +/ rt exec --no-ib GLIBC\+IBCONF-DIR ' \
  -e '^  baseline rt exec --ib GLIBC +/ baseline rt exec --no-ib GLIBC ' \
  "$img.out" | sed 's/^ */injection: /; s/$/   (target <= 1.15)/'
grep -E '^  rt exec --overlay DIR +/ rt exec DIR ' "$img.out" | sed 's/^ */overlay: /; s/$/   (target <= 1.1)/'
echo
echo "rt's own peak RSS (VmHWM before exec, from -vv):$("$rt" exec -vv "$img" /bin/true 2>&1 | sed -n 's/.*peak RSS//p')"
echo "(the spawn_bench RSS column is wait4's ru_maxrss, which includes the spawner's own pages: compare with the /bin/true row)"
