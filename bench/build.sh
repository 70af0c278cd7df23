#!/bin/bash
# rt build beside Charliecloud's `ch-image build` (0.31, --force: its
# fakeroot root emulation) and `podman build` (as root, chroot isolation,
# overlay storage) on one Dockerfile: a Debian base, apt-get install
# python3-numpy from the Debian mirror, a COPY and a small RUN
# (test/build/numpy). One interleaved run: each round builds cold (no
# cache, the base already there) with each tool in turn, then rebuilds
# with nothing changed with each (the cold builds wrote their caches:
# rt build --no-cache, ch-image build --rebuild, podman build --no-cache). Prints medians, ratios and rt's own
# peak resident memory (its -v report: the RUN steps are other processes).
# The same steps as a definition file (test/build/numpy/numpy.def: %files,
# one %post with the apt-get line and the RUN) built cold by rt beside the
# Dockerfile: target <= 1.0x.
# Then cache mounts: a Dockerfile whose RUN installs the same packages with
# apt's lists and archives under RUN --mount=type=cache, after a COPY of a
# file each round changes: rt and podman rebuild it (the RUN runs again,
# its packages come from the cache mount, not the mirror), interleaved.
# ch-image 0.31 has no cache mounts: it is not in that part.
# Usage (as root: rt and ch-image run as rt-test, podman as root):
#   bench/build.sh [ROUNDS]   (default 3)
# Targets: cold <= 0.7x ch-image; no-change rebuild <= 1 s and <= 0.2x
# ch-image's; rt's peak memory <= 64 MiB.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
[ "$(id -u)" = 0 ] || { echo "bench/build.sh: run as root (podman runs as root; rt and ch-image as rt-test)" >&2; exit 1; }
. "$src/bench/common.sh"
debian_rootfs
work=/var/tmp/rt-bench-build
rm -rf "$work"
copy_tree "$work/src"
chown rt-test "$work"
as_user() { runuser -u rt-test -- env HOME="$work/home" RT_STORAGE="$work/store" "$@"; }
as_user mkdir -p "$work/home"
as_user cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
as_user cmake --build "$work/build" -j"$(nproc)" --target rt rt-image >/dev/null
RT=$work/build/rt
ctx=$work/src/test/build/numpy
podman=(podman --root "$work/podman" --runroot "$work/podman-run" --storage-driver overlay)
cleanup() {
  "${podman[@]}" system reset -f >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The same base for each: the Debian tree as `debian`.
as_user "$RT" import -q "$BENCH_DEBIAN" debian
as_user git config --global user.name rt-bench
as_user git config --global user.email rt-bench@localhost
as_user ch-image -s "$work/ch" import "$BENCH_DEBIAN" debian >/dev/null 2>&1
"${podman[@]}" import -q --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  "$BENCH_DEBIAN" localhost/debian >/dev/null
# rt takes an image stored as a tree as one layer once: not a build's work.
as_user "$RT" build -q -t warm-up "$ctx" >/dev/null 2>&1

declare -A times
rss=""
run() { # LABEL CMD...: appends the wall time in seconds
  local label=$1
  shift
  sync
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$work/out" 2>&1 || { tail -20 "$work/out" >&2; echo "bench: $label failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  times[$label]+="$(echo "$t1 - $t0" | bc) "
}
for i in $(seq "$rounds"); do
  run "rt cold" as_user "$RT" build -v --no-cache -t "np$i" "$ctx"
  rss+="$(sed -n 's/.*peak resident memory of rt build itself: \([0-9]*\) kB.*/\1/p' "$work/out") "
  run "rt cold .def" as_user sh -c 'cd "$1" && shift && exec "$@"' sh "$ctx" "$RT" build --no-cache -t "npdef$i" numpy.def
  # --rebuild: every step runs, and (unlike --no-cache) its cache is written.
  run "ch-image cold" as_user ch-image -s "$work/ch" build --force --rebuild -t "np$i" "$ctx"
  run "podman cold" "${podman[@]}" build -q --isolation=chroot --no-cache --build-arg BASE=localhost/debian -t "np$i" "$ctx"
  run "rt rebuild" as_user "$RT" build -t "np$i" "$ctx"
  grep -q "is unchanged" "$work/out" || { echo "bench: rt's rebuild was not a full cache hit" >&2; exit 1; }
  run "ch-image rebuild" as_user ch-image -s "$work/ch" build --force -t "np$i" "$ctx"
  run "podman rebuild" "${podman[@]}" build -q --isolation=chroot --build-arg BASE=localhost/debian -t "np$i" "$ctx"
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "rt build vs ch-image build (Charliecloud $(as_user ch-image --version 2>&1)) vs podman build ($(podman --version | cut -d' ' -f3)),"
echo "$rounds interleaved rounds, $(nproc) cores; Dockerfile: test/build/numpy (apt-get python3-numpy from the mirror)"
for k in "rt cold" "rt cold .def" "ch-image cold" "podman cold" "rt rebuild" "ch-image rebuild" "podman rebuild"; do
  printf '  %-18s median %7.3f s   (%s)\n' "$k" "$(echo "${times[$k]}" | median)" "${times[$k]% }"
done
ratio() { echo "scale=3; $(echo "${times[$1]}" | median) / $(echo "${times[$2]}" | median)" | bc; }
echo "  cold:    rt/ch-image $(ratio "rt cold" "ch-image cold")  (target <= 0.7)   rt/podman $(ratio "rt cold" "podman cold")"
echo "  rebuild: rt/ch-image $(ratio "rt rebuild" "ch-image rebuild")  (target <= 0.2)   rt/podman $(ratio "rt rebuild" "podman rebuild")   rt $(echo "${times[rt rebuild]}" | median) s (target <= 1 s)"
echo "  definition file: rt cold .def / rt cold $(ratio "rt cold .def" "rt cold")  (target <= 1.0)"
echo "  rt's own peak resident memory: $(echo "$rss" | tr ' ' '\n' | grep . | sort -n | tail -1) kB (target <= 65536)"

# ---- cache mounts: a changed source before a RUN that apt-gets ----------------
cm=$work/cache-mount
mkdir -p "$cm"
cat >"$cm/Dockerfile" <<'DOCKERFILE'
ARG BASE=debian
FROM $BASE
COPY version.txt /opt/version.txt
RUN --mount=type=cache,target=/var/cache/apt --mount=type=cache,target=/var/lib/apt/lists \
    apt-get update && apt-get install -y --no-install-recommends python3-numpy && \
    python3 -c "import numpy; print(numpy.__version__)" > /opt/numpy.txt
DOCKERFILE
echo 0 >"$cm/version.txt"
chown -R rt-test "$cm"
# The first builds fill each tool's cache mounts (not timed).
as_user "$RT" build -q -t cm0 "$cm" >/dev/null
"${podman[@]}" build -q --isolation=chroot --build-arg BASE=localhost/debian -t cm0 "$cm" >/dev/null
for i in $(seq "$rounds"); do
  echo "$i" >"$cm/version.txt"
  run "rt cache mount" as_user "$RT" build -t "cm$i" "$cm"
  if grep -q "^Get:.*python3-numpy" "$work/out"; then echo "bench: rt fetched python3-numpy again: the cache mount was not reused" >&2; exit 1; fi
  run "podman cache mount" "${podman[@]}" build --isolation=chroot --build-arg BASE=localhost/debian -t "cm$i" "$cm"
  if grep -q "^Get:.*python3-numpy" "$work/out"; then echo "bench: podman fetched python3-numpy again" >&2; exit 1; fi
done
echo "cache mounts: a changed COPY source, then RUN apt-get install with apt's lists and archives cached, $rounds rounds"
for k in "rt cache mount" "podman cache mount"; do
  printf '  %-18s median %7.3f s   (%s)\n' "$k" "$(echo "${times[$k]}" | median)" "${times[$k]% }"
done
echo "  rebuild with cache mounts: rt/podman $(ratio "rt cache mount" "podman cache mount")"
