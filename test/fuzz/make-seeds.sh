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
for i in $(seq 400); do : >"$t/tree/long/a-rather-long-file-name-to-fill-listing-blocks-$i"; done
mksquashfs "$t/tree" "$out/squashfs/tree-gzip.sqfs" -noappend -quiet -no-progress -b 4096 -comp gzip -nopad >/dev/null
mksquashfs "$t/tree/etc" "$out/squashfs/small-zstd.sqfs" -noappend -quiet -no-progress -comp zstd -nopad >/dev/null
mksquashfs "$t/tree/usr" "$out/squashfs/plain.sqfs" -noappend -quiet -no-progress -noI -noD -noF -noX -nopad >/dev/null
