#!/bin/bash
# rt on an older kernel (RHEL 8's 4.18 and its rebuilds): every system call
# Linux added after 4.18 fails with ENOSYS (rt-old-kernel, a seccomp filter
# that rt, its servers and the program inherit), so rt must take its
# fallbacks: path resolution without openat2, a SquashFS server that hands
# out its namespace where it cannot copy its mount (open_tree), read-only
# trees remounted one by one (no mount_setattr), the root entered with
# pivot_root where a kernel refuses to move it over "/", and overlay images
# served by fuse-overlayfs through a mount made in the container's
# namespace. The filter cannot refuse what 4.18 refuses by file system type
# (overlayfs in a user namespace, Linux 5.11): the kernel's overlayfs stays
# usable here.
. "$(dirname "$0")/lib.sh"
: "${RT_OLD_KERNEL:?RT_OLD_KERNEL must name the rt-old-kernel binary}"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not usable by $(id -un) (needs mode 0666)"
export RT_STORAGE="$T/store" RT_SQUASHFS_LINGER=60  # one server for the starts of an image
own_rt
old() { "$RT_OLD_KERNEL" "$@"; }

# The filter is what rt meets: doctor finds no openat2, and warns.
out=$(old "$RT" doctor 2>&1) || true
expect_match "$out" "! openat2: Function not implemented: paths in images are resolved one component at a time" \
  "rt doctor sees the older kernel (no openat2) and warns"
expect_match "$out" "! mount API: no open_tree: .*; no mount_setattr: read-only trees are remounted mount by mount" \
  "... and says what the missing mount calls change"
# Unpacking resolves each path in the image by walking it.
tar -C "$IMG" -cf "$T/img.tar" .
old "$RT" import -q "$T/img.tar" imported
expect_eq "$(old "$RT" exec imported rt-probe flags /)" "ro nosuid nodev" "rt import unpacks, rt exec runs it from the store"

expect_eq "$(old "$RT" exec "$IMG" rt-probe flags /)" "ro nosuid nodev" "a directory image: the root read-only, nosuid, nodev"
expect_eq "$(old "$RT" exec "$IMG" rt-probe write /newfile)" "EROFS" "... and not writable"
expect_eq "$(old --no-move-root "$RT" exec "$IMG" rt-probe flags /)" "ro nosuid nodev" \
  "the root entered with pivot_root where it cannot be moved over /"
expect_eq "$(old --no-move-root "$RT" exec --root "$IMG" rt-probe chroot-escape /tmp)" "contained" \
  "... and uid 0 walking out of a chroot still finds the image's root"
out=$(old --no-move-root "$RT" exec "$IMG" sh -c 'cd /../../..; ls -id . /' | awk '{print $1}' | uniq | wc -l)
expect_eq "$out" 1 "... where /.. is /"

# SquashFS and SIF: the server cannot copy its mount for a container
# (open_tree, Linux 5.2); the container copies the server's namespace and
# binds the image from there.
mksquashfs "$IMG" "$T/img.sqfs" -comp zstd -all-root -quiet -no-progress >/dev/null
python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make "$T/img.sif" --squashfs "$T/img.sqfs"
for f in img.sqfs img.sif; do
  expect_eq "$(old "$RT" exec "$T/$f" cat /etc/os-release | head -1)" "$(head -1 "$IMG/etc/os-release")" \
    "a ${f#img.} image starts (its server started under the older kernel)"
  expect_eq "$(old "$RT" exec "$T/$f" rt-probe flags /)" "ro nosuid nodev" "... again, from that server: ro, nosuid, nodev"
  expect_eq "$(old "$RT" exec "$T/$f" rt-probe write /newfile)" "EROFS" "... and not writable"
  expect_eq "$(pgrep -u "$(id -u)" -fc "^rt-sqfs $T/$f")" 1 "... all from one server"
done
out=$(old "$RT" exec "$T/img.sqfs" sh -c 'cat /proc/self/mountinfo')
[[ $out == *"$RT_STORAGE"* ]] && fail "the container's mount table shows the store: $out"
pass "the image is mounted in the container only as its root"
# A bind of a directory that holds the image or the store: rt's staging
# tmpfs, and the server's mount below it, came along (no open_tree to copy
# the source first), and are taken off the copy.
out=$(old "$RT" exec -b "$T" "$IMG" sh -c "ls $IMG/bin/busybox; ls $IMG | grep -c passwd || true")
expect_eq "$out" "$IMG/bin/busybox"$'\n'"0" "a bound ancestor of the image shows the image, not rt's staging"
expect_eq "$(old "$RT" exec -b "$T" "$T/img.sqfs" ls -A "$RT_STORAGE/mnt")" "" \
  "a bound ancestor of the store shows its mount point empty, not the server's mount"
expect_status 0 "an instance of the SquashFS image starts" -- old "$RT" instance start -q "$T/img.sqfs" old$$ sleep 1000
expect_eq "$(old "$RT" exec instance://old$$ rt-probe flags /)" "ro nosuid nodev" "rt exec instance:// enters it"
expect_status 0 "and stops" -- old "$RT" instance stop -q old$$

# A :ro bind is read-only with the mounts below its source (each remounted:
# no mount_setattr, found in mountinfo, where a space reads \040), rt run
# in a user namespace where a tmpfs can be mounted.
mkdir -p "$T/src/sub dir"
out=$(old unshare -Urm sh -c 'mount -t tmpfs tmpfs "$1/sub dir" && exec "$2" exec -b "$1:/home/x:ro" "$3" sh -c \
  "rt-probe write \"/home/x/sub dir/g\"; rt-probe write /home/x/g"' sh "$T/src" "$RT" "$IMG")
expect_eq "$out" $'EROFS\nEROFS' "a :ro bind and a mount below its source (a space in its name) are read-only"

# Injected host files: the links' tree and each host directory bound,
# every one of those mounts read-only, nosuid, nodev.
mkdir -p "$T/glibc/lib/x86_64-linux-gnu" "$T/hostlib"
cp -a "$IMG"/. "$T/glibc/"
cp /lib/x86_64-linux-gnu/libc.so.6 "$T/glibc/lib/x86_64-linux-gnu/"
echo 'int xold(void){return 7;}' >"$T/xold.c"
gcc -shared -fPIC -Wl,-soname,libxold.so.1 -o "$T/hostlib/libxold.so.1" "$T/xold.c"
printf 'gpu.libraries = %s\n' "$T/hostlib/libxold.so.1" >"$T/rt.conf"
out=$(RT_CONF="$T/rt.conf" old "$RT" exec --gpu "$T/glibc" sh -c 'cat /run/rt-host/lib/libxold.so.1 | md5sum
  awk '\''$5 ~ "^/run/rt-host" {print $6}'\'' /proc/self/mountinfo | cut -d, -f1-3 | sort | uniq -c
  rt-probe write /run/rt-host/.d/0/new')
expect_match "$out" "^$(md5sum <"$T/hostlib/libxold.so.1")" "the injected library is the host's file"
expect_match "$out" " +2 ro,nosuid,nodev
EROFS$" "its two mounts are read-only, nosuid, nodev, and the host directory cannot be written"

# An overlay image goes through fuse2fs and fuse-overlayfs, whose merged
# tree the keeper cannot hand over (open_tree): it is mounted in the
# container's namespace first, and fuse-overlayfs serves it from the
# keeper's through its /dev/fuse descriptor.
"$RT" overlay create --size 32 "$T/ov.img"
expect_eq "$(old "$RT" exec --overlay "$T/ov.img" "$IMG" sh -c 'echo kept >/new && cat /new')" "kept" \
  "an overlay image takes the writes"
gone() { ! pgrep -u "$(id -u)" -f "^([^ ]*/fuse2fs|rt-overlay) $T/ov.img" >/dev/null; }
wait_until 30 gone || fail "its programs outlived the container"
expect_eq "$("$RT" exec --overlay "$T/ov.img" "$IMG" cat /new)" "kept" "... kept in the image, and its programs end"

pkill -u "$(id -u)" -f "^rt-sqfs $T/" || true
