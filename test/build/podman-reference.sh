#!/bin/bash
# The same Dockerfiles built by a builder nobody here wrote: podman build
# (Debian's podman, as root, --isolation=chroot) from the same Debian root
# filesystem, for test/integration/build.sh to compare rt build with.
#   podman-reference.sh OUT DEBIAN_ROOTFS_TAR
# Writes OUT/NAME.tar (the image's tree, from podman export) and
# OUT/NAME.json (podman image inspect) for each directory of test/build that holds a
# Dockerfile. Rebuilt only when the Dockerfiles, their contexts, the base
# or podman changed. podman keeps its own store under OUT: the system's is
# never touched.
set -euo pipefail
out=${1:?OUT}
base_tar=${2:?DEBIAN_ROOTFS_TAR}
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "podman-reference: run as root" >&2; exit 1; }
command -v podman >/dev/null || { echo "podman-reference: podman is not installed" >&2; exit 1; }

stamp=$( (cd "$here" && tar --sort=name --mtime=@0 --owner=0 --group=0 -cf - .; stat -c '%s %Y' "$base_tar";
  podman --version) | sha256sum | cut -c1-64)
if [ -s "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then exit 0; fi
rm -rf "$out"
mkdir -p "$out"
podman=(podman --root "$out/storage" --runroot "$out/run" --storage-driver overlay)
"${podman[@]}" import -q --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  "$base_tar" localhost/rt-test-debian:12 >/dev/null
for dir in "$here"/*/; do
  [ -f "$dir/Dockerfile" ] || continue
  name=$(basename "$dir")
  "${podman[@]}" build -q --format docker --isolation=chroot --build-arg BASE=localhost/rt-test-debian:12 -t "rt-ref-$name" "$dir" \
    >/dev/null
  "${podman[@]}" image inspect "rt-ref-$name" >"$out/$name.json"
  c=$("${podman[@]}" create "rt-ref-$name" true)
  "${podman[@]}" export -o "$out/$name.tar" "$c"
  "${podman[@]}" rm "$c" >/dev/null 2>&1
done
# Only the trees and configs are needed: the store goes.
"${podman[@]}" system reset -f >/dev/null 2>&1 || true
rm -rf "$out/storage" "$out/run"
chmod -R a+rX "$out"
echo "$stamp" >"$out/stamp"
