#!/bin/bash
# Security claims, checked from inside the container.
. "$(dirname "$0")/lib.sh"

out=$("$RT" exec "$IMG" rt-probe nnp)
expect_eq "$out" 1 "no_new_privs is set"
out=$("$RT" exec "$IMG" rt-probe mknod /tmp/rt-test-node-$$)
expect_eq "$out" "EPERM" "mknod of a device fails"
rm -f /tmp/rt-test-node-$$
out=$("$RT" exec "$IMG" rt-probe setuid 0)
expect_match "$out" "^(EPERM|EINVAL)$" "setuid(0) fails"
out=$("$RT" exec --root "$IMG" rt-probe setuid 1)
expect_match "$out" "^(EPERM|EINVAL)$" "even as mapped root, no other id exists"
# The root is the image's, with nothing beneath it a program could reach:
# without capabilities it cannot chroot (so not walk out of one); uid 0 can,
# and walking ".." out of a chroot leads it back to the image's root.
out=$("$RT" exec "$IMG" rt-probe chroot-escape /tmp)
expect_eq "$out" "EPERM" "a program cannot chroot"
out=$("$RT" exec --root "$IMG" rt-probe chroot-escape /tmp)
expect_eq "$out" "contained" "uid 0 walking out of a chroot finds the image's root"
out=$("$RT" exec "$IMG" sh -c 'cd /../../..; ls -id . /' | awk '{print $1}' | uniq | wc -l)
expect_eq "$out" 1 "/.. is /"

# Only stdio and what the caller passed are open in the program: rt adds
# no fd of its own (the harness may hold some open; compare with the probe
# run directly).
base=$(bash -c "exec $RT_PROBE fds" 5</dev/null 7>/dev/null)
out=$("$RT" exec "$IMG" rt-probe fds 5</dev/null 7>/dev/null)
expect_eq "$out" "$base" "rt leaks no fd into the program"
expect_match " $out " " 5( .*)? 7 " "inherited fds stay open"

# A setuid-root binary prepared by the test set-up runs without privilege.
if [ -n "${RT_SUID_FIXTURE:-}" ]; then
  [ -u "$RT_SUID_FIXTURE" ] || fail "fixture $RT_SUID_FIXTURE is not setuid"
  fx=$(dirname "$RT_SUID_FIXTURE")
  out=$("$RT" exec -b "$fx:/fx" "$IMG" /fx/"$(basename "$RT_SUID_FIXTURE")")
  expect_eq "$out" "euid=$(id -u) egid=$(id -g)" "a setuid-root binary gains nothing inside"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "RT_SUID_FIXTURE not prepared (the test command makes it as root)"
else
  echo "note: no setuid fixture (run test/run-all.sh as root to prepare one)"
fi

# Hostile image: symlinks pointing out of the root must not redirect mounts
# to the host.
mkdir -p "$T/outside" "$T/src"
echo data >"$T/src/f"
ln -s "$T/outside" "$IMG/escape"        # absolute link to a host path
ln -s ../../../../../../../.. "$IMG/up"  # climbs above the root
out=$("$RT" exec -b "$T/src:/escape/x" "$IMG" cat /escape/x/f)
expect_eq "$out" "data" "bind through an absolute symlink lands inside the image"
out=$("$RT" exec -b "$T/src:/up/y" "$IMG" cat /y/f)
expect_eq "$out" "data" "bind through a climbing symlink lands inside the image"
[ -z "$(ls -A "$T/outside")" ] || fail "something was created in the host directory"
pass "the host directory the link names is untouched"

# Hostile working directory (the runc CVE-2024-21626 pattern): an image
# whose WorkingDir is /proc/self/fd/N would start the program in whatever
# rt, or its caller, has open as N, on the host, and `cd ..` climbs to the
# host's /. The directory is resolved inside the root without magic links,
# and none of rt's descriptors is open by then.
hostile() {  # DIR WORKDIR: a bundle whose config names WORKDIR
  mkdir -p "$1"
  cp -a "$IMG" "$1/rootfs"
  printf '{"config":{"WorkingDir":"%s","Cmd":["rt-probe","cwd"]}}\n' "$2" >"$1/image-config.json"
}
# The descriptors rt itself has open at the moment it enters the working
# directory include the store, the image and the holders' sockets; every
# number up to 12 covers them (and 3 and 4 are also the caller's below).
callers=$(bash -c "exec $RT_PROBE fds" 3<"$T" 4<"$HOME")
for n in 3 4 5 6 7 8 9 10 11 12; do
  hostile "$T/h$n" "/proc/self/fd/$n"
  expect_status 125 "rt run, WorkingDir=/proc/self/fd/$n" -- "$RT" run "$T/h$n" 3<"$T" 4<"$HOME"
  # The caller's (3, 4 and what the harness holds) are open: a magic link.
  # The others were rt's, closed by then: nothing there (where the kernel
  # lacks openat2, the walk's own descriptors may stand there: a magic link).
  [[ " $callers " == *" $n "* ]] && why="goes through a /proc magic link; refused" ||
    why="(No such file or directory|goes through a /proc magic link; refused)"
  expect_match "$ERR" "(working directory|chdir) \`/proc/self/fd/$n\`:? $why" \
    "the message names the directory and the reason"
  [[ "$OUT" != /* ]] || fail "the program ran, in $OUT"
done
hostile "$T/hcwd" /proc/self/cwd
expect_status 125 "rt run, WorkingDir=/proc/self/cwd" -- "$RT" run "$T/hcwd"
expect_status 125 "rt exec --cd /proc/self/fd/3" -- "$RT" exec --cd /proc/self/fd/3 "$IMG" pwd 3<"$T"
hostile "$T/hsym" /escape-fd
ln -s /proc/self/fd/3 "$T/hsym/rootfs/escape-fd"
expect_status 125 "rt run, WorkingDir a symlink to /proc/self/fd/3" -- "$RT" run "$T/hsym" 3<"$T"
# The same image as a SquashFS file and as a SIF file (config inside).
mkdir -p "$T/h3/rootfs/.rt"
cp "$T/h3/image-config.json" "$T/h3/rootfs/.rt/image-config.json"
mksquashfs "$T/h3/rootfs" "$T/h3.sqfs" -quiet -no-progress -all-root >/dev/null
python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make "$T/h3.sif" --squashfs "$T/h3.sqfs"
for f in h3.sqfs h3.sif; do
  for n in 3 4 5 6 7 8; do
    sed "s|/proc/self/fd/3|/proc/self/fd/$n|" "$T/h3/image-config.json" >"$T/h3/rootfs/.rt/image-config.json"
    rm -f "$T/hn.sqfs" "$T/hn.sif"
    mksquashfs "$T/h3/rootfs" "$T/hn.sqfs" -quiet -no-progress -all-root >/dev/null
    [ "$f" = h3.sqfs ] && img=$T/hn.sqfs ||
      { python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make "$T/hn.sif" --squashfs "$T/hn.sqfs"; img=$T/hn.sif; }
    expect_status 125 "rt run ${f#h3.} file, WorkingDir=/proc/self/fd/$n" -- "$RT" run --no-home --private-tmp "$img"
    expect_match "$ERR" "(goes through a /proc magic link|No such file or directory)" "... refused for that reason"
  done
done
# A working directory that is fine still works, through a symlink inside.
hostile "$T/hok" /link-to-etc
ln -s /etc "$T/hok/rootfs/link-to-etc"
expect_status 0 "WorkingDir through an in-image symlink" -- "$RT" run "$T/hok"
expect_eq "$OUT" /etc "the program starts there"

# The caller's descriptors pass through exec (launchers need them); rt's own
# never reach the program, whatever the image form.
for img in "$IMG" "$T/h3.sqfs" "$T/h3.sif"; do
  base=$(bash -c "exec $RT_PROBE fds" 5</dev/null)
  out=$("$RT" exec "$img" rt-probe fds 5</dev/null)
  expect_eq "$out" "$base" "$(basename "$img"): only stdio and the caller's descriptors are open in the program"
done
out=$("$RT" exec --join "$IMG" rt-probe fds 5</dev/null)
expect_eq "$out" "$(bash -c "exec $RT_PROBE fds" 5</dev/null)" "... and in a joined container"

# Files rt reads from an image are regular files: a FIFO for /etc/passwd
# or /etc/group would block rt's read for good.
for f in passwd group; do
  cp -a "$IMG" "$T/fifo-$f"
  rm -f "$T/fifo-$f/etc/$f"
  mkfifo "$T/fifo-$f/etc/$f"
  expect_status 125 "an image whose /etc/$f is a FIFO" -- timeout 20 "$RT" exec "$T/fifo-$f" true
  expect_match "$ERR" "/etc/$f\` is not a regular file \(a FIFO\)" "the message names the file and what it is"
done

# ... and so are the store's files: a FIFO there hangs nothing.
export RT_STORAGE="$T/fifo-store"
tar -C "$IMG" -cf "$T/img.tar" .
"$RT" import -q "$T/img.tar" good
"$RT" import -q "$T/img.tar" broken
rm "$RT_STORAGE/images/broken/rt-image.json"
mkfifo "$RT_STORAGE/images/broken/rt-image.json"
expect_status 0 "rt images with a FIFO for an image's metadata" -- timeout 20 "$RT" images
expect_match "$OUT" "good" "the other images are listed"
expect_match "$ERR" "rt-image.json\` is not a regular file \(a FIFO\).*image \`broken\` left out" "the broken one is named"
expect_status 125 "rt inspect of it" -- timeout 20 "$RT" inspect broken
expect_match "$ERR" "is not a regular file \(a FIFO\)" "says why"
expect_status 125 "rt prune with it" -- timeout 20 "$RT" prune
expect_match "$ERR" "is not a regular file \(a FIFO\)" "stops rather than lose its layers"
expect_status 0 "the other image still runs" -- "$RT" exec good true
unset RT_STORAGE
