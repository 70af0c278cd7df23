#!/bin/bash
# make-busybox-image.sh DIR: a small root filesystem built from Debian's
# busybox-static, enough to run rt without any registry or network.
set -euo pipefail
d=${1:?usage: make-busybox-image.sh DIR}
bb=${BUSYBOX:-/bin/busybox}
[ -x "$bb" ] || { echo "make-busybox-image: $bb missing (apt-get install busybox-static)" >&2; exit 1; }
mkdir -p "$d"/{bin,etc,tmp,dev,proc,sys,home,root,usr/bin,var}
cp "$bb" "$d/bin/busybox"
for a in $("$bb" --list); do
  [ "$a" = busybox ] || ln -sf busybox "$d/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n' >"$d/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
printf '127.0.0.1 localhost\n' >"$d/etc/hosts"
: >"$d/etc/resolv.conf"
printf 'NAME="rt busybox example"\nID=busybox\n' >"$d/etc/os-release"
