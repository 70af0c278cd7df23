# Shared set-up of the benchmarks; sourced, never run.
# Every benchmark runs as the unprivileged user rt-test, on a copy of the tree.

BENCH_DEBIAN=/var/tmp/rt-bench-debian.tar

# copy_tree DIR: as root, makes rt-test and DIR (anew, rt-test's) holding a
# copy of the tree without build output or .git.
copy_tree() {
  id rt-test >/dev/null 2>&1 || useradd --create-home --shell /bin/bash rt-test
  rm -rf "$1"
  install -d -o rt-test "$1"
  (cd "$src" && tar --exclude=./build --exclude='./build-*' --exclude=./.git -cf - .) |
    runuser -u rt-test -- tar -xf - -C "$1"
}

# as_rt_test NAME ARGS...: as root, install the packages, make rt-test, copy
# the tree to /var/tmp/rt-bench-NAME and run the calling script there as
# rt-test with ARGS (does not return). As any other user, returns at once.
as_rt_test() {
  [ "$(id -u)" = 0 ] || return 0
  local name=$1 work=/var/tmp/rt-bench-$1
  shift
  bash "$src/test/install-deps.sh"
  [ -c /dev/fuse ] && chmod 0666 /dev/fuse
  copy_tree "$work"
  exec runuser -u rt-test -- env ${RT_BASELINE:+RT_BASELINE="$RT_BASELINE"} \
    bash "$work/bench/$(basename "$0")" "$@"
}

# debian_rootfs: as root, builds $BENCH_DEBIAN (minbase + python3 +
# libopenmpi3) with mmdebstrap once per machine (Debian mirror needed).
debian_rootfs() {
  [ "$(id -u)" = 0 ] || return 0
  bash "$src/test/install-deps.sh"
  [ -s "$BENCH_DEBIAN" ] ||
    mmdebstrap --format=tar --variant=minbase --include=python3,libopenmpi3 bookworm "$BENCH_DEBIAN"
  chmod 644 "$BENCH_DEBIAN"
}

# build_release TARGET...: a Release build of the copy in build-bench/.
build_release() {
  cmake -S "$src" -B "$src/build-bench" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$src/build-bench" -j"$(nproc)" --target "$@" >/dev/null
}

# debian_in_store TAG: a Release build, a scratch store in a fresh $T
# (removed at exit) holding the Debian image as `debian`; sets RT (the
# built rt) and dir (the image's root filesystem).
debian_in_store() {
  cd "$src"
  build_release rt rt-image
  T=$(mktemp -d "/var/tmp/rt-$1.XXXXXX")
  trap 'chmod -R u+w "$T"; rm -rf "$T"' EXIT
  export RT_STORAGE=$T/store USER=${USER:-$(id -un)}
  RT=$src/build-bench/rt
  "$RT" import -q "$BENCH_DEBIAN" debian
  dir=$("$RT" inspect debian | sed -n 's/.*"path": "\(.*\)".*/\1/p')/rootfs
}

# timeit LABEL COMMAND...: runs COMMAND (its output dropped; a failure ends
# the benchmark with its stderr) and appends its wall time to ${t[LABEL]}
# (the caller's `declare -A t`), in ms, or in the unit of BENCH_UNIT_NS.
timeit() {
  local label=$1 s e
  shift
  s=$(date +%s%N)
  "$@" >/dev/null 2>"$T/err" || { echo "bench: $label failed: $(cat "$T/err")" >&2; exit 1; }
  e=$(date +%s%N)
  t[$label]+="$(( (e - s) / ${BENCH_UNIT_NS:-1000000} )) "
}

# median: the median of the numbers on stdin (space or newline separated).
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
