#!/bin/bash
# rt exec --overlay DIR[:ro], as the unprivileged user: writes kept in
# DIR/upper across runs (deletions too), read-only overlays stacked below
# (one a writable use filled read through its upper/), over a directory
# and a SquashFS image; one writer at a time, through the overlay's
# holder (the lock in its name, a second writer refused naming the
# container, readers with :ro allowed, the same holder for the next
# container, an idle one asked to go by a writer over another image, gone
# after its linger, a stale lock taken over, another host's refused) and
# with each container mounting its own (RT_OVERLAY_LINGER=0: the same, and
# a taker killed half-way, an instance holding it); the refusals (two writable overlays, with
# --write-tmpfs, a directory others can write, --write on a SquashFS
# image); and Apptainer's --overlay and --writable.
. "$(dirname "$0")/lib.sh"
IMG=$T/img
make_image "$IMG"
mksquashfs "$IMG" "$T/img.sqfs" -quiet -no-progress -all-root >/dev/null || fail "mksquashfs"
export RT_STORAGE="$T/store" HOME="$T/home"
mkdir -p "$HOME" "$T/bin"
ln -s "$RT" "$T/bin/apptainer"
export PATH="$T/bin:$PATH"
cd "$T"
# Through the overlay's holder, as users have it (the tests' default is none).
export RT_OVERLAY_LINGER=2

# --- persistence -----------------------------------------------------------------
mkdir ov
expect_status 0 "a write under --overlay DIR" -- "$RT" exec --overlay ov "$IMG" sh -c 'echo kept > /etc/kept && rm /bin/ls'
expect_eq "$("$RT" exec --overlay ov "$IMG" cat /etc/kept)" kept "... is there in the next run"
expect_status 1 "... and so is the deletion" -- "$RT" exec --overlay ov "$IMG" test -e /bin/ls
[ ! -e "$IMG/etc/kept" ] && [ -e "$IMG/bin/ls" ] || fail "the image itself changed"
pass "the image is untouched"
expect_eq "$(cat ov/upper/etc/kept)" kept "the writes are in DIR/upper"
expect_status 1 "without the overlay the image is as it was" -- "$RT" exec "$IMG" test -e /etc/kept

# --- read-only layers ---------------------------------------------------------------
mkdir -p ro/etc && echo from-ro >ro/etc/ro-file
out=$("$RT" exec --overlay ro:ro --overlay ov "$IMG" sh -c 'cat /etc/ro-file /etc/kept; echo changed > /etc/ro-file')
expect_eq "$out" "from-ro
kept" "a :ro overlay below the writable one"
expect_eq "$(cat ro/etc/ro-file)" from-ro "... is never written (the write went up)"
expect_eq "$(cat ov/upper/etc/ro-file)" changed "... the change is in the writable overlay"
expect_eq "$("$RT" exec --overlay ov:ro "$IMG" cat /etc/kept)" kept "a filled overlay given :ro is read through its upper/"
expect_status 0 "... and stays read-only" -- "$RT" exec --overlay ov:ro "$IMG" rt-probe write /etc/new
expect_eq "$OUT" "ok" "... (writes go to a tmpfs, discarded)"
expect_status 1 "... discarded" -- "$RT" exec --overlay ov "$IMG" test -e /etc/new

# --- over a SquashFS image ------------------------------------------------------------
mkdir ovs
"$RT" exec --overlay ovs "$T/img.sqfs" sh -c 'echo s > /sq' || fail "a write over a SquashFS image"
expect_eq "$("$RT" exec --overlay ovs "$T/img.sqfs" cat /sq)" s "writes over a SquashFS image are kept too"
expect_status 125 "--write on a SquashFS image is refused" -- "$RT" exec --write "$T/img.sqfs" true
expect_match "$ERR" "cannot be written" "... saying why"

# --- one writer, through the overlay's holder -------------------------------------------------
# A plain container's overlay directory is mounted once by its holder
# (rt-ovl), which takes the lock, serves one container at a time and
# lingers RT_OVERLAY_LINGER seconds for the next one.
holder_pid() { cut -d' ' -f2 ov/.rt-lock/holder; }
wait_until 10 test ! -e ov/.rt-lock || fail "the holder of the runs above kept the lock"
export RT_OVERLAY_LINGER=60
"$RT" exec --overlay ov "$IMG" sleep 30 &
c=$!
wait_until 10 grep -q " held\$" ov/.rt-lock/holder || fail "the overlay's holder does not hold the lock"
h=$(holder_pid)
expect_eq "$(cat /proc/"$h"/comm)" rt-ovl "the lock names the overlay's holder"
expect_status 125 "a second writer is refused" -- "$RT" exec --overlay ov "$IMG" true
expect_match "$ERR" "in use by process $c on this host" "... naming the container's process"
expect_status 0 "a reader with :ro is not" -- "$RT" exec --overlay ov:ro "$IMG" cat /etc/kept
expect_status 125 "a writer over another image is refused while the container runs" -- \
  "$RT" exec --overlay ov "$T/img.sqfs" true
expect_match "$ERR" "in use by process $h on this host" "... naming the holder"
kill "$c"
wait "$c" 2>/dev/null || true
expect_status 0 "once the container has exited, a writer may start" -- "$RT" exec --overlay ov "$IMG" sh -c 'echo again >/etc/again'
expect_eq "$(holder_pid)" "$h" "... served by the same holder"
expect_eq "$(cat ov/upper/etc/again)" again "... its writes in DIR/upper at once"
expect_eq "$("$RT" exec --overlay ov "$T/img.sqfs" cat /etc/again)" again "a writer over another image asks the idle holder to go"
wait_until 5 sh -c "! kill -0 $h 2>/dev/null" || fail "... the idle holder is still there"
pass "... which has gone"
mkdir ov3
RT_OVERLAY_LINGER=1 "$RT" exec --overlay ov3 "$IMG" true || fail "a container with RT_OVERLAY_LINGER=1"
wait_until 10 test ! -e ov3/.rt-lock || fail "the holder kept the lock past its linger"
expect_eq "$(pgrep -u "$(id -u)" -f "^rt-ovl $T/ov3\$" || true)" "" "the holder leaves after its linger, letting the lock go"
dead=$(($(cat /proc/sys/kernel/pid_max) + 1))  # no process has it
mkdir ov3/.rt-lock && echo "$(hostname) $dead 12345" >ov3/.rt-lock/holder
expect_status 0 "a holder takes over a lock whose process is gone" -- env RT_OVERLAY_LINGER=1 "$RT" exec --overlay ov3 "$IMG" true
expect_match "$(cat ov3/.rt-lock/holder)" " held\$" "... in its own name"
echo "elsewhere.example 4242 99" >ov/.rt-lock/holder
expect_status 125 "another host's lock is refused by a holder too" -- "$RT" exec --overlay ov "$IMG" true
expect_match "$ERR" "process 4242 on host elsewhere.example" "... naming that host and process"
rm -r ov/.rt-lock

# --- one writer, each container mounting its own (RT_OVERLAY_LINGER=0) ------------------------
export RT_OVERLAY_LINGER=0
"$RT" exec --overlay ov "$IMG" sleep 30 &
holder=$!
wait_until 10 grep -q " $holder " ov/.rt-lock/holder || fail "the first container does not hold the lock"
expect_status 125 "a second writer is refused" -- "$RT" exec --overlay ov "$IMG" true
expect_match "$ERR" "in use by process $holder on this host" "... naming the holder"
expect_status 0 "a reader with :ro is not" -- "$RT" exec --overlay ov:ro "$IMG" cat /etc/kept
kill "$holder"
wait "$holder" 2>/dev/null || true
expect_status 0 "once the holder has exited, a writer may start" -- "$RT" exec --overlay ov "$IMG" true
echo "$(hostname) $dead 12345" >ov/.rt-lock/holder
expect_status 0 "a lock whose process is gone is taken over" -- "$RT" exec --overlay ov "$IMG" true
expect_eq "$(ls -A ov/.rt-lock)" holder "... in place: its holder replaced, nothing else left"
rm ov/.rt-lock/holder && echo "$(hostname) $dead 12345" >ov/.rt-lock/holder.claim.$dead
expect_status 0 "a lock left by a taker killed before it wrote its holder is taken" -- "$RT" exec --overlay ov "$IMG" true
expect_eq "$(ls -A ov/.rt-lock)" holder "... the claim it left removed"
echo "elsewhere.example 4242 99" >ov/.rt-lock/holder
expect_status 125 "another host's lock is refused" -- "$RT" exec --overlay ov "$IMG" true
expect_match "$ERR" "process 4242 on host elsewhere.example" "... naming that host and process"
expect_match "$ERR" "remove .*ov/.rt-lock" "... and how to clear it"
rm -r ov/.rt-lock
export RT_OVERLAY_LINGER=2
RT_OVERLAY_LINGER=60 "$RT" exec --overlay ov "$IMG" true || fail "a container through the holder"
"$RT" instance start -q --overlay ov "$IMG" ovsvc sleep 1000 2>/dev/null || fail "an instance with --overlay (its idle holder asked to go)"
expect_status 125 "an instance holds the overlay while it runs" -- "$RT" exec --overlay ov "$IMG" true
expect_eq "$("$RT" exec instance://ovsvc cat /etc/kept)" kept "... and sees it"
"$RT" instance stop -q ovsvc
wait_until 10 "$RT" exec --overlay ov "$IMG" true 2>/dev/null || fail "the overlay is still held after instance stop"
pass "... and lets it go when stopped"

# --- refusals ----------------------------------------------------------------------------------
mkdir ov2
expect_status 125 "two writable overlays" -- "$RT" exec --overlay ov --overlay ov2 "$IMG" true
expect_match "$ERR" "only one overlay takes the writes" "... refused"
expect_status 125 "a writable overlay with --write-tmpfs" -- "$RT" exec --overlay ov --write-tmpfs "$IMG" true
chmod 0777 ov2
expect_status 125 "an overlay directory others can write" -- "$RT" exec --overlay ov2 "$IMG" true
expect_match "$ERR" "only you can write" "... refused"
expect_status 125 "an overlay that does not exist" -- "$RT" exec --overlay nothere "$IMG" true
expect_match "$ERR" "nothere" "... named"

# --- Apptainer's command line ---------------------------------------------------------------------
expect_eq "$(apptainer exec --overlay ov "$IMG" cat /etc/kept)" kept "apptainer exec --overlay DIR"
expect_status 125 "apptainer exec --writable of a SquashFS file is refused, as Apptainer does" -- \
  apptainer exec --writable "$T/img.sqfs" true

# --- none left ---------------------------------------------------------------------------------------
holders() { pgrep -u "$(id -u)" -f "^rt-ovl $T/" || true; }
no_holder() { [ -z "$(holders)" ]; }
wait_until 10 no_holder || fail "an overlay's holder outlived its linger: $(ps -o pid,etime,args -p "$(holders | paste -sd,)")"
pass "no overlay holder is left once its linger is over"
