#!/bin/bash
# rt exec: what is mounted, where, read-only or not; the image is never modified.
. "$(dirname "$0")/lib.sh"

before=$(tree_listing "$IMG")

out=$("$RT" exec "$IMG" rt-probe flags /)
expect_eq "$out" "ro nosuid nodev" "image root is read-only, nosuid, nodev"
out=$("$RT" exec "$IMG" rt-probe write /newfile)
expect_eq "$out" "EROFS" "writing the image fails"

for p in /dev/null /proc/self/status /sys/kernel /etc/hosts; do
  "$RT" exec "$IMG" test -e "$p" || fail "$p is not visible"
done
pass "host /dev, /proc, /sys, /etc/hosts visible"

# An image without /etc/hosts (common: Docker supplies it at run time): the
# host's appears beside every entry of the image's /etc, which stays
# read-only. Where unprivileged overlayfs works, the missing entry comes
# with one overlay of /etc, not with a mount per entry.
noh="$T/nohosts"
cp -a "$IMG" "$noh"
rm "$noh/etc/hosts"
for i in $(seq 40); do echo "$i" >"$noh/etc/e$i"; done
mkdir "$noh/etc/sub" && echo deep >"$noh/etc/sub/f"
out=$("$RT" exec "$noh" sh -c 'ls -A /etc; cat /etc/e7 /etc/sub/f' 2>&1) || fail "rt exec of an image without /etc/hosts: $out"
for n in $(ls -A "$noh/etc") hosts; do
  grep -qx "$n" <<<"$out" || fail "/etc/$n is missing in the container"
done
pass "an image without /etc/hosts: every entry of its /etc, and the host's hosts"
expect_match "$out" $'7\ndeep' "the image's files in /etc read as they are"
expect_eq "$("$RT" exec -b /etc/hosts:/run/hosts.host "$noh" sh -c 'cmp /etc/hosts /run/hosts.host && echo same')" same \
  "/etc/hosts is the host's"
expect_eq "$("$RT" exec "$noh" rt-probe write /etc/new)" "EROFS" "/etc stays read-only"
mkdir -p "$T/ovl/l1" "$T/ovl/l2" "$T/ovl/m"
if unshare -rm mount -t overlay overlay -o "lowerdir=$T/ovl/l1:$T/ovl/l2,userxattr" "$T/ovl/m" 2>/dev/null; then
  n=$("$RT" exec "$noh" sh -c "awk '\$5 ~ \"^/etc/\"' /proc/self/mountinfo | wc -l")
  [ "$n" -le 5 ] || fail "$n mounts below /etc: one per entry, not one overlay"
  pass "the missing /etc/hosts costs one overlay, not a mount per entry ($n mounts below /etc)"
else
  echo "note: no unprivileged overlayfs here: /etc gets an underlay of binds"
fi
[ -e "$noh/etc/hosts" ] && fail "the image was written"

# A directory of nothing but empty directories and links (/home, /run with
# Debian's /run/lock) that lacks a mount point is copied, one bind: its
# entries as they were (modes, link targets), read-only; one that holds a
# file keeps the overlay.
hol="$T/hollow"
cp -a "$IMG" "$hol"
mkdir -p "$hol/run/lock" "$hol/mnt/keep" && chmod 1777 "$hol/run/lock" && ln -s lock "$hol/run/lk"
out=$("$RT" exec -vv -b "$T:/run/data" "$hol" sh -c 'stat -c "%n %a" /run/lock; readlink /run/lk; ls /run; ls /run/data >/dev/null && echo bound
  rt-probe write /run/new' 2>&1)
expect_match "$out" "\`/run\` \(empty directories and links only\) copied with \`data\`" "-vv: /run (only /run/lock and a link) is copied"
expect_match "$out" $'/run/lock 1777\nlock\ndata\nlk\nlock\nbound\nEROFS' "... its entries as they were, the bind on it, read-only"
echo note >"$hol/run/file"
out=$("$RT" exec -vv -b "$T:/run/data" "$hol" cat /run/file 2>&1)
expect_match "$out" "overlay \`/run\` with \`data\`" "/run holding a file gets an overlay"
expect_match "$out" "note" "... through which its file reads"
[ -e "$hol/run/data" ] && fail "the image was written"

shm=/dev/shm/rt-test-$$
echo shared >"$shm"
out=$("$RT" exec "$IMG" cat "$shm")
rm -f "$shm"
expect_eq "$out" "shared" "host /dev/shm is shared"

tmpf=$(mktemp /tmp/rt-test-tmp.XXXXXX)
echo hosttmp >"$tmpf"
out=$("$RT" exec "$IMG" cat "$tmpf")
expect_eq "$out" "hosttmp" "host /tmp is shared"
out=$("$RT" exec --private-tmp "$IMG" sh -c "test -e $tmpf && echo visible || echo hidden; touch /tmp/x && echo writable")
rm -f "$tmpf"
expect_eq "$out" $'hidden\nwritable' "--private-tmp hides the host's /tmp"

mkdir -p "$T/home/me"
echo mine >"$T/home/me/file"
out=$(HOME="$T/home/me" "$RT" exec "$IMG" cat "$T/home/me/file")
expect_eq "$out" "mine" "home is visible at its host path"
out=$(cd / && HOME="$T/home/me" "$RT" exec --no-home "$IMG" sh -c "test -e $T/home/me/file && echo visible || echo hidden")
expect_eq "$out" "hidden" "--no-home"

# Binds, including destinations the read-only image lacks.
mkdir -p "$T/src"
echo data >"$T/src/f"
out=$("$RT" exec -b "$T/src:/new/deep/dir" "$IMG" cat /new/deep/dir/f)
expect_eq "$out" "data" "bind to a destination missing from a read-only image"
out=$("$RT" exec -b "$T/src/f:/etc/newfile" "$IMG" cat /etc/newfile)
expect_eq "$out" "data" "bind a file to a destination missing from the image"
out=$("$RT" exec -b "$T/src:/home/x:ro" "$IMG" rt-probe write /home/x/g)
expect_eq "$out" "EROFS" ":ro bind is read-only"
# ... and so is a mount below its source, which the bind brings along (rt
# run here in a user namespace of its own, where a tmpfs can be mounted).
mkdir -p "$T/src/sub"
out=$(unshare -Urm sh -c 'mount -t tmpfs tmpfs "$1/sub" && exec "$2" exec -b "$1:/home/x:ro" "$3" sh -c \
  "rt-probe write /home/x/sub/g; rt-probe write /home/x/g"' sh "$T/src" "$RT" "$IMG")
expect_eq "$out" $'EROFS\nEROFS' ":ro bind is read-only below it too"
rmdir "$T/src/sub"
out=$("$RT" exec -b "$T/src:/home/x" "$IMG" rt-probe write /home/x/g)
expect_eq "$out" "ok" "bind is writable by default"
[ -e "$T/src/g" ] || fail "write through the bind did not reach the host"
out=$("$RT" exec -b "$T/src:/bin/extra" "$IMG" sh -c 'ls /bin/extra; ls /bin/sh')
expect_eq "$out" $'f\ng\n/bin/sh' "the rest of a directory with a new mount point stays visible"
out=$("$RT" exec -b "$T/src:/tmp/inside" "$IMG" cat /tmp/inside/f)
expect_eq "$out" "data" "bind below another bind (host /tmp) with a missing destination"
[ ! -e /tmp/inside ] || fail "a mount point was made on the host's /tmp"
pass "nothing was created in the host's /tmp"

# A bind of a directory that holds the image shows the image as it is, not
# rt's own staging mounts.
out=$("$RT" exec -b "$T" "$IMG" sh -c "ls $IMG/bin/busybox; ls $IMG | grep -c passwd || true")
expect_eq "$out" "$IMG/bin/busybox"$'\n'"0" "a bound ancestor of the image shows the image, not rt's staging"

after=$(tree_listing "$IMG")
expect_eq "$after" "$before" "the read-only image is unchanged"

# --write-tmpfs: writable, changes discarded.
out=$("$RT" exec --write-tmpfs "$IMG" sh -c 'echo x > /etc/new && rm /bin/ls && cat /etc/new && rt-probe flags /')
expect_eq "$out" $'x\nrw nosuid nodev' "--write-tmpfs makes the image writable"
expect_eq "$(tree_listing "$IMG")" "$before" "--write-tmpfs changes are discarded"
out=$("$RT" exec --write-tmpfs -b "$T/src:/brand/new" "$IMG" ls /brand/new/f)
expect_eq "$out" "/brand/new/f" "--write-tmpfs with a missing bind destination"

# --write: the image changes for real.
out=$("$RT" exec --write "$IMG" sh -c 'echo kept > /etc/kept && rt-probe flags /')
expect_eq "$out" "rw nosuid nodev" "--write makes the image writable"
expect_eq "$(cat "$IMG/etc/kept")" "kept" "--write writes reach the image"
