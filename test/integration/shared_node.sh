#!/bin/bash
# A shared node: a second unprivileged user ($RT_TEST_SECOND_USER, through
# sudo as set up by test/run-all.sh) attacks this user's runs, as any other
# user of the machine could. Every attack must be contained, and this
# user's work must still succeed or fail with a clear message.
. "$(dirname "$0")/lib.sh"

[ -n "${RT_TEST_SECOND_USER:-}" ] || skip "RT_TEST_SECOND_USER is not set (test/run-all.sh sets up rt-test2)"
as2() { sudo -n -u "$RT_TEST_SECOND_USER" -- "$@"; }
as2 true || skip "cannot run commands as $RT_TEST_SECOND_USER through sudo"
uid2=$(as2 id -u)
own_rt

# This user's default store is /var/tmp/$USER.rt: a name the attacker
# knows in advance.
export USER=rtv$$
unset RT_STORAGE
store=/var/tmp/$USER.rt
squatter=""  # the attacker's squatting process
attacker_cleanup() {
  [ -z "$squatter" ] || as2 kill "$squatter" 2>/dev/null || true
  as2 rm -rf "$store" "/var/tmp/rtv$$-attacker" 2>/dev/null || true
  rm -rf "$store"
  cleanup
}
trap attacker_cleanup EXIT

mkdir -p "$T/bundle"
cp -a "$IMG" "$T/bundle/rootfs"
echo '{"config":{"Env":["FROM_CONFIG=yes"],"Cmd":["/bin/sh"]}}' >"$T/bundle/image-config.json"
tar -C "$IMG" -cf "$T/rootfs.tar" .
mksquashfs "$IMG" "$T/img.sqfs" -quiet -no-progress -all-root >/dev/null

# ---- 1. A store the user does not own --------------------------------------
# The attacker's store holds an image that would write a marker, and forged
# SquashFS facts, ELF cache entries and a plan.
as2 mkdir -m 0777 "$store"
as2 mkdir -p "$store/images/evil/rootfs/bin" "$store/sqfs-facts" "$store/plan-cache"
as2 cp "$BUSYBOX" "$store/images/evil/rootfs/bin/sh"
as2 chmod -R a+rwX "$store"
as2 sh -c "printf 'forged' > $store/elf-cache; printf 'forged' > $store/sqfs-facts/0123456789abcdef0123456789abcdef"
as2 sh -c "printf 'forged' > $store/plan-cache/0123456789abcdef0123456789abcdef"
expect_status 125 "import into a store another user made" -- "$RT" import "$T/rootfs.tar" mine
expect_match "$ERR" "store \`$store\` is owned by uid $uid2 \(mode 0777\), not by you" "the message names the path, owner and mode"
expect_match "$ERR" "RT_STORAGE" "the message says what to do"
expect_status 125 "exec of an image in that store" -- "$RT" exec evil /bin/sh -c "touch $T/marker"
[ ! -e "$T/marker" ] || fail "the attacker's image ran"
pass "the attacker's image never runs"
expect_status 125 "a SquashFS run with that store (its facts and mount point)" -- "$RT" exec "$T/img.sqfs" true
expect_status 125 "an injection with that store (its ELF cache)" -- "$RT" exec --device /dev/null "$IMG" true
expect_status 0 "an image given by path needs no store" -- "$RT" exec "$IMG" true
as2 rm -rf "$store"

as2 mkdir -m 0700 "/var/tmp/rtv$$-attacker"
as2 ln -s "/var/tmp/rtv$$-attacker" "$store"
expect_status 125 "a store that is another user's symlink" -- "$RT" import "$T/rootfs.tar" mine
expect_match "$ERR" "store \`$store\` is a symbolic link \(owner uid $uid2\)" "the symlink is named"
as2 rm -f "$store"
as2 sh -c "echo junk > $store"
expect_status 125 "a plain file in the store's place" -- "$RT" images
expect_match "$ERR" "store \`$store\` is not a directory \(owner uid $uid2, mode 0644\)" "the file is named"
as2 rm -f "$store"

# The user's own store, made 0700, works; nobody else can write into it.
expect_status 0 "import into the user's own store" -- "$RT" import "$T/rootfs.tar" mine
expect_eq "$(stat -c %a "$store")" 700 "the store is made 0700"
expect_status 1 "the attacker cannot write into it" -- as2 touch "$store/planted"

# Prune and rm follow no symlink and remove only names of the store's form.
mkdir -p "$T/outside/sub"
echo keep >"$T/outside/sub/file"
ln -s "$T/outside" "$store/blobs/sha256/$(printf 'a%.0s' {1..64})"
echo notes >"$store/blobs/sha256/NOTES"
expect_status 0 "prune" -- "$RT" prune
expect_eq "$(cat "$T/outside/sub/file")" keep "prune empties no directory outside the store"
expect_eq "$(cat "$store/blobs/sha256/NOTES")" notes "prune leaves names not of the store's form"
ln -s "$T/outside/sub" "$store/sqfs-facts"
expect_status 125 "prune with a symlink for a store directory" -- "$RT" prune
expect_match "$ERR" "store directory \`$store/sqfs-facts\` is a symbolic link" "the link is named"
expect_eq "$(cat "$T/outside/sub/file")" keep "nothing it points to is removed"
rm -f "$store/sqfs-facts"
expect_status 0 "the image is still there" -- "$RT" exec mine true

# ---- 2. Squatting socket names ---------------------------------------------
# The attacker reads the names in use from /proc/net/unix and binds them
# once their holder is gone.
names() { awk -v p="@$1-" 'index($NF, p) == 1 {print $NF}' /proc/net/unix | sort -u; }
new_name() {  # PREFIX BEFORE-FILE: the name that appeared since
  local n
  for _ in $(seq 400); do
    n=$(names "$1" | comm -13 "$2" - | head -1)
    [ -z "$n" ] || { echo "${n#@}"; return; }
    sleep 0.05
  done
}
squat() {  # listen|bind|full NAME: the attacker holds NAME until killed (full: listening, its queue full)
  [ -z "$squatter" ] || as2 kill "$squatter" 2>/dev/null || true
  wait 2>/dev/null || true
  squatter=""
  as2 python3 -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
for _ in range(200):
    try:
        s.bind("\0" + sys.argv[2]); break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("cannot bind")
if sys.argv[1] in ("listen", "full"): s.listen(16 if sys.argv[1] == "listen" else 0)
held = []
while sys.argv[1] == "full":  # its accept queue filled, never accepted
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.setblocking(False)
    try:
        c.connect("\0" + sys.argv[2])
    except BlockingIOError:
        break
    held.append(c)
print("bound", os.getpid(), flush=True)
time.sleep(300)' "$1" "$2" >"$T/squat.out" &
  for _ in $(seq 200); do
    squatter=$(sed -n 's/^bound //p' "$T/squat.out" 2>/dev/null)
    [ -z "$squatter" ] || return 0
    sleep 0.05
  done
  fail "the attacker could not bind $2"
}

names rt-sqfs >"$T/before"
"$RT" exec "$T/img.sqfs" sleep 1 &
sq=$(new_name rt-sqfs "$T/before")
wait $!
[ -n "$sq" ] || fail "no SquashFS server socket seen"
squat listen "$sq"
expect_status 0 "a SquashFS run whose server name another user holds" -- timeout 60 "$RT" exec -v "$T/img.sqfs" true
expect_match "$ERR" "is held by uid $uid2, not by you; trying another name" "-v says the name was taken"
squat bind "$sq"
expect_status 0 "... and when they bind it without listening" -- timeout 60 "$RT" exec -v "$T/img.sqfs" true
expect_match "$ERR" "bound by somebody who does not serve it" "-v says so"
# Listening with a full queue and never accepting: a blocking connect
# would sleep until there is room, which never comes.
squat full "$sq"
expect_status 0 "... and when they listen with a full queue" -- timeout 60 "$RT" exec -v "$T/img.sqfs" true
expect_match "$ERR" "bound by somebody whose queue stays full; trying another name" "-v says so"

# Inside a server's user namespace every other uid reads as the overflow
# uid: with the container's uid 65534 the two look alike, and only the
# proof of the secret keeps the attacker from the namespaces' descriptors.
names rt-sqfs >"$T/before"
RT_SQUASHFS_LINGER=10 "$RT" exec --uid 65534 "$T/img.sqfs" true
ov=$(new_name rt-sqfs "$T/before")
[ -n "$ov" ] || fail "no server socket for --uid 65534 seen"
got=$(as2 python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect("\0" + sys.argv[1])
s.send(b"0" * 32)
s.settimeout(10)
try:
    msg, anc, flags, addr = s.recvmsg(16, socket.CMSG_SPACE(8))
except OSError:
    anc = []
print("namespaces" if anc else "refused")' "$ov")
expect_eq "$got" refused "another user who reads as the container's uid gets no namespace from its server"
expect_status 0 "and the container still runs" -- "$RT" exec --uid 65534 "$T/img.sqfs" rt-probe ids
pkill -u "$(id -u)" -f "^rt-sqfs $T/img.sqfs" || true

# The shared container of a launch (the launch is this shell: no launcher).
names rt-join >"$T/before"
"$RT" exec --join "$IMG" sleep 1 &
jn=$(new_name rt-join "$T/before")
wait $!
[ -n "$jn" ] || fail "no shared container socket seen"
squat listen "$jn"
# (Not under timeout(1): the launch is the parent process, this shell.)
expect_status 0 "a joined run whose name another user holds" -- "$RT" exec -v --join "$IMG" true
expect_match "$ERR" "is held by uid $uid2" "-v says the name was taken"
squat full "$jn"
expect_status 0 "a joined run whose name another user holds with a full queue" -- "$RT" exec -v --join "$IMG" true
expect_match "$ERR" "queue stays full" "-v says so"

# An instance's name, learned while it ran, squatted with a full queue
# across a restart: start, enter and stop still work, and never hang.
names rt-inst >"$T/before"
expect_status 0 "an instance" -- "$RT" instance start "$IMG" sq sleep 300
inst=$(new_name rt-inst "$T/before")
[ -n "$inst" ] || fail "no instance socket seen"
expect_status 0 "stopped" -- "$RT" instance stop sq
squat full "$inst"
expect_status 0 "restarted while another user squats its name" -- timeout 60 "$RT" instance start "$IMG" sq sleep 300
expect_status 0 "entered" -- timeout 60 "$RT" exec instance://sq true
expect_match "$("$RT" instance list)" "sq +[0-9]+ +running" "listed as running"
expect_status 0 "stopped again" -- timeout 60 "$RT" instance stop sq
as2 kill "$squatter"
wait 2>/dev/null || true
squatter=""

# ---- 3. Root in the container stays inside ---------------------------------
cd "$T"  # a working directory the image has a mount point for (/var)
before=$(tree_listing "$IMG")
expect_status 0 "--root: remounting the image read-write" -- \
  "$RT" exec --root "$IMG" sh -c 'mount -o remount,bind,rw / 2>/dev/null && echo remounted; rt-probe write /planted'
expect_eq "$OUT" "EROFS" "the remount fails and the image stays read-only"
expect_eq "$(tree_listing "$IMG")" "$before" "the image directory on the host is unchanged"
expect_status 0 "--root --write may write the image" -- "$RT" exec --root --write "$IMG" rt-probe write /planted
expect_eq "$OUT" ok "--write still writes"
rm -f "$IMG/planted"

for mode in "--root" ""; do
  RT_SQUASHFS_LINGER=5 "$RT" exec $mode "$T/img.sqfs" true
  server=$(pgrep -u "$(id -u)" -f "^rt-sqfs $T/img.sqfs" | head -1)
  [ -n "$server" ] || fail "no server process titled 'rt-sqfs $T/img.sqfs'"
  expect_status 0 "${mode:-plain}: tracing the image's server" -- "$RT" exec $mode "$T/img.sqfs" rt-probe ptrace "$server"
  expect_eq "$OUT" EPERM "${mode:-plain}: the server cannot be traced"
  expect_status 0 "${mode:-plain}: the server's root" -- "$RT" exec $mode "$T/img.sqfs" sh -c "ls /proc/$server/root/ 2>&1; true"
  expect_match "$OUT" "Permission denied" "${mode:-plain}: the host's / is not reachable through the server"
  pkill -u "$(id -u)" -f "^rt-sqfs $T/img.sqfs" || true
done

# ---- 4. No shell in convert; private temporaries ---------------------------
expect_status 0 "convert to a name with ';'" -- "$RT" convert ./bundle 'out;touch PWN;.sqfs'
[ ! -e PWN ] && [ ! -e "$T/PWN" ] || fail "a shell ran part of the name"
pass "no shell ran part of the name"
expect_status 0 "its config is inside" -- "$RT" exec './out;touch PWN;.sqfs' sh -c 'echo $FROM_CONFIG'
expect_eq "$OUT" yes "the image config was kept"
odd="$T/a b'\"
c.sqfs"
expect_status 0 "convert to a name with spaces, quotes and a newline" -- "$RT" convert ./bundle "$odd"
expect_status 0 "its config is inside" -- "$RT" exec "$odd" sh -c 'echo $FROM_CONFIG'
expect_eq "$OUT" yes "the image config was kept"
# Into a directory both users can write: the attacker plants links where
# temporaries used to go; nothing of this user's is overwritten.
shared=$(mktemp -d /tmp/rt-shared.XXXXXX)
chmod 1777 "$shared"
echo precious >"$T/precious"
for s in .rt-tmp .rt-pseudo .rt-config; do as2 ln -s "$T/precious" "$shared/out.sqfs$s"; done
expect_status 0 "convert into a shared directory" -- "$RT" convert ./bundle "$shared/out.sqfs"
expect_eq "$(cat "$T/precious")" precious "no file of this user's was overwritten"
as2 ln -s "$T/precious" "$shared/direct.sqfs.rt-tmp"
expect_status 0 "import --squash into a shared directory" -- "$RT" import -q --squash "$shared/direct.sqfs" "$T/rootfs.tar"
expect_eq "$(cat "$T/precious")" precious "no file of this user's was overwritten"
expect_eq "$(find "$shared" -name '.rt-tmp.*' | wc -l)" 0 "no temporary is left"
as2 rm -f "$shared"/out.sqfs.rt-*
rm -rf "$shared"

# ---- 5. Secrets on display -------------------------------------------------
secret=tok-$$-$RANDOM
RT_SQUASHFS_LINGER=5 "$RT" exec -e "TOKEN=$secret" "$T/img.sqfs" true
"$RT" exec --join -e "TOKEN=$secret" "$IMG" sleep 2 &
holding() { pgrep -u "$(id -u)" -f "^rt-join $IMG" >/dev/null; }
wait_until 30 holding || true
titles=$(as2 sh -c 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " <"$f" 2>/dev/null; echo; done')
wait $!
[[ "$titles" != *"$secret"* ]] || fail "another user can read the token from a command line"
pass "no command line shows the rank's arguments"
expect_match "$titles" "rt-sqfs $T/img.sqfs" "the server shows what it is and which image"
expect_match "$titles" "rt-join $IMG" "the holder too"
pkill -u "$(id -u)" -f "^rt-sqfs $T/img.sqfs" || true

# ---- 6. Image names: never another user's file -------------------------------
# The victim works in a directory both can write; the attacker plants
# trees and files named as the images the victim runs. A bare name, a
# docker:// reference and a registry reference are never paths.
shared=$(mktemp -d /tmp/rt-shared.XXXXXX)
chmod 1777 "$shared"
plant() {  # PATH: a tree whose sh leaves a marker
  as2 mkdir -p "$1/bin"
  as2 cp "$BUSYBOX" "$1/bin/busybox"
  as2 sh -c "printf '#!/bin/busybox sh\n/bin/busybox touch $T/pwned\n' > '$1/bin/sh'; chmod 755 '$1/bin/sh'"
}
chmod 777 "$T"
for name in ubuntu:24.04 "docker:/busybox" "127.0.0.1:5443/busybox:latest" lab/app; do plant "$shared/$name"; done
as2 cp "$T/img.sqfs" "$shared/app.sqfs"
cd "$shared"
for name in ubuntu:24.04 docker://busybox 127.0.0.1:5443/busybox:latest app.sqfs; do
  expect_status 125 "rt exec --no-pull $name, planted in the working directory" -- "$RT" exec --no-pull "$name" sh
  expect_match "$ERR" "not found: no image of that name in store" "$name is looked up in the store only"
done
expect_match "$ERR" "\`$shared/app.sqfs\` \(owner uid $uid2\) is not used: a bare name names an image, never a path" \
  "the planted file is named, and not used"
expect_status 125 "rt instance start of a planted name" -- "$RT" instance start --no-pull ubuntu:24.04 x sh
expect_status 125 "rt inspect of a planted name" -- "$RT" inspect ubuntu:24.04
expect_status 125 "rt convert of a planted name" -- "$RT" convert ubuntu:24.04 "$T/conv.sqfs"
[ ! -e "$T/conv.sqfs" ] || fail "rt convert took the planted tree"
mkdir -p "$T/ctx" && printf 'FROM lab/app\nRUN true\n' >"$T/ctx/Dockerfile"
expect_status 125 "rt build FROM a name planted as a path" -- "$RT" build -t fromplant "$T/ctx"
expect_match "$ERR" "\`lab/app\` is a path on the host" "rt build takes no path without --from-host"
# A name with a '/' that the store has: the stored image, said.
"$RT" import -q "$T/rootfs.tar" lab/app
expect_status 0 "rt exec lab/app, stored and planted" -- "$RT" exec lab/app true
expect_match "$ERR" "using the stored image of that name, not the path \`$shared/lab/app\`" "says which it used"
[ ! -e "$T/pwned" ] || fail "a planted image ran"
pass "no planted image ran"
# A path the user names, in a directory others can write: run, but said.
as2 cp -a "$IMG" "$shared/theirs"
expect_status 0 "rt exec ./theirs (another user's tree)" -- "$RT" exec ./theirs true
expect_match "$ERR" "\`$shared/theirs\` belongs to uid $uid2; another user may have placed or changed it" \
  "the warning names the path and its owner"
cp -a "$IMG" "$shared/mine"
expect_status 0 "rt exec ./mine (the user's own, in a sticky shared directory)" -- "$RT" exec ./mine true
[[ "$ERR" != *"another user"* ]] && pass "no warning for the user's own tree there" || fail "warned: $ERR"
# The user's own file under a bare name: refused with the way to name it.
cp "$T/img.sqfs" "$shared/own.sqfs"
expect_status 125 "rt exec own.sqfs (the user's own file, a bare name)" -- "$RT" exec own.sqfs true
expect_match "$ERR" "a bare name is never a path" "says why"
expect_match "$ERR" "write ./own.sqfs to run the file here" "and how to name the file"
cd "$T"
as2 rm -rf "$shared"/ubuntu:24.04 "$shared"/docker: "$shared"/127.0.0.1:5443 "$shared"/lab "$shared"/app.sqfs "$shared"/theirs
rm -rf "$shared"
chmod 700 "$T"
