#!/bin/bash
# Pull + unpack of a Debian bookworm image (minbase + python3 + libopenmpi3,
# three gzip layers) from a local TLS registry: `rt pull` beside
# `ch-image --no-cache pull` (Charliecloud) and `tar -xzf` of the same three
# layer blobs, interleaved, as an unprivileged user. Prints medians, ratios
# and rt's peak RSS. Usage: bench/pull.sh [ROUNDS] (default 3); as root it
# builds the image with mmdebstrap first (Debian mirror needed) and re-runs
# itself as rt-test.
# Targets: rt <= 0.4x ch-image, <= 1.0x tar -xzf, peak RSS <= 64 MiB.
# Signed: the same image with a sigstore signature attached, pulled under a
# policy requiring it (rt-signed) beside one accepting anything (rt):
# <= 1.05x.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-2}
. "$src/bench/common.sh"
rootfs_tar=$BENCH_DEBIAN
debian_rootfs
as_rt_test pull "$rounds"
cd "$src"
build_release rt rt-image
T=$(mktemp -d /var/tmp/rt-pullbench.XXXXXX)
fail() { echo "bench: $*" >&2; exit 1; }
skip() { fail "$*"; }
cleanup() { chmod -R u+w "$T" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
export RT_SOURCE_DIR=$src HOME=$T/home XDG_RUNTIME_DIR=$T/home  # skopeo reads $XDG_RUNTIME_DIR/containers/auth.json
mkdir -p "$HOME"
. "$src/test/integration/registry.sh"

# Three layers: usr/lib, usr/share, the rest.
python3 - "$rootfs_tar" "$T" <<'PY'
import sys, tarfile
src, out = sys.argv[1], sys.argv[2]
outs = [tarfile.open(f"{out}/l{i}.tar", "w", format=tarfile.PAX_FORMAT) for i in (1, 2, 3)]
with tarfile.open(src) as t:
    for m in t:
        n = m.name.lstrip("./")
        o = outs[1] if n.startswith("usr/lib/") else outs[2] if n.startswith("usr/share/") else outs[0]
        o.addfile(m, t.extractfile(m) if m.isfile() else None)
for o in outs:
    o.close()
PY
gzip -6 "$T"/l1.tar "$T"/l2.tar "$T"/l3.tar
python3 "$src/test/integration/ocitool.py" layout "$T/layout" --tag bench "$T"/l1.tar.gz "$T"/l2.tar.gz "$T"/l3.tar.gz >/dev/null
start_registry "$T/reg" open
push "$T/layout:bench" debian:bench
ref="$REG/debian:bench"
# The image signed (rt key generate, rt push --sign-by-sigstore-private-key):
# both rt rows pull this tag, under a policy that checks the signature or not.
printf 'bench\n' >"$T/pass"
"$src/build-bench/rt" key generate -q --output-prefix "$T/key" --passphrase-file "$T/pass"
mkdir -p "$HOME/.config/containers/registries.d"
printf 'docker:\n  %s:\n    use-sigstore-attachments: true\n' "$REG" >"$HOME/.config/containers/registries.d/bench.yaml"
printf '{"default": [{"type": "insecureAcceptAnything"}]}\n' >"$T/any.json"
printf '{"default": [{"type": "sigstoreSigned", "keyPath": "%s"}]}\n' "$T/key.pub" >"$T/signed.json"
"$src/build-bench/rt" pull -q --storage "$T/prep" --ca-file "$REG_CA" --policy "$T/any.json" "$ref"
"$src/build-bench/rt" push -q --storage "$T/prep" --ca-file "$REG_CA" --sign-by-sigstore-private-key "$T/key.private" \
  --sign-passphrase-file "$T/pass" "$ref" "$REG/debian:signed"
rm -rf "$T/prep"
signed=$REG/debian:signed
echo "image: $(du -cb "$T"/l?.tar.gz | tail -1 | cut -f1) bytes in 3 gzip layers; registry $REG (TLS); $(nproc) cores"

declare -A times
run() {  # run LABEL CMD...: appends the wall time; prints RSS for rt
  local label=$1
  shift
  local out
  sync  # earlier runs' dirty pages must not be written back on this one's time
  out=$( { /usr/bin/time -f '%e %M' "$@" >/dev/null 2>"$T/cmd.err"; } 2>&1 | tail -1) ||
    fail "$label failed: $(cat "$T/cmd.err")"
  out=$(tail -1 "$T/cmd.err")
  times[$label]+="${out%% *} "
  [ "$label" != rt ] || rss+="${out##* } "
}
# After the stores are removed the file system goes on working for seconds
# (measured: the next run took 2-3x as long, whichever it was): waited for,
# so that no row pays it for being first.
settle() { sync; sleep 5; }
rss=""
for r in $(seq "$rounds"); do
  rm -rf "$T/rtstore" "$T/chstore" "$T/x" "$T/sgstore" && mkdir "$T/x" && settle
  run rt "$src/build-bench/rt" pull -q --storage "$T/rtstore" --ca-file "$REG_CA" --policy "$T/any.json" "$signed"
  run rt-signed "$src/build-bench/rt" pull -q --storage "$T/sgstore" --ca-file "$REG_CA" --policy "$T/signed.json" "$signed"
  run ch-image env -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE ch-image --storage "$T/chstore" --no-cache --tls-no-verify pull "$ref"
  run tar sh -c "for l in $T/l1.tar.gz $T/l2.tar.gz $T/l3.tar.gz; do tar -xzf \$l -C $T/x; done"
  rm -rf "$T/rtstore" "$T/chstore" "$T/x" "$T/sgstore" && mkdir "$T/x" && settle
  run tar sh -c "for l in $T/l1.tar.gz $T/l2.tar.gz $T/l3.tar.gz; do tar -xzf \$l -C $T/x; done"
  run ch-image env -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE ch-image --storage "$T/chstore" --no-cache --tls-no-verify pull "$ref"
  run rt-signed "$src/build-bench/rt" pull -q --storage "$T/sgstore" --ca-file "$REG_CA" --policy "$T/signed.json" "$signed"
  run rt "$src/build-bench/rt" pull -q --storage "$T/rtstore" --ca-file "$REG_CA" --policy "$T/any.json" "$signed"
done
"$src/build-bench/rt" exec --storage "$T/rtstore" "$signed" python3 -c 'print("python3 runs in the pulled image")'
for l in rt rt-signed ch-image tar; do printf '%-10s median %6.2f s   (%s)\n' "$l" "$(echo "${times[$l]}" | median)" "${times[$l]}"; done
rt=$(echo "${times[rt]}" | median)
awk -v a="$rt" -v b="$(echo "${times[ch-image]}" | median)" 'BEGIN {printf "rt / ch-image --no-cache pull = %.2f\n", a / b}'
awk -v a="$rt" -v b="$(echo "${times[tar]}" | median)" 'BEGIN {printf "rt / tar -xzf                 = %.2f\n", a / b}'
awk -v a="$(echo "${times[rt-signed]}" | median)" -v b="$rt" \
  'BEGIN {printf "rt-signed / rt                = %.3f   (in the rows above)\n", a / b}'
# The signed row's 5 % is less than one pull varies by beside the other
# rows: measured again in pairs of its own, each run after the file system
# settles, the order alternating; the median of the pairs' ratios.
ratios=""
for r in $(seq $((2 * rounds + 1))); do
  order=(rt rt-signed)
  [ $((r % 2)) = 0 ] && order=(rt-signed rt)
  declare -A pair=()
  for l in "${order[@]}"; do
    rm -rf "$T/rtstore" "$T/sgstore" && settle
    policy=$T/any.json store=$T/rtstore
    [ "$l" = rt ] || policy=$T/signed.json store=$T/sgstore
    s=$(date +%s%N)
    "$src/build-bench/rt" pull -q --storage "$store" --ca-file "$REG_CA" --policy "$policy" "$signed" >/dev/null
    pair[$l]=$(($(date +%s%N) - s))
  done
  ratios+="$(awk -v a="${pair[rt-signed]}" -v b="${pair[rt]}" 'BEGIN {printf "%.3f", a / b}') "
done
echo "rt-signed / rt, pairs         = $(echo "$ratios" | median)   (target <= 1.05; pairs: $ratios)"
echo "rt pull peak RSS: $(echo "$rss" | tr ' ' '\n' | grep . | sort -n | tail -1) KiB"

# Pull straight to one SquashFS file: rt pull --squash beside ch-image pull +
# ch-convert -o squash (target: <= 0.15x, no unpacked tree on disk).
for r in $(seq "$rounds"); do
  rm -rf "$T/rtstore" "$T/chstore" "$T"/*.sqfs
  run "rt->sqfs" "$src/build-bench/rt" pull -q --storage "$T/rtstore" --ca-file "$REG_CA" --squash "$T/rt.sqfs" "$ref"
  run "ch->sqfs" env -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE CH_IMAGE_STORAGE="$T/chstore" sh -c \
    "ch-image --no-cache --tls-no-verify pull $ref && ch-convert -i ch-image -o squash $ref $T/ch.sqfs"
done
"$src/build-bench/rt" exec "$T/rt.sqfs" python3 -c 'print("python3 runs from the .sqfs written by rt pull --squash")'
for l in "rt->sqfs" "ch->sqfs"; do printf '%-10s median %6.2f s   (%s)\n' "$l" "$(echo "${times[$l]}" | median)" "${times[$l]}"; done
awk -v a="$(echo "${times[rt->sqfs]}" | median)" -v b="$(echo "${times[ch->sqfs]}" | median)" 'BEGIN {printf "rt pull --squash / (ch-image pull + ch-convert) = %.2f\n", a / b}'
echo "rt's store after pull --squash (no unpacked tree): $(du -sb "$T/rtstore" | cut -f1) bytes of cached blobs; output $(stat -c %s "$T/rt.sqfs") bytes"
