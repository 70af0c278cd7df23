#!/bin/bash
# The whole GPU check on a fresh GPU node, started as root (a node with no
# network: nothing is downloaded). It makes an unprivileged user `gpu`, an
# NGC-style image from the node's own userland (host-image.sh), runs
# check.sh as that user, then times --ib starts and runs rt doctor:
#
#   test/gpu/node.sh RT [BASELINE]
#
# RT is a static rt; BASELINE, another build of it, adds interleaved start
# timings of both beside `unshare -Urm true` (before/after figures). PyTorch, where the node has it, is taken from
# $RT_GPU_PYTHON (default /opt/torch/.venv/bin/python3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "node.sh: run it as root" >&2; exit 1; }
id gpu >/dev/null 2>&1 || useradd -m gpu || exit 1
work=/var/tmp/rt-gpu-check
rm -rf "$work"
mkdir -m 755 "$work" && cp "$1" "$work/rt" && cp -r "$here" "$work/gpu" || exit 1
[ -n "${2:-}" ] && { cp "$2" "$work/baseline" || exit 1; }
chmod -R a+rX "$work"
# The image on the file system of /usr, so that it can be hard-linked.
for d in /var/tmp /; do
  [ "$(stat -c %d $d)" = "$(stat -c %d /usr)" ] && { img=${d%/}/rt-gpu-img; break; }
done
rm -rf "$img"
echo "== host: $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -r), $(nproc) cores"
nvidia-smi -L
ls /dev/infiniband 2>&1 | tr '\n' ' '
echo
t0=$(date +%s)
timeout 180 bash "$here/host-image.sh" "$img" || exit 1
echo "image $img made in $(($(date +%s) - t0)) s"
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
as_user() {
  runuser -u gpu -- env HOME=/home/gpu PATH="${nvcc:+$(dirname "$nvcc"):}/usr/local/bin:/usr/bin:/bin" \
    RT_GPU_PYTHON="${RT_GPU_PYTHON:-/opt/torch/.venv/bin/python3}" "$@"
}
as_user timeout 300 bash "$work/gpu/check.sh" "$work/rt" "$img"
status=$?
echo "== what --ib injects on a node without a verbs device, and its cost"
as_user "$work/rt" exec -v --ib "$img" true 2>&1 | grep -v '^rt: mount' | head -60
as_user bash -c 'for _ in 1 2 3; do
  for args in "--no-ib" "--ib" "--gpu --ib"; do
    t0=$(date +%s%N)
    for ((i = 0; i < 50; i++)); do "$1" exec $args "$2" true || exit 1; done
    echo "$((($(date +%s%N) - t0) / 50000)) us per start: rt exec $args"
  done
done' - "$work/rt" "$img"
if [ -n "${2:-}" ]; then
  echo "== interleaved starts, this rt and the baseline"
  as_user bash -c 'for _ in 1 2 3 4 5; do
  for cmd in "unshare -Urm true" "$1 exec --no-gpu --no-ib $3 true" "$1 exec --gpu $3 true" \
             "$2 exec --no-gpu --no-ib $3 true" "$2 exec --gpu $3 true"; do
    t0=$(date +%s%N)
    for ((i = 0; i < 50; i++)); do $cmd || exit 1; done
    echo "$((($(date +%s%N) - t0) / 50000)) us per start: $cmd"
  done
done' - "$work/rt" "$work/baseline" "$img" | tee "$work/ab" | tail -5
  awk '/us per start/ { k = $0; sub(/.*start: /, "", k); s[k] += $1; n[k]++ }
    END { for (k in s) printf "mean %.0f us: %s\n", s[k] / n[k], k }' "$work/ab" | sort -t: -k2
fi
echo "== rt doctor"
as_user "$work/rt" doctor
exit $status
