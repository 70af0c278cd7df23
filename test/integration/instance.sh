#!/bin/bash
# Instances: rt instance start/list/stop/logs and rt exec instance://NAME;
# a crashed instance is shown dead and cleaned up; another user can neither
# list nor enter them.
. "$(dirname "$0")/lib.sh"
own_rt
export RT_STORAGE="$T/store"
stop_all() { "$RT" instance stop --all -q 2>/dev/null || true; }
trap 'stop_all; cleanup' EXIT
mkdir -p "$T/data"
echo "from the host" >"$T/data/file"

# ---- start, list, enter, logs ------------------------------------------------
expect_status 125 "a name that is not one" -- "$RT" instance start "$IMG" "../x" true
expect_match "$ERR" "is not an instance name" "the name is checked"
expect_status 0 "start with a command" -- "$RT" instance start --bind "$T/data:/data" "$IMG" svc \
  sh -c 'echo out-line; echo err-line >&2; exec sleep 300'
expect_match "$ERR" "started instance \`svc\` \(pid [0-9]+\)" "start says which process"
pid=$(echo "$ERR" | sed -n 's/.*(pid \([0-9]*\)).*/\1/p')
expect_status 125 "a second instance of that name" -- "$RT" instance start "$IMG" svc true
expect_match "$ERR" "instance \`svc\` is already running" "is refused"
expect_status 0 "list" -- "$RT" instance list
expect_match "$OUT" "svc +$pid +running .* $IMG: sh -c" "list shows name, pid, state, image and command"
expect_status 0 "list --json" -- "$RT" instance list --json
python3 - "$OUT" "$pid" "$IMG" <<'PY' || fail "list --json: $OUT"
import json, sys
[i] = json.loads(sys.argv[1])
assert i["name"] == "svc" and i["pid"] == int(sys.argv[2]) and i["state"] == "running", i
assert i["image"] == sys.argv[3] and i["command"][:2] == ["sh", "-c"] and i["started"].endswith("Z"), i
PY
pass "list --json has the same"
# The same container: its mount namespace, its binds, its processes.
expect_status 0 "rt exec instance://svc" -- "$RT" exec instance://svc sh -c 'readlink /proc/self/ns/mnt; cat /data/file'
# The recorded process keeps the instance's PID namespace; its child is
# that namespace's init, whose child is the program.
init=$(pgrep -P "$pid" | head -1)
prog=$(pgrep -P "$init" | head -1)
[ -n "$prog" ] || fail "no program process below the instance's process $pid"
expect_eq "$OUT" "$(readlink /proc/"$prog"/ns/mnt)
from the host" "the program runs in the instance's mount namespace, with its binds"
expect_eq "$(readlink /proc/"$prog"/ns/pid)" "$(readlink /proc/"$init"/ns/pid 2>/dev/null || readlink /proc/"$prog"/ns/pid)" \
  "the program shares its PID namespace with the init"
[ "$(readlink /proc/"$prog"/ns/pid)" != "$(readlink /proc/self/ns/pid)" ] &&
  pass "a PID namespace of the instance's own" || fail "the instance runs in the caller's PID namespace"
expect_status 0 "rt run instance://svc" -- "$RT" run instance://svc cat /data/file
expect_status 0 "rt shell instance://svc" -- sh -c "echo 'cat /data/file' | '$RT' shell instance://svc"
expect_eq "$OUT" "from the host" "rt shell enters it too"
expect_status 125 "a mount option with instance://" -- "$RT" exec --bind /tmp:/x instance://svc true
expect_match "$ERR" "--bind cannot change the container of running instance \`svc\`" "is refused"
expect_status 125 "an instance that does not exist" -- "$RT" exec instance://nosuch true
expect_match "$ERR" "no instance \`nosuch\`" "is named"
expect_status 0 "logs" -- "$RT" instance logs svc
expect_eq "$OUT" "out-line" "logs: the program's output"
expect_eq "$ERR" "err-line" "logs: its errors"
# Detached: no terminal, a session of its own.
expect_eq "$(ps -o sid= -p "$pid" | tr -d ' ')" "$pid" "the instance leads a session of its own"
expect_eq "$(ps -o tty= -p "$pid" | tr -d ' ')" "?" "with no terminal"

# An image named in the store (a name with '/' is a name, not a path).
tar -C "$IMG" -cf "$T/img.tar" .
"$RT" import -q "$T/img.tar" lab/app:1
expect_status 0 "start from a store name" -- "$RT" instance start lab/app:1 named sleep 300
expect_status 0 "enter it" -- "$RT" exec instance://named true
expect_match "$("$RT" instance list)" "named .* lab/app:1: sleep 300" "the image is listed by its name"
expect_status 0 "stop it" -- "$RT" instance stop named

# ---- root inside; stop with a signal and a timeout ---------------------------
expect_status 0 "start --root" -- "$RT" instance start --root "$IMG" rooted sh -c 'trap "" TERM; while :; do sleep 1; done'
expect_status 0 "enter it" -- "$RT" exec instance://rooted rt-probe ids
expect_match "$OUT" "^uid=0 " "rt exec instance:// takes the instance's ids"
expect_status 0 "stop a program that ignores TERM" -- "$RT" instance stop --timeout 1 rooted
expect_match "$ERR" "stopped instance \`rooted\`" "stop says so"
expect_status 0 "list after stop" -- "$RT" instance list
[[ "$OUT" != *rooted* ]] && pass "a stopped instance is gone from the list" || fail "still listed: $OUT"
holder_gone() { ! pgrep -u "$(id -u)" -f "^rt-instance $1\$" >/dev/null; }
wait_until 20 holder_gone rooted && pass "its holder has exited" || fail "its holder is still there"

# ---- what escapes the mount namespace is stopped too --------------------------
# A program that makes its own user and mount namespace is no longer in
# the instance's mount namespace; its PID namespace still holds it.
mark=rt-esc-$$
expect_status 0 "start one whose child unshares its mount namespace" -- \
  "$RT" instance start "$IMG" esc sh -c "unshare -Urm sh -c 'sleep 300; : $mark' & exec sleep 300"
wait_until 30 pgrep -u "$(id -u)" -f "$mark" >/dev/null || true
esc=$(pgrep -u "$(id -u)" -f "sleep 300; : $mark" | head -1)
[ -n "$esc" ] || fail "the escaping process did not start"
[ "$(readlink /proc/"$esc"/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ] || fail "unshare -m did not take"
expect_status 0 "stop it" -- "$RT" instance stop --timeout 2 esc
gone() { ! kill -0 "$1" 2>/dev/null; }
wait_until 20 gone "$esc" && pass "rt instance stop ends it too" ||
  fail "a process in a mount namespace of its own survived rt instance stop"
# A command word that is not UTF-8 cannot be recorded: refused before
# anything starts.
expect_status 125 "a command word that is not UTF-8" -- "$RT" instance start "$IMG" badword sh -c "$(printf 'sleep 300 # \xff')"
expect_match "$ERR" "not UTF-8" "the reason is given"
[ -z "$(pgrep -u "$(id -u)" -f 'sleep 300 # ')" ] && pass "nothing was started" || fail "its program runs without a record"
[ ! -e "$RT_STORAGE/instances/badword" ] && pass "and nothing is left" || fail "it left a record directory"
# The instance and what it runs get stdin, stdout and stderr only.
expect_status 0 "start one that lists its descriptors" -- "$RT" instance start "$IMG" fds sh -c 'rt-probe fds; exec sleep 300' 7</dev/null
wait_until 30 test -s "$RT_STORAGE/instances/fds/out.log" || true
expect_eq "$("$RT" instance logs fds)" "0 1 2" "none of rt's descriptors nor the caller's reach it"
"$RT" instance stop fds >/dev/null 2>&1

# ---- SIF: the startscript with the arguments ---------------------------------
root="$T/sifroot"
cp -a "$IMG" "$root"
mkdir -p "$root/.singularity.d/env"
echo 'export FROM_ENV=yes' >"$root/.singularity.d/env/90-environment.sh"
printf '#!/bin/sh\necho "startscript: $* FROM_ENV=$FROM_ENV"\nexec sleep 300\n' >"$root/.singularity.d/startscript"
chmod 755 "$root/.singularity.d/startscript"
mksquashfs "$root" "$T/root.sqfs" -quiet -no-progress -all-root >/dev/null
python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make "$T/app.sif" --squashfs "$T/root.sqfs"
expect_status 0 "start a SIF image" -- "$RT" instance start "$T/app.sif" sifsvc one two
wait_until 30 test -s "$RT_STORAGE/instances/sifsvc/out.log" || true
expect_eq "$("$RT" instance logs sifsvc)" "startscript: one two FROM_ENV=yes" \
  "its startscript runs with the arguments, after the environment scripts"
expect_status 0 "enter the SIF instance" -- "$RT" exec instance://sifsvc sh -c 'echo $FROM_ENV'
expect_eq "$OUT" "yes" "a program entering it sees the image's environment"

# ---- a crashed instance --------------------------------------------------------
expect_status 0 "start one that dies" -- "$RT" instance start "$IMG" crash sh -c 'sleep 0.5; kill -9 $$'
shown_dead() { "$RT" instance list | grep -Eq "(^| )$1 +[0-9]+ +dead"; }
wait_until 30 shown_dead crash || fail "not shown dead: $("$RT" instance list)"
pass "it is shown dead"
expect_status 125 "entering it" -- "$RT" exec instance://crash true
expect_match "$ERR" "instance \`crash\` is not running" "says it is not running"
expect_status 0 "prune" -- "$RT" prune
expect_match "$OUT" "1 dead instance" "prune removes it"
[ ! -e "$RT_STORAGE/instances/crash" ] && pass "its record is gone" || fail "its record is left"
expect_status 0 "start one that dies at once, then stop it" -- "$RT" instance start "$IMG" short true
sleep 0.5
expect_status 0 "stop of a dead instance" -- "$RT" instance stop short
[ ! -e "$RT_STORAGE/instances/short" ] && pass "stop removes a dead one's record" || fail "its record is left"
expect_status 127 "a program that is not there" -- "$RT" instance start "$IMG" missing /no/such/prog
expect_match "$ERR" "cannot run \`/no/such/prog\`" "is named"
[ ! -e "$RT_STORAGE/instances/missing" ] && pass "a failed start leaves nothing" || fail "a failed start left a record"

# ---- another user ----------------------------------------------------------------
if [ -n "${RT_TEST_SECOND_USER:-}" ] && sudo -n -u "$RT_TEST_SECOND_USER" true 2>/dev/null; then
  as2() { sudo -n -u "$RT_TEST_SECOND_USER" -- "$@"; }
  chmod 755 "$T" "$T/rt"
  expect_status 0 "the other user's list" -- as2 env RT_STORAGE= "$T/rt" instance list
  [[ "$OUT" != *svc* ]] && pass "shows none of this user's instances" || fail "another user sees: $OUT"
  expect_status 125 "the other user's rt exec instance://svc" -- as2 env RT_STORAGE= "$T/rt" exec instance://svc true
  expect_match "$ERR" "no instance \`svc\`" "finds no such instance"
  expect_status 125 "the other user pointing at this user's store" -- \
    as2 env RT_STORAGE="$RT_STORAGE" "$T/rt" exec instance://svc true
  expect_match "$ERR" "owned by uid $(id -u)" "is refused: not their store"
  # The holder's socket name is in /proc/net/unix for all to see; without
  # the secret's proof it hands out nothing.
  got=$(as2 python3 -c '
import socket
names = [l.split()[-1] for l in open("/proc/net/unix") if l.split()[-1].startswith("@rt-inst-")]
out = "none"
for n in names:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect("\0" + n[1:])
        s.send(b"0" * 32)
        s.settimeout(5)
        msg, anc, flags, addr = s.recvmsg(16, socket.CMSG_SPACE(8))
        out = "namespaces" if anc else "refused"
    except OSError:
        out = "refused"
print(out)')
  expect_match "$got" "^(refused|none)$" "another user gets no namespace from an instance's holder"
else
  echo "note: RT_TEST_SECOND_USER unset: the other-user checks did not run"
fi

# ---- the example: a web service reached from the host --------------------------
if command -v curl >/dev/null; then
  expect_status 0 "examples/instance-web.sh" -- env PATH="$(dirname "$RT"):$PATH" \
    bash "$RT_SOURCE_DIR/examples/instance-web.sh" $((20000 + $$ % 20000))
  expect_match "$OUT" "hello from an rt instance" "the host reaches the instance's server"
  expect_match "$OUT" "inside, next to: +[0-9]+ httpd" "a program entering it sees the server"
fi
stop_all
