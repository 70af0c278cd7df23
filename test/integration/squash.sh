#!/bin/bash
# SquashFS images: rt convert, then rt exec/run of the .sqfs file served by
# rt's own FUSE server (libsquashfuse_ll, no fusermount, no helper).
. "$(dirname "$0")/lib.sh"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not usable by $(id -un) (needs mode 0666)"
export RT_STORAGE="$T/store"
own_rt
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

# Private files read the same in both forms: the user who can read the
# directory image's 0600 file and list its 0700 directory can in the
# SquashFS form too (both show the user as owner), with --root as well.
mkdir -p "$T/priv/root/private"
cp -a "$IMG"/. "$T/priv/"
echo secret >"$T/priv/root/.bashrc"
echo key >"$T/priv/root/private/key"
chmod 0600 "$T/priv/root/.bashrc" "$T/priv/root/private/key"
chmod 0700 "$T/priv/root" "$T/priv/root/private"
tar -C "$T/priv" -cf "$T/priv.tar" .
"$RT" import -q "$T/priv.tar" priv
"$RT" convert -q priv "$T/priv.sqfs"
see='cat /root/.bashrc /root/private/key && ls /root/private && stat -c "%U %a %n" /root /root/.bashrc /root/private/key'
for mode in "" --root; do
  d=$("$RT" exec $mode priv sh -c "$see" 2>&1)
  q=$("$RT" exec $mode "$T/priv.sqfs" sh -c "$see" 2>&1)
  expect_match "$d" "^secret" "directory form ${mode:-as the user}: the 0600 file reads"
  expect_eq "$q" "$d" "SquashFS form ${mode:-as the user}: the same files read, list and show the same owner"
done

# Extended attributes: an image with them (mksquashfs keeps them) shows
# them; rt writes none, and its images say so once (the kernel then stops
# asking, where `ls -l` asks twice per file).
cp -a "$IMG" "$T/xa"
echo x >"$T/xa/etc/xa"
if python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.rt", b"hello")' "$T/xa/etc/xa" 2>/dev/null; then
  mksquashfs "$T/xa" "$T/xa.sqfs" -quiet -no-progress -comp zstd >/dev/null
  expect_eq "$("$RT" exec "$T/xa.sqfs" rt-probe xattr /etc/xa user.rt)" "hello" "an image's extended attributes are served"
  expect_eq "$("$RT" exec "$T/xa.sqfs" rt-probe xattr /bin/rt-probe user.rt)" "ENODATA" "and a file without one has none"
else
  echo "note: $T does not take user xattrs; the image with xattrs is not tested"
fi
expect_eq "$("$RT" exec "$T/bb.sqfs" rt-probe xattr /bin/rt-probe user.rt)" "EOPNOTSUPP" "rt's own images have no xattrs"
expect_match "$("$RT" exec "$T/bb.sqfs" ls -l /bin/sh)" "sh -> " "and ls -l works on them"

# A real image read whole, in listing order (the server pushes the pages of
# the next files ahead of the reader), and some files read out of order.
if [ -s "${RT_DEBIAN_ROOTFS:-}" ]; then
  "$RT_IMAGE" import -q "$RT_DEBIAN_ROOTFS" deb
  "$RT" convert -q deb "$T/deb.sqfs"
  sums='cd / && find usr etc -type f -perm -004 -exec md5sum {} + | sort; ls /usr/lib/x86_64-linux-gnu | sort -r | head -50 | (cd /usr/lib/x86_64-linux-gnu && xargs md5sum 2>/dev/null); true'
  want=$(cd / && "$RT" exec deb sh -c "$sums")
  expect_eq "$(cd / && RT_SQUASHFS_LINGER=0 "$RT" exec "$T/deb.sqfs" sh -c "$sums")" "$want" \
    "every file of the Debian image reads the same through the SquashFS mount as from the directory"
  # (members come in listing order, which differs between the two, and so
  # does which of two hard links carries the data: summed one by one)
  whole='cd / && tar -cf - usr | python3 -c "import hashlib, sys, tarfile
t, h = tarfile.open(fileobj=sys.stdin.buffer, mode=\"r|\"), {}
for m in t:
    if m.isfile(): h[m.name] = hashlib.md5(t.extractfile(m).read()).hexdigest()
    elif m.islnk(): h[m.name] = h[m.linkname]
print(sorted(h.items()))"'
  expect_eq "$(cd / && RT_SQUASHFS_LINGER=0 "$RT" exec "$T/deb.sqfs" sh -c "$whole")" \
    "$(cd / && "$RT" exec deb sh -c "$whole")" "and so does a whole-image tar"

  # Interrupted conversions: SIGTERM cleans up and ends as the signal does;
  # SIGKILL leaves the private directory, which the next conversion there
  # removes, and never an orphaned mksquashfs.
  mkdir -p "$T/conv"
  helpers() { pgrep -u "$(id -u)" -f "^mksquashfs .*$T/conv" || true; }
  interrupt() {  # interrupt SIGNAL: start a conversion, signal it mid-way, wait
    "$RT" convert -q --force deb "$T/conv/deb.sqfs" &
    local pid=$! i
    for i in $(seq 200); do [ -n "$(helpers)" ] && break; sleep 0.05; done
    [ -n "$(helpers)" ] || fail "mksquashfs never started"
    kill -"$1" "$pid"
    wait "$pid" && rc=0 || rc=$?
    for i in $(seq 40); do [ -z "$(helpers)" ] && break; sleep 0.05; done
    [ -z "$(helpers)" ] && pass "$1: no mksquashfs left running" || fail "$1: mksquashfs outlived rt: $(helpers)"
  }
  interrupt TERM
  expect_eq "$rc" 143 "SIGTERM: rt ends as the signal does"
  expect_eq "$(ls -A "$T/conv")" "" "SIGTERM: nothing left beside the destination"
  interrupt KILL
  expect_match "$(ls -A "$T/conv")" "^\.rt-tmp\." "SIGKILL leaves its private directory"
  "$RT" convert -q bb "$T/conv/bb.sqfs"
  expect_eq "$(ls -A "$T/conv")" "bb.sqfs" "the next conversion there removes it"
fi

# A full disk: the helper's failure is named, with the cause.
if unshare -Urm true 2>/dev/null; then
  mkdir -p "$T/full"
  # (a directory needs no store, which the namespace's view of /var/tmp
  # would refuse)
  expect_status 125 "a conversion onto a full filesystem fails" -- unshare -Urm sh -c \
    'mount -t tmpfs -o size=64k rt-full "$1" && exec "$2" convert -q "$3" "$1/x.sqfs"' sh "$T/full" "$RT_IMAGE" "$IMG"
  expect_match "$ERR" "mksquashfs failed .*no space left on the filesystem of .$T/full. \([0-9]+ bytes free\)" \
    "the error says the disk is full"
fi

# A store image kept as one SquashFS file (--format sqfs, or RT_STORE_FORMAT).
RT_STORE_FORMAT=sqfs "$RT" import -q "$T/img.tar.gz" bbsq
[ -f "$RT_STORAGE/images/bbsq/image.sqfs" ] && [ ! -e "$RT_STORAGE/images/bbsq/rootfs" ] &&
  pass "import with RT_STORE_FORMAT=sqfs keeps image.sqfs and no tree" || fail "no image.sqfs in the store"
expect_eq "$(cd / && "$RT" exec bbsq sh -c "$listing")" "$dir" "the store's SquashFS image shows the same tree"
expect_match "$("$RT" exec bbsq cat /proc/self/mountinfo | awk '$5 == "/"')" "fuse" "and is served over FUSE"
"$RT" convert -q bbsq "$T/out-of-store.sqfs"
cmp -s "$T/out-of-store.sqfs" "$RT_STORAGE/images/bbsq/image.sqfs" && pass "convert copies it out as a .sqfs file" ||
  fail "convert store sqfs -> file"
"$RT" convert -q bbsq "$T/bbsq-dir"
expect_eq "$(cd "$T/bbsq-dir/rootfs" && cat etc/os-release)" "$(cat "$IMG/etc/os-release")" "and into a bundle directory"
expect_match "$("$RT" images)" "bbsq" "rt images lists it"
"$RT" rm bbsq
[ ! -e "$RT_STORAGE/images/bbsq" ] && pass "rt rm removes it" || fail "rt rm left it"

out=$("$RT" exec "$T/bb.sqfs" rt-probe flags /)
expect_eq "$out" "ro nosuid nodev" "the SquashFS root is read-only, nosuid, nodev"
out=$("$RT" exec "$T/bb.sqfs" rt-probe ids)
expect_eq "$out" "uid=$(id -u) gid=$(id -g) euid=$(id -u) egid=$(id -g)" "ids inside"
expect_status 7 "exit status" -- "$RT" exec "$T/bb.sqfs" rt-probe exit 7
expect_status 137 "death by signal" -- "$RT" exec "$T/bb.sqfs" rt-probe kill 9
out=$("$RT" exec --root --write-tmpfs "$T/bb.sqfs" sh -c 'echo x > /etc/new && cat /etc/new')
expect_eq "$out" "x" "--write-tmpfs over a SquashFS image (files inside are root's: --root)"

# The configuration travels inside the file.
mkdir -p "$T/b" && cp -a "$IMG" "$T/b/rootfs" && ln -s bin "$T/b/rootfs/altbin"
echo '{"config":{"Cmd":["rt-probe","argv","from","sqfs"],"Env":["SQ=1"]}}' >"$T/b/image-config.json"
"$RT" convert -q "$T/b" "$T/b.sqfs"
cp "$T/b.sqfs" "$T/moved.sqfs"
expect_eq "$("$RT" run "$T/moved.sqfs")" "[from] [sqfs]" "rt run of a copied .sqfs uses the config inside it"
expect_eq "$("$RT" exec "$T/moved.sqfs" rt-probe env SQ)" "1" "and its Env"
out=$(echo 'echo $0' | SHELL=/altbin/sh "$RT" shell "$T/moved.sqfs")
expect_eq "$out" "/altbin/sh" "rt shell finds \$SHELL through a symlinked directory inside the SquashFS file"

# The program is exec'd in place, as for a directory image.
bash -c 'echo $$ > '"$T"'/pid; exec "$@"' _ "$RT" exec "$T/bb.sqfs" sh -c 'echo $$' >"$T/inner"
expect_eq "$(cat "$T/inner")" "$(cat "$T/pid")" "the program has rt's PID (exec in place, no server parent)"
# The image mount is not seen again through a bind that holds the mount point.
expect_eq "$("$RT" exec -b "$T" "$T/bb.sqfs" ls -A "$RT_STORAGE/mnt")" "" "the store's mount point is empty inside"

# A daemon that outlives the first process still reads its files.
rm -f "$T/daemon.out"
"$RT" exec -b "$T" "$T/bb.sqfs" sh -c "(sleep 1; cat /etc/hosts > $T/daemon.tmp; mv $T/daemon.tmp $T/daemon.out) >/dev/null 2>&1 & exit 0"
wait_until 30 test -e "$T/daemon.out" || true
expect_eq "$(cat "$T/daemon.out" 2>/dev/null)" "$(cat /etc/hosts)" "a daemon read the image after the first process exited"
servers() { rt_processes; }
no_servers() { [ -z "$(servers)" ]; }
wait_until 20 no_servers || true
expect_eq "$(servers)" "" "the server left once the daemon was gone (RT_SQUASHFS_LINGER=0)"

# kill -9 of the program leaves no mount and no directory behind.
"$RT" exec "$T/bb.sqfs" sleep 30 &
pid=$!
sleep 0.5
kill -9 $pid
wait $pid 2>/dev/null || true
wait_until 20 no_servers || true
! grep -q fuse.rt /proc/self/mountinfo && pass "no FUSE mount on the host" || fail "a FUSE mount is visible on the host"
expect_eq "$(servers)" "" "no server left after kill -9"
expect_eq "$(ls -A "$RT_STORAGE/mnt")" "" "the mount point directory is empty"

# The server is shared and lingers: the next container finds the image's
# mount (and the kernel's caches of it) still there.
dev() { RT_SQUASHFS_LINGER=$1 "$RT" exec "$2" stat -c %d /; }
d1=$(dev 2 "$T/bb.sqfs")
d2=$(dev 2 "$T/bb.sqfs")
[ -n "$(servers)" ] && pass "the server lingers after its container exited" || fail "no lingering server"
expect_eq "$d2" "$d1" "the next container of the image uses the same mount"
d3=$(dev 2 "$T/moved.sqfs")
[ "$d3" != "$d1" ] && pass "another image has a server of its own" || fail "two images shared one mount"
RT_SQUASHFS_LINGER=2 "$RT" exec "$T/bb.sqfs" sh -c '(sleep 3; cat /etc/hosts > /dev/null) >/dev/null 2>&1 &'
sleep 2.5
[ -n "$(servers)" ] && pass "a daemon keeps the server past its linger time" || fail "the server left under a daemon"
wait_until 20 no_servers || true
expect_eq "$(servers)" "" "servers exit once idle for the linger time"
expect_status 125 "a bad RT_SQUASHFS_LINGER" -- env RT_SQUASHFS_LINGER=soon "$RT" exec "$T/bb.sqfs" true
expect_match "$ERR" "RT_SQUASHFS_LINGER" "names the variable"

# Broken files.
head -c 20000 "$T/bb.sqfs" >"$T/trunc.sqfs"
expect_status 125 "a truncated SquashFS file" -- "$RT" exec "$T/trunc.sqfs" true
expect_match "$ERR" "truncated" "says why"
{ printf 'hsqs'; head -c 100000 /dev/urandom; } >"$T/garbage.sqfs"
expect_status 125 "a corrupt SquashFS file" -- "$RT" exec "$T/garbage.sqfs" true
expect_match "$ERR" "garbage.sqfs" "names the file"
echo hello >"$T/notsqfs"
expect_status 125 "a file that is not SquashFS" -- "$RT" exec "$T/notsqfs" true
expect_match "$ERR" "neither a directory, a SquashFS file nor a SIF" "says why"

# --- SquashFS straight from the layers (import --squash): same tree as unpacking ---
if command -v tar2sqfs >/dev/null; then
  OCI="python3 $RT_SOURCE_DIR/test/integration/ocitool.py"
  L="$T/layers"
  make_tricky_layers "$L"
  $OCI layout "$T/lay" --tag v1 --cmd rt-probe --cmd argv --cmd layered "$T/img.tar.gz" "$L/l1.tar.gz" "$L/l2.tar.zst" >/dev/null
  "$RT" import -q "$T/lay" layered
  "$RT" import -q --squash "$T/layered.sqfs" "$T/lay" 2>/dev/null
  "$RT" import -q --squash "$T/layered2.sqfs" "$T/lay" 2>/dev/null
  cmp -s "$T/layered.sqfs" "$T/layered2.sqfs" && pass "--squash output is reproducible" || fail "--squash outputs differ"
  tree='cd / && { find a x usr lib f2d d2f s2f ro pipe bin ! -type d -exec stat -c "%n %F %a %s %h %N" {} +; find a x usr f2d ro bin -type d -exec stat -c "%n %F %a" {} +; } | sort; find a x usr f2d d2f s2f ro bin -type f -exec md5sum {} + | sort'
  dir=$(cd / && "$RT" exec layered sh -c "$tree" 2>&1)
  sq=$(cd / && "$RT" exec "$T/layered.sqfs" sh -c "$tree" 2>&1)
  expect_eq "$sq" "$dir" "--squash gives the tree that unpacking gives (whiteouts, opaque dirs, replacements, links through symlinks)"
  expect_eq "$("$RT" run "$T/layered.sqfs")" "[layered]" "the config travels in the --squash output"
  expect_eq "$("$RT" exec layered stat -c %a /suid) $("$RT" exec "$T/layered.sqfs" stat -c %a /suid)" "755 4755" \
    "the set-id bit a directory image keeps beside its tree is in the --squash file (mounted nosuid)"
  "$RT" import -q --squash "$T/layered-gz.sqfs" --compression gzip --level 9 "$T/lay" 2>/dev/null
  expect_eq "$(cd / && "$RT" exec "$T/layered-gz.sqfs" sh -c "$tree" 2>&1)" "$dir" "--squash with --compression gzip"
  expect_status 125 "an unknown compression is refused" -- "$RT" import --squash "$T/x.sqfs" --compression bogus "$T/lay"
  $OCI tar "$L/dotdot.tar" file:ok file:../../outside/pwned
  $OCI layout "$T/evil" --tag v1 "$L/dotdot.tar" >/dev/null
  expect_status 125 "--squash refuses a hostile layer" -- "$RT" import --squash "$T/evil.sqfs" "$T/evil"
  expect_match "$ERR" "\\.\\." "says why"
  [ ! -e "$T/evil.sqfs" ] && [ ! -e "$T/evil.sqfs.rt-tmp" ] && pass "and writes nothing" || fail "an output was left"
  $OCI tar "$L/dangling.tar" "symlink:esc:$T/outside" file:esc/pwned
  $OCI layout "$T/dangling" --tag v1 "$L/dangling.tar" >/dev/null
  expect_status 125 "--squash refuses a write through a symlink to a missing directory, as unpacking does" -- \
    "$RT" import --squash "$T/dangling.sqfs" "$T/dangling"
  expect_match "$ERR" "not a directory" "says why"
  python3 - "$L/names.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape") as t:
    for name in ["n/sp ace", "n/new\nline", "n/bad\udcffbyte"]:
        ti = tarfile.TarInfo(name)
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"x"))
PY
  "$RT" import -q --squash "$T/names.sqfs" "$L/names.tar" 2>/dev/null
  n=$(unsquashfs -l "$T/names.sqfs" | LC_ALL=C grep -c '^squashfs-root/n/\(sp ace\|new\|bad.byte\)')
  expect_eq "$n" 3 "names with spaces, newlines and invalid UTF-8 survive --squash"

  # --- rt convert between the forms ------------------------------------------
  # OCI layout -> SquashFS (through import, straight from the layers).
  "$RT" convert -q "$T/lay" "$T/conv-lay.sqfs" 2>/dev/null
  expect_eq "$(cd / && "$RT" exec "$T/conv-lay.sqfs" sh -c "$tree" 2>&1)" "$dir" "convert OCI layout -> SquashFS"
  # SquashFS -> bundle directory, and -> store name: the same tree, config kept.
  "$RT" convert -q "$T/layered.sqfs" "$T/conv-dir" 2>/dev/null
  [ -d "$T/conv-dir/rootfs" ] && [ -f "$T/conv-dir/image-config.json" ] && pass "SquashFS -> a bundle directory" ||
    fail "convert SquashFS -> directory wrote no bundle"
  [ ! -e "$T/conv-dir/rootfs/.rt" ] || fail "the configuration file of the SquashFS image was left in the tree"
  expect_eq "$(cd / && "$RT" exec "$T/conv-dir" sh -c "$tree" 2>&1)" "$dir" "convert SquashFS -> directory gives the same tree"
  expect_eq "$("$RT" run "$T/conv-dir")" "[layered]" "and keeps the config"
  "$RT" convert -q "$T/layered.sqfs" fromsqfs 2>/dev/null
  expect_eq "$("$RT" run fromsqfs)" "[layered]" "convert SquashFS -> store name"
  # A directory into the store, kept as one SquashFS file.
  "$RT" convert -q --format sqfs "$T/conv-dir" intosq
  [ -f "$RT_STORAGE/images/intosq/image.sqfs" ] && [ ! -e "$RT_STORAGE/images/intosq/rootfs" ] &&
    pass "convert --format sqfs keeps a store image as one SquashFS file" || fail "no image.sqfs for convert --format sqfs"
  expect_eq "$(cd / && "$RT" exec intosq sh -c "$tree" 2>&1)" "$dir" "and it shows the same tree"
  expect_eq "$("$RT" run intosq)" "[layered]" "and keeps the config"
  # docker-archive -> directory, store image -> directory, directory -> SquashFS -> directory.
  "$RT" convert -q "$T/img.tar.gz" "$T/conv-tar" 2>/dev/null
  expect_eq "$("$RT" exec "$T/conv-tar" rt-probe ids)" "uid=$(id -u) gid=$(id -g) euid=$(id -u) egid=$(id -g)" \
    "convert rootfs tar -> directory runs"
  "$RT" convert -q layered "$T/conv-store-dir" 2>/dev/null
  expect_eq "$(cd / && "$RT" exec "$T/conv-store-dir" sh -c "$tree" 2>&1)" "$dir" "convert store image -> directory"
  # Refusals leave nothing: a SquashFS file with corrupt data, an existing destination.
  cp "$T/layered.sqfs" "$T/corrupt.sqfs"
  size=$(stat -c %s "$T/corrupt.sqfs")
  dd if=/dev/zero of="$T/corrupt.sqfs" bs=1 seek=$((size / 3)) count=$((size / 3)) conv=notrunc status=none
  expect_status 125 "a corrupt SquashFS file is refused by convert" -- "$RT" convert "$T/corrupt.sqfs" "$T/conv-bad"
  [ ! -e "$T/conv-bad" ] && [ ! -e "$T/conv-bad.rt-tmp" ] && pass "and nothing is left" || fail "convert left output"
  expect_status 125 "convert keeps an existing directory" -- "$RT" convert "$T/layered.sqfs" "$T/conv-dir"
  expect_status 125 "SquashFS -> SquashFS is refused" -- "$RT" convert "$T/layered.sqfs" "$T/again.sqfs"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "tar2sqfs missing (Debian package squashfs-tools-ng)"
fi
