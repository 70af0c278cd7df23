#!/bin/bash
# The README's first command on a fresh Debian 12 system, timed: a new
# bookworm root (mmdebstrap, from Debian's mirror) with what a new machine
# of this kind has (g++, cmake, git), this checkout cloned into it, and
# `bash examples/quickstart.sh` run there as root in a mount namespace of
# its own (pivot_root, so that the quickstart's unprivileged container
# can make its user namespace, which a chroot forbids). Prints the
# quickstart's output with the seconds since it began, its total time and
# the longest silence. Run as root; needs network access to the mirror.
# Usage: bench/quickstart.sh [WORKDIR] (default /var/tmp/rt-fresh-quickstart)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/var/tmp/rt-fresh-quickstart}
[ "$(id -u)" = 0 ] || { echo "quickstart.sh: run it as root" >&2; exit 1; }
[ ! -e "$work" ] || { echo "quickstart.sh: $work exists; remove it or name another" >&2; exit 1; }
mkdir -p "$work"
root=$work/root
echo "making a fresh bookworm root in $root"
mmdebstrap --quiet --variant=minbase --include=g++,make,cmake,git,ca-certificates bookworm "$root"
git clone -q "$src" "$root/root/rt"
cp /etc/resolv.conf "$root/etc/resolv.conf"
unshare --mount --propagation private bash -c '
  set -e
  root=$1
  mount --bind "$root" "$root"
  mount --rbind /dev "$root/dev"
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount -t tmpfs tmpfs "$root/tmp"
  mkdir -p "$root/.old"
  cd "$root"
  pivot_root . .old
  umount -l /.old
  cd /root/rt
  exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
    bash examples/quickstart.sh' - "$root" 2>&1 |
  {
    # bash reads a pipe a byte at a time: each line is timed as it comes.
    start=$SECONDS last=$SECONDS longest=0 before=""
    while IFS= read -r line; do
      if ((SECONDS - last > longest)); then longest=$((SECONDS - last)) before=$line; fi
      last=$SECONDS
      printf '%4d s | %s\n' $((SECONDS - start)) "$line"
    done
    echo "total $((SECONDS - start)) s; longest silence $longest s, ended by: $before"
  }
