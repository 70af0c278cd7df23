#!/bin/bash
# Overlay images, as the unprivileged user: rt overlay create (and
# apptainer overlay create) makes an ext3 file as Apptainer does; rt exec
# --overlay FILE keeps writes in it across runs (through fuse2fs and
# fuse-overlayfs) over a directory, a SquashFS and a SIF image; SquashFS
# and SIF files as read-only layers (squashfuse); e2fsprogs'
# own tools read what rt wrote and rt reads what they wrote; :ro stacks it
# read-only; one writer at a time (the second refused naming the holder,
# readers refused while it writes), the file written out and the lock gone
# when the container ends, nothing left running; the refusals.
. "$(dirname "$0")/lib.sh"
for p in fuse2fs fuse-overlayfs squashfuse; do
  command -v "$p" >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v "$p" >/dev/null ||
    fail "$p is not installed (test/install-deps.sh installs it)"
done
export PATH=$PATH:/usr/sbin:/sbin  # e2fsck, debugfs
IMG=$T/img
make_image "$IMG"
mksquashfs "$IMG" "$T/img.sqfs" -quiet -no-progress -all-root >/dev/null || fail "mksquashfs"
python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make "$T/img.sif" --squashfs "$T/img.sqfs"
export RT_STORAGE="$T/store" HOME="$T/home"
mkdir -p "$HOME" "$T/bin"
ln -s "$RT" "$T/bin/apptainer"
export PATH="$T/bin:$PATH"
cd "$T"

# The keeper of an image writes it out once the container is gone, then
# removes the lock: wait for that before reading the file from outside.
settled() { wait_until 20 test ! -e "$(dirname "$1")/.$(basename "$1").rt-lock" || fail "the lock of $1 stays"; }

# --- rt overlay create ------------------------------------------------------------------
"$RT" overlay create --size 32 --create-dir /opt/env ov.img || fail "rt overlay create"
expect_eq "$(stat -c %s ov.img)" $((32 << 20)) "rt overlay create --size 32 makes a 32 MiB file"
e2fsck -fn ov.img >/dev/null 2>&1 || fail "e2fsck finds the new image damaged"
pass "... an ext file system e2fsck finds clean"
listing=$(debugfs -R "ls -l /upper" ov.img 2>/dev/null)
expect_match "$listing" " $(id -u) +$(id -g) .* opt" "... with upper/ and --create-dir's directory, the user's"
expect_match "$(debugfs -R "ls /" ov.img 2>/dev/null)" "work" "... and work/ beside upper/ (Apptainer's layout)"
expect_status 125 "an existing file is refused" -- "$RT" overlay create ov.img
expect_match "$ERR" "ov.img. exists" "... naming it"
expect_status 125 "a directory outside the overlay is refused" -- "$RT" overlay create --create-dir ../x bad.img
[ ! -e bad.img ] || fail "a refused image was left behind"
"$RT" overlay create --sparse --size 200 sparse.img || fail "rt overlay create --sparse"
[ "$(du -k sparse.img | cut -f1)" -lt 51200 ] || fail "a --sparse image has its blocks allocated"
pass "--sparse allocates blocks only as written"

# --- persistence ------------------------------------------------------------------------
expect_status 0 "a write under --overlay FILE" -- "$RT" exec --overlay ov.img "$IMG" \
  sh -c 'echo kept > /etc/kept && rm /bin/ls && ls -d /opt/env'
expect_eq "$("$RT" exec --overlay ov.img "$IMG" cat /etc/kept)" kept "... is there in the next run"
expect_status 1 "... and so is the deletion" -- "$RT" exec --overlay ov.img "$IMG" test -e /bin/ls
[ ! -e "$IMG/etc/kept" ] && [ -e "$IMG/bin/ls" ] || fail "the image itself changed"
pass "the image is untouched"
settled ov.img
expect_eq "$(debugfs -R "cat /upper/etc/kept" ov.img 2>/dev/null)" kept "debugfs reads what rt wrote"
e2fsck -fn ov.img >/dev/null 2>&1 || fail "e2fsck finds the image damaged after use"
pass "... and e2fsck finds the file system clean"
echo from-debugfs >"$T/note"
debugfs -w -R "write $T/note /upper/etc/note" ov.img >/dev/null 2>&1
expect_eq "$("$RT" exec --overlay ov.img "$IMG" cat /etc/note)" from-debugfs "rt reads what debugfs wrote"
for i in 1 2 3 4 5 6; do "$RT" exec --overlay ov.img "$IMG" sh -c "echo $i >> /count" || fail "run $i of six"; done
expect_eq "$("$RT" exec --overlay ov.img "$IMG" wc -l /count)" "6 /count" "six runs one after the other each find the last one's writes"

# --- SquashFS and SIF images ------------------------------------------------------------
for base in img.sqfs img.sif; do
  "$RT" exec --overlay ov.img "$T/$base" sh -c "echo $base > /on-$base" || fail "a write over $base"
  expect_eq "$("$RT" exec --overlay ov.img "$T/$base" cat /on-$base /etc/kept)" "$base
kept" "writes over a ${base#img.} image are kept, with the earlier ones"
done

# --- read-only --------------------------------------------------------------------------
settled ov.img
before=$(md5sum <ov.img)
expect_eq "$("$RT" exec --overlay ov.img:ro "$IMG" sh -c 'cat /etc/kept; echo x > /etc/kept; cat /etc/kept')" "kept
x" "an image given :ro is read, and written only in memory"
settled ov.img
expect_eq "$(md5sum <ov.img)" "$before" "... the file is not changed"
mkdir ovd
expect_eq "$("$RT" exec --overlay ov.img:ro --overlay ovd "$IMG" sh -c 'cat /etc/kept; echo d > /etc/kept')" kept \
  "an image :ro below a writable directory overlay"
expect_eq "$(cat ovd/upper/etc/kept)" d "... the write went to the directory"

# --- one writer ---------------------------------------------------------------------------
"$RT" exec --overlay ov.img "$IMG" sleep 30 &
holder=$!
STOP_PIDS="$STOP_PIDS $holder"
wait_until 10 test -s .ov.img.rt-lock/holder || fail "the first container does not hold the lock"
keeper=$(cut -d' ' -f2 .ov.img.rt-lock/holder)
expect_status 125 "a second writer is refused" -- "$RT" exec --overlay ov.img "$IMG" true
expect_match "$ERR" "in use by process $keeper on this host" "... naming the holder"
expect_status 125 "a reader is refused while it writes" -- "$RT" exec --overlay ov.img:ro "$IMG" true
expect_match "$ERR" "being written by process $keeper" "... saying so"
kill "$holder"
wait "$holder" 2>/dev/null || true
expect_status 0 "once the holder has exited, a writer may start" -- "$RT" exec --overlay ov.img "$IMG" true
settled ov.img
pass "the lock is removed when the image is written out"
sleep 0.5
left=$(pgrep -u "$(id -u)" -f 'fuse2fs|fuse-overlayfs|rt-overlay' || true)
expect_eq "$left" "" "no fuse2fs, fuse-overlayfs or keeper is left running"

# --- refusals ---------------------------------------------------------------------------
cp ov.img open.img
chmod 0666 open.img
expect_status 125 "an image others can write" -- "$RT" exec --overlay open.img "$IMG" true
expect_match "$ERR" "only you can write" "... is refused"
ln -s ov.img link.img
expect_status 125 "an image through a link" -- "$RT" exec --overlay link.img "$IMG" true
expect_match "$ERR" "not a file of yours" "... is refused"
expect_status 125 "an image with --uid 0" -- "$RT" exec --uid 0 --overlay ov.img "$IMG" true
expect_match "$ERR" "not supported" "... is refused"
expect_status 125 "a SquashFS file as a writable overlay" -- "$RT" exec --overlay img.sqfs "$IMG" true
expect_match "$ERR" "is read-only.*give it as .*img.sqfs:ro" "... is refused, saying how instead"
echo text >plain.txt
expect_status 125 "a plain file as an overlay" -- "$RT" exec --overlay plain.txt:ro "$IMG" true
expect_match "$ERR" "neither a directory, an ext3 overlay image nor a SquashFS or SIF file" "... is refused, saying what is taken"

# --- SquashFS and SIF files as read-only layers (squashfuse) ----------------------------------
mkdir -p layer/opt/env/bin
printf '#!/bin/sh\necho tool from the layer\n' >layer/opt/env/bin/tool && chmod 755 layer/opt/env/bin/tool
mksquashfs layer layer.sqfs -quiet -no-progress -all-root >/dev/null || fail "mksquashfs of the layer"
python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make layer.sif --squashfs layer.sqfs
for f in layer.sqfs layer.sif; do
  expect_eq "$("$RT" exec --overlay "$f:ro" "$IMG" /opt/env/bin/tool)" "tool from the layer" "--overlay ${f##*.} file:ro lays its tree on the image"
  expect_eq "$("$RT" exec --overlay "$f:ro" "$T/img.sqfs" /opt/env/bin/tool)" "tool from the layer" "... on a SquashFS image too"
done
mkdir -m 0755 above
expect_eq "$("$RT" exec --overlay layer.sif:ro --overlay above "$IMG" sh -c 'echo more >>/opt/env/bin/tool; cat /opt/env/bin/tool')" \
  $'#!/bin/sh\necho tool from the layer\nmore' "a writable overlay above it takes the writes"
expect_match "$(cat above/upper/opt/env/bin/tool)" "more" "... into its upper/"
expect_match "$("$RT" exec -v --overlay layer.sqfs:ro "$IMG" true 2>&1)" "layer.sqfs. \(SquashFS, through squashfuse" "-v says how it is served"
cp layer.sqfs open.sqfs && chmod 0666 open.sqfs
expect_status 125 "a SquashFS layer others can write" -- "$RT" exec --overlay open.sqfs:ro "$IMG" true
expect_match "$ERR" "written by others" "... is refused"
sleep 0.5
expect_eq "$(pgrep -u "$(id -u)" -f 'squashfuse|fuse-overlayfs|rt-overlay' || true)" "" "no squashfuse or keeper is left running"

# --- Apptainer's command line ---------------------------------------------------------------
apptainer overlay create --size 16 --create-dir /data a.img || fail "apptainer overlay create"
expect_eq "$(apptainer exec --overlay a.img "$T/img.sif" sh -c 'echo in > /data/x; cat /data/x')" in \
  "apptainer exec --overlay FILE.img over a SIF file"
expect_eq "$(apptainer exec --overlay a.img:ro "$T/img.sif" cat /data/x)" in "... kept for the next run"
expect_status 125 "apptainer overlay create --fakeroot" -- apptainer overlay create --fakeroot b.img
expect_match "$ERR" "not supported by rt" "... is refused"

# --- an overlay partition in a SIF file (apptainer overlay create FILE.sif) -------------------
cp "$T/img.sif" own.sif
expect_status 125 "--writable of a SIF file without an overlay" -- apptainer exec --writable own.sif true
apptainer overlay create --size 16 --create-dir /data own.sif || fail "apptainer overlay create FILE.sif"
out=$("$RT" inspect ./own.sif)
expect_match "$out" '"filesystem": "ext3",
      "partition": "overlay"' "the SIF file gains an ext3 overlay partition"
expect_status 125 "a second overlay partition" -- "$RT" overlay create ./own.sif
expect_match "$ERR" "has an overlay partition already" "... is refused"
expect_eq "$(apptainer exec --writable own.sif sh -c 'echo kept >/data/x; echo etc >/etc/new; cat /data/x')" kept \
  "apptainer exec --writable FILE.sif writes into its overlay partition"
settled own.sif
expect_eq "$("$RT" exec ./own.sif cat /data/x /etc/new)" $'kept\netc' "... kept for the next run, read without --write"
expect_eq "$("$RT" exec ./own.sif rt-probe write /etc/other)" EROFS "... which is read-only"
expect_eq "$("$RT" exec --write-tmpfs ./own.sif sh -c 'echo tmp >/data/x; cat /data/x')" tmp "--write-tmpfs stacks above it"
expect_eq "$("$RT" exec ./own.sif cat /data/x)" kept "... and its writes are discarded"
expect_match "$("$RT" exec -v ./own.sif true 2>&1)" "its overlay partition, through fuse2fs" "-v says so"
