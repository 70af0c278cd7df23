#!/bin/bash
# make-seeds.sh DIR: the fuzzers' starting inputs, made from their recipes
# (no binary is kept in the repository).
set -euo pipefail
out=$1
mkdir -p "$out"/squashfs
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
# A small tree with every kind of entry rt meets: directories, a file with
# whole blocks and a fragment tail, a hard link, symlinks, a fifo, and a
# directory long enough to carry an index.
mkdir -p "$t/tree/etc" "$t/tree/usr/bin" "$t/tree/long"
echo 'root:x:0:0:root:/root:/bin/sh' >"$t/tree/etc/passwd"
head -c 10000 /dev/zero | tr '\0' 'x' >"$t/tree/usr/bin/prog"
ln "$t/tree/usr/bin/prog" "$t/tree/usr/bin/prog2"
ln -s usr/bin "$t/tree/bin"
ln -s ../etc/passwd "$t/tree/usr/pw"
mkfifo "$t/tree/fifo"
# Extended attributes, inline and long, where the filesystem takes them.
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.a", b"v"); os.setxattr(sys.argv[1], "user.b", b"w" * 300)' \
  "$t/tree/etc/passwd" 2>/dev/null || true
for i in $(seq 400); do : >"$t/tree/long/a-rather-long-file-name-to-fill-listing-blocks-$i"; done
mksquashfs "$t/tree" "$out/squashfs/tree-gzip.sqfs" -noappend -quiet -no-progress -b 4096 -comp gzip -nopad >/dev/null
mksquashfs "$t/tree/etc" "$out/squashfs/small-zstd.sqfs" -noappend -quiet -no-progress -comp zstd -nopad >/dev/null
mksquashfs "$t/tree/usr" "$out/squashfs/plain.sqfs" -noappend -quiet -no-progress -noI -noD -noF -noX -nopad >/dev/null
# A SIF file around one of them (this project's writer, from the published layout).
python3 "$(dirname "$0")/../integration/siftool.py" make "$out/squashfs/small.sif" \
  --squashfs "$out/squashfs/small-zstd.sqfs" --deffile "$t/tree/etc/passwd" --signatures 1

mkdir -p "$out"/reference "$out"/manifest "$out"/site_config "$out"/cdi "$out"/tar "$out"/dockerfile
# rt build's Dockerfiles and .dockerignore, and the escape directive.
for f in "$(dirname "$0")"/../build/*/Dockerfile "$(dirname "$0")"/../build/*/.dockerignore; do
  cp "$f" "$out/dockerfile/$(basename "$(dirname "$f")")-$(basename "$f")"
done
printf '# escape=`\nFROM a\nRUN echo ${X:-d} `\n  && echo "$Y" \nENV A=1 B="two words" C=${A:+alt}\n' \
  >"$out/dockerfile/escape"
i=0
for r in busybox ubuntu:24.04 docker.io/library/debian:12 localhost:5000/a/b/c:tag \
  127.0.0.1:8443/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef \
  ghcr.io/Org/Repo:v1.2 '[::1]:5000/img:1'; do
  printf '%s' "$r" >"$out/reference/$((i++))"
done
d=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
cat >"$out/manifest/oci-manifest" <<JSON
{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
 "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "$d", "size": 7},
 "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "$d", "size": 32,
             "urls": ["http://x"], "annotations": {"a": "b"}}]}
JSON
cat >"$out/manifest/index" <<JSON
{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
 "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "$d", "size": 7,
                "platform": {"os": "linux", "architecture": "amd64"}},
               {"digest": "$d", "size": 7, "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}}]}
JSON
cat >"$out/manifest/config" <<JSON
{"architecture": "amd64", "os": "linux",
 "config": {"Env": ["PATH=/bin", "A=b"], "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo"], "WorkingDir": "/w",
            "User": "1000:1000"},
 "rootfs": {"type": "layers", "diff_ids": ["$d"]}}
JSON
cat >"$out/site_config/rt.conf" <<'CONF'
# a site's configuration
ld_cache = /etc/ld.so.cache
openmpi.library = /usr/lib/x86_64-linux-gnu/libmpi.so.40
openmpi.paths = /usr/lib/x86_64-linux-gnu/openmpi /etc/openmpi
gpu.libraries = libcuda.so.1 libnvidia-ml.so.1
cdi.dirs = /etc/cdi /var/run/cdi
CONF
{ printf '\0'; cat <<'YAML'; } >"$out/cdi/spec.yaml"
cdiVersion: 0.6.0
kind: example.com/gpu
containerEdits:
  env: [A=1]
  hooks:
    - hookName: createContainer
      path: /usr/bin/nvidia-cdi-hook
      args: [nvidia-cdi-hook, create-symlinks, --link, libcuda.so.1::/usr/lib/libcuda.so]
devices:
  - name: "0"
    containerEdits:
      deviceNodes: [{path: /dev/nvidia0}]
      mounts: [{hostPath: /usr/lib/libx.so.1, containerPath: /usr/lib/libx.so.1, options: [ro]}]
YAML
{ printf '\1'; cat <<'JSON'; } >"$out/cdi/spec.json"
{"cdiVersion": "0.6.0", "kind": "example.com/gpu",
 "devices": [{"name": "0", "containerEdits": {"env": ["B=2"], "hooks": [{"path": "/bin/true", "args": ["true", "update-ldcache", "--folder", "/usr/lib"]}]}}]}
JSON
# Layers: every kind of entry, whiteouts, and paths that try to leave.
l="$t/layer"
mkdir -p "$l/etc/sub" "$l/usr/bin"
echo hi >"$l/etc/file"
ln -s ../../../../etc/passwd "$l/etc/escape"
ln -s /etc "$l/abs"
ln "$l/etc/file" "$l/etc/hard"
: >"$l/etc/.wh.gone"
: >"$l/etc/sub/.wh..wh..opq"
chmod 0555 "$l/usr/bin"
tar -C "$l" -cf "$out/tar/plain.tar" --format=gnu .
tar -C "$l" -cf "$out/tar/pax.tar" --format=pax --numeric-owner .
chmod 0755 "$l/usr/bin"
tar -C "$t" -cf "$out/tar/dotdot.tar" --format=gnu --transform 's,^layer/etc/file,../outside,' layer/etc/file
