#!/bin/bash
# A lazy start from a registry beside pulling first: a 1 GB SIF file
# (Debian bookworm minbase + python3-numpy + python3-scipy, padded with
# incompressible data files no program reads) pushed to a local TLS
# registry with rt push oras://; then, interleaved, each round from an
# empty store with no server running:
#   lazy:       rt exec oras://REF python3 -c 'import numpy'
#   pull+exec:  rt pull oras://REF FILE.sif, then rt exec FILE.sif the same
#   lazy read:  rt exec oras://REF tar -cf /dev/null / (the whole image, lazily)
#   pull+read:  rt pull, then rt exec FILE.sif the same tar
# Prints medians and ratios, the registry's requests for the lazy read, and
# the bytes the registry sent for the lazy start against the file's size
# and against what the program opened
# (the files `import numpy` opens, their sizes summed, from strace).
# Targets: lazy <= 0.1x pull+exec; bytes fetched <= 2x the bytes read;
# lazy read <= 1.3x pull+read.
# Usage: bench/lazy.sh [ROUNDS] (default 3); as root it builds the image
# with mmdebstrap first (Debian mirror needed) and re-runs itself as
# rt-test. The lazy start runs with the background fill off
# (RT_LAZY_BACKGROUND=0): it fetches what it reads, nothing else. The lazy
# read runs as users have it (the default, on): a read of a tenth of the
# file fetches the rest in file order beside it (squash::Scan).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
. "$src/bench/common.sh"
LAZY_TAR=/var/tmp/rt-bench-lazy.tar
if [ "$(id -u)" = 0 ]; then
  bash "$src/test/install-deps.sh"
  [ -s "$LAZY_TAR" ] ||
    mmdebstrap --format=tar --variant=minbase --include=python3,python3-numpy,python3-scipy,strace bookworm "$LAZY_TAR"
  chmod 644 "$LAZY_TAR"
fi
as_rt_test lazy "$rounds"
cd "$src"
build_release rt rt-image
RT=$src/build-bench/rt
T=$(mktemp -d /var/tmp/rt-lazybench.XXXXXX)
fail() { echo "bench: $*" >&2; exit 1; }
skip() { fail "$*"; }
cleanup() { pkill -u "$(id -u)" -f "^rt-sqfs $T/" 2>/dev/null || true; chmod -R u+w "$T" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
export RT_SOURCE_DIR=$src HOME=$T/home RT_SQUASHFS_LINGER=0 RT_LAZY_BACKGROUND=0
mkdir -p "$HOME"
. "$src/test/integration/registry.sh"
REG_LOG_LEVEL=info start_registry "$T/reg" basic
export RT_CA_FILE=$REG_CA
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"

# The image: the Debian tree (SquashFS keeps about a third of it), padded
# to about 1 GB with random files.
cp "$LAZY_TAR" "$T/img.tar"
mkdir -p "$T/pad/opt/data"
have=$(stat -c %s "$LAZY_TAR")
for i in $(seq 1 $(((1000000000 - have / 3) / 100000000))); do head -c 100000000 /dev/urandom >"$T/pad/opt/data/$i"; done
tar -rf "$T/img.tar" -C "$T/pad" opt/data
rm -rf "$T/pad"
export RT_STORAGE=$T/build-store
"$RT" import -q "$T/img.tar" img
"$RT" convert -q img "$T/img.sif"
rm -rf "$T/img.tar" "$RT_STORAGE"
size=$(stat -c %s "$T/img.sif")
hex=$(sha256sum "$T/img.sif" | cut -d' ' -f1)
REF="oras://$REG/bench/img:1"
"$RT" push -q "$T/img.sif" "$REF"

sent() { blob_bytes_sent "$T/reg/log" "$hex"; }
asked() { blob_bytes_sent "$T/reg/log" "$hex" requests; }
fresh() {
  pkill -u "$(id -u)" -f "^rt-sqfs $T/" 2>/dev/null || true
  sleep 0.2
  rm -rf "$T/s" "$T/f.sif"
  export RT_STORAGE=$T/s
}
declare -A t
lazy_bytes=()
read_asked=()
PROG=(python3 -c 'import numpy')
# (tar -f /dev/null would read no file's data: GNU tar knows that name.)
READ=(sh -c 'tar -cf - --exclude=./proc --exclude=./sys --exclude=./dev --exclude=./tmp --exclude=./var/tmp -C / . | wc -c')
for r in $(seq "$rounds"); do
  fresh
  before=$(sent)
  timeit lazy "$RT" exec "$REF" "${PROG[@]}"
  lazy_bytes+=($(($(sent) - before)))
  fresh
  timeit pull+exec bash -c '"$0" pull -q "$1" "$2" && "$0" exec "$2" "${@:3}"' "$RT" "$REF" "$T/f.sif" "${PROG[@]}"
  fresh
  before=$(asked)
  RT_LAZY_BACKGROUND=1 timeit "lazy read" "$RT" exec "$REF" "${READ[@]}"
  read_asked+=($(($(asked) - before)))
  fresh
  timeit pull+read bash -c '"$0" pull -q "$1" "$2" && "$0" exec "$2" "${@:3}"' "$RT" "$REF" "$T/f.sif" "${READ[@]}"
done

# What the program opened: the files import numpy opens in the image,
# their sizes summed (strace inside the container, from the whole file).
fresh
"$RT" pull -q "$REF" "$T/f.sif"
opened=$("$RT" exec "$T/f.sif" sh -c 'strace -f -e trace=openat -e status=successful -o /tmp/.o python3 -c "import numpy" &&
  sed -n "s/.*openat([^\"]*\"\([^\"]*\)\".*/\1/p" /tmp/.o | sort -u | while read -r f; do [ -f "$f" ] && stat -c %s "$f"; done |
  awk "{s+=\$1} END {print s}"; rm -f /tmp/.o')

echo "rt lazy start, $rounds rounds; image $((size / 1000000)) MB; medians in ms"
printf '%-12s %10s\n' row median
for k in lazy pull+exec "lazy read" pull+read; do printf '%-12s %10s\n' "$k" "$(echo "${t[$k]}" | median)"; done
ratio() { awk -v a="$(echo "${t[$1]}" | median)" -v b="$(echo "${t[$2]}" | median)" 'BEGIN {printf "%.3f", a / b}'; }
fetched=$(echo "${lazy_bytes[*]}" | median)
echo "lazy / pull+exec:      $(ratio lazy pull+exec)   (target <= 0.1)"
echo "lazy read / pull+read: $(ratio "lazy read" pull+read)   (target <= 1.3)"
echo "range requests of the lazy read: $(echo "${read_asked[*]}" | median) (median of rounds)"
echo "bytes fetched by the lazy start: $fetched of $size ($(awk -v a="$fetched" -v b="$size" 'BEGIN {printf "%.1f", 100 * a / b}') %)"
echo "bytes of the files the program opened: $opened; fetched / opened: $(awk -v a="$fetched" -v b="$opened" 'BEGIN {printf "%.2f", a / b}')   (target <= 2)"
