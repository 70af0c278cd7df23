#!/bin/bash
# SquashFS images: rt convert, then rt exec/run of the .sqfs file mounted in
# process with libsquashfuse_ll (no fusermount, no helper).
. "$(dirname "$0")/lib.sh"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not usable by $(id -un) (needs mode 0666)"
export RT_STORAGE="$T/store"
tar -C "$IMG" -czf "$T/img.tar.gz" .
"$RT" import -q "$T/img.tar.gz" bb
"$RT" convert -q bb "$T/bb.sqfs"
expect_eq "$(head -c 4 "$T/bb.sqfs")" "hsqs" "rt convert writes a SquashFS file"
expect_status 125 "an existing destination is kept" -- "$RT" convert bb "$T/bb.sqfs"
expect_match "$ERR" "--force" "the hint names --force"
"$RT" convert -q --force bb "$T/bb2.sqfs"
cmp -s "$T/bb.sqfs" "$T/bb2.sqfs" && pass "conversion is reproducible" || fail "two conversions differ"
[ -z "$(ls "$T" | grep rt-tmp)" ] || fail "temporary files left beside the output"

# The tree through the mount equals the directory image.
# (directory sizes are a filesystem's own business and are left out)
listing='cd / && { find bin etc usr ! -type d -exec stat -c "%n %F %a %s %h %N" {} +; find bin etc usr -type d -exec stat -c "%n %F %a" {} +; } | sort && find bin etc -type f -exec md5sum {} + | sort'
dir=$(cd / && "$RT" exec bb sh -c "$listing")
sq=$(cd / && "$RT" exec "$T/bb.sqfs" sh -c "$listing")
[ -n "$dir" ] || fail "empty listing"
expect_eq "$sq" "$dir" "names, types, modes, sizes, link counts, symlinks and contents match the directory image"

out=$("$RT" exec "$T/bb.sqfs" rt-probe flags /)
expect_eq "$out" "ro nosuid nodev" "the SquashFS root is read-only, nosuid, nodev"
out=$("$RT" exec "$T/bb.sqfs" rt-probe ids)
expect_eq "$out" "uid=$(id -u) gid=$(id -g) euid=$(id -u) egid=$(id -g)" "ids inside"
expect_status 7 "exit status passes through the FUSE server" -- "$RT" exec "$T/bb.sqfs" rt-probe exit 7
expect_status 137 "death by signal passes through" -- "$RT" exec "$T/bb.sqfs" rt-probe kill 9
out=$("$RT" exec --root --write-tmpfs "$T/bb.sqfs" sh -c 'echo x > /etc/new && cat /etc/new')
expect_eq "$out" "x" "--write-tmpfs over a SquashFS image (files inside are root's: --root)"

# The configuration travels inside the file.
mkdir -p "$T/b" && cp -a "$IMG" "$T/b/rootfs"
echo '{"config":{"Cmd":["rt-probe","argv","from","sqfs"],"Env":["SQ=1"]}}' >"$T/b/image-config.json"
"$RT" convert -q "$T/b" "$T/b.sqfs"
cp "$T/b.sqfs" "$T/moved.sqfs"
expect_eq "$("$RT" run "$T/moved.sqfs")" "[from] [sqfs]" "rt run of a copied .sqfs uses the config inside it"
expect_eq "$("$RT" exec "$T/moved.sqfs" rt-probe env SQ)" "1" "and its Env"

# A daemon that outlives the first process still reads its files; rt waits for it.
start=$(date +%s%N)
"$RT" exec -b "$T" "$T/bb.sqfs" sh -c "(sleep 1; cat /etc/hosts > $T/daemon.out) >/dev/null 2>&1 & exit 0"
end=$(date +%s%N)
expect_eq "$(cat "$T/daemon.out")" "$(cat /etc/hosts)" "a daemon read the image after the first process exited"
[ $(((end - start) / 1000000)) -ge 900 ] && pass "rt returned only when the daemon was done" || fail "rt returned before its daemon"

# kill -9 of rt leaves no mount and no directory behind.
"$RT" exec "$T/bb.sqfs" sleep 30 &
pid=$!
sleep 0.5
kill -9 $pid
wait $pid 2>/dev/null || true
sleep 0.2
! grep -q fuse.rt /proc/self/mountinfo && pass "no FUSE mount on the host" || fail "a FUSE mount is visible on the host"
! pgrep -u "$(id -u)" -f "^sleep 30$" >/dev/null && pass "the program died with its server" || fail "the program outlived a killed rt"
expect_eq "$(ls -A "$RT_STORAGE/mnt")" "" "the mount point directory is empty"

# Broken files.
head -c 20000 "$T/bb.sqfs" >"$T/trunc.sqfs"
expect_status 125 "a truncated SquashFS file" -- "$RT" exec "$T/trunc.sqfs" true
expect_match "$ERR" "truncated" "says why"
{ printf 'hsqs'; head -c 100000 /dev/urandom; } >"$T/garbage.sqfs"
expect_status 125 "a corrupt SquashFS file" -- "$RT" exec "$T/garbage.sqfs" true
expect_match "$ERR" "garbage.sqfs" "names the file"
echo hello >"$T/notsqfs"
expect_status 125 "a file that is not SquashFS" -- "$RT" exec "$T/notsqfs" true
expect_match "$ERR" "neither a directory nor a SquashFS" "says why"
