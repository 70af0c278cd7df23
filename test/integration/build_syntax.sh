#!/bin/bash
# rt build on the syntax of newer Dockerfiles, as an unprivileged user, on
# the Debian test image (no mirror needed): heredocs in RUN and COPY,
# RUN --mount=type=cache|tmpfs|bind|secret|ssh (a cache seeded from a stage,
# a rw bind, a real ssh-agent) and --network=none, COPY
# --parents, ADD of .tar.xz and .tar.bz2, ADD --checksum, ENV HOME in RUN,
# # syntax= lines. podman 4.3 (Debian 12) reads neither heredocs nor
# --parents, so what each does is checked here, not against it.
. "$(dirname "$0")/lib.sh"
export RT_STORAGE="$T/store"
[ -n "${RT_DEBIAN_ROOTFS:-}" ] && [ -r "$RT_DEBIAN_ROOTFS" ] ||
  skip "RT_DEBIAN_ROOTFS is not set (test/run-all.sh builds a Debian root filesystem)"
cd "$T"
"$RT" import -q "$RT_DEBIAN_ROOTFS" debian
rootfs() { echo "$RT_STORAGE/images/$1/rootfs"; }
mkdir -p ctx/sub/dir x/a ctx/linked
echo nested >ctx/sub/dir/f.txt
echo same >ctx/linked/a && ln ctx/linked/a ctx/linked/b
echo from-req >ctx/req.txt
echo in-xz >x/a/xz.txt && tar -C x -cJf ctx/a.tar.xz a
echo in-bz2 >x/a/bz.txt && tar -C x -cjf ctx/b.tar.bz2 a
D=$RT_SOURCE_DIR/test/integration/build-syntax

# --- heredocs ---------------------------------------------------------------------
cp "$D/heredoc.Dockerfile" ctx/Dockerfile
expect_status 0 "heredocs in RUN and COPY" -- "$RT" build -t heredoc ctx
expect_match "$ERR" "# syntax=docker/dockerfile:1.7. read and ignored" "the syntax line is noted"
R=$(rootfs heredoc)
expect_eq "$(cat "$R/one") / $(cat "$R/two") / $(cat "$R/three")" 'one / two /root / literal $HOME' \
  "RUN <<EOF runs the body; RUN CMD <<'X' feeds it, unexpanded"
expect_eq "$(cat "$R/etc/demo/conf.txt")|$(cat "$R/etc/demo/other")|$(stat -c %a "$R/etc/demo/conf.txt")" "a=1|b=2|644" \
  "COPY <<NAME writes the files (<<- without the tabs)"
expect_eq "$(cat "$R/etc/demo/expanded")|$(cat "$R/etc/demo/kept")" 'builder at here, $PLACE|${WHO} at $PLACE' \
  "COPY <<NAME expands ARG and ENV values, <<\"NAME\" keeps the text"
expect_eq "$(cat "$R/five")" "perl /.rt-heredoc here" "RUN <<EOF of a #! script runs it with its interpreter"
[ ! -e "$R/.rt-heredoc" ] || fail "the script's mount point is left in the image"

# --- RUN --mount and --network ----------------------------------------------------------
cp "$D/mounts.Dockerfile" ctx/Dockerfile
printf s3cr3t-file >secret.txt
export MY_SECRET=s3cr3t-env
secrets=(--secret id=tok,src=secret.txt --secret id=ev,env=MY_SECRET)
expect_status 0 "RUN --mount=type=cache|tmpfs|bind|secret, --network=none" -- "$RT" build -t mounts "${secrets[@]}" ctx
R=$(rootfs mounts)
expect_eq "$(cat "$R/seen")" 1 "the cache starts empty"
expect_eq "$(cat "$R/tmpfs-saw")|$(cat "$R/from-bind")|$(cat "$R/bind-rw")|$(cat "$R/from-stage")" \
  "hi|from-req|read-only|built-in-stage" "tmpfs, bind from the context (read-only) and from a stage"
expect_eq "$(cat "$R/secret-sum")" "$(printf s3cr3t-files3cr3t-env | sha256sum)" "the secrets, from a file and a variable"
for p in var/cache/demo scratch req ctx o run/secrets ev; do
  [ ! -e "$R/$p" ] || fail "the mount target /$p is left in the image"
done
pass "no mount target is left in the image"
[ ! -e ctx/new ] || fail "a bind mount wrote into the context"
expect_eq "$(cat "$R/bind-rw-wrote")|$(cat ctx/req.txt)" "scribbled|from-req" \
  "a rw bind mount is writable in the step, its writes dropped after it"
expect_eq "$(cat "$R/seeded-saw")" "seed-content" "a new cache mount seeded from= a stage's directory"
# A base image's ONBUILD trigger gets cache mounts of its own: it cannot
# fill the cache the user's other builds read.
mkdir -p onb/base onb/child onb/other
printf 'FROM debian\nONBUILD RUN --mount=type=cache,target=/c echo planted > /c/x\n' >onb/base/Dockerfile
printf 'FROM onb-base\nRUN true\n' >onb/child/Dockerfile
printf 'FROM debian\nRUN --mount=type=cache,target=/c cat /c/x > /saw 2>&1 || echo clean > /saw\n' >onb/other/Dockerfile
"$RT" build -q -t onb-base onb/base >/dev/null && "$RT" build -q -t onb-child onb/child >/dev/null ||
  fail "building FROM an image whose ONBUILD uses a cache mount"
"$RT" build -q -t onb-other onb/other >/dev/null || fail "another project's build with the same cache target"
expect_eq "$(cat "$(rootfs onb-other)/saw")" clean "an ONBUILD trigger's cache is not the user's own"
expect_eq "$(grep -c ':' "$R/net-dev")" 1 "--network=none: loopback alone"
if grep -rlF s3cr3t "$RT_STORAGE/blobs" "$RT_STORAGE/images/mounts" "$RT_STORAGE/build-cache" 2>/dev/null; then
  fail "a secret reached the store"
fi
pass "no secret in any layer, config, history or cache entry"
# Again, the cache step made to run: it finds what the first run left.
sed -i "s|> /seen'|> /seen; true'|" ctx/Dockerfile
"$RT" build -q -t mounts "${secrets[@]}" ctx
expect_eq "$(cat "$(rootfs mounts)/seen")" 2 "a cache mount is kept across builds"
# rt prune takes the cache with the rest.
expect_match "$("$RT" prune)" "^removed [0-9]+ cached build steps, 4 RUN caches, " "rt prune removes the RUN cache"
[ -z "$(ls "$RT_STORAGE/run-cache")" ] || fail "rt prune left $(ls "$RT_STORAGE/run-cache")"
# The bound file is part of the step's key: an edit reruns it.
echo changed >ctx/req.txt
"$RT" build -q -t mounts "${secrets[@]}" ctx
expect_eq "$(cat "$(rootfs mounts)/from-bind")" changed "an edited bind source reruns the step"
printf 'FROM debian\nRUN --mount=type=secret,id=none,required=true true\n' >ctx/Dockerfile.req
expect_status 125 "a required secret not given" -- "$RT" build -t x -f ctx/Dockerfile.req ctx
expect_match "$ERR" "no secret .none. was given.*--secret id=none" "says how to give it"

# --- RUN --mount=type=ssh: a real ssh-agent holding a key ------------------------------
if command -v ssh-agent >/dev/null; then
  ssh-keygen -q -t ed25519 -N '' -C rt-test-key -f "$T/id"
  ssh-agent -D -a "$T/agent.sock" >/dev/null &
  STOP_PIDS="$STOP_PIDS $!"
  wait_until 30 test -S "$T/agent.sock" || true
  SSH_AUTH_SOCK=$T/agent.sock ssh-add -q "$T/id" 2>/dev/null || fail "ssh-add"
  # What the agent lists, asked as ssh does (SSH_AGENTC_REQUEST_IDENTITIES).
  cat >ctx/agent.py <<'PY'
import os, socket, struct, sys
path = os.environ.get("SSH_AUTH_SOCK")
if not path:
    print("no agent")
    sys.exit(0)
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.sendall(struct.pack(">IB", 1, 11))
n = struct.unpack(">I", s.recv(4))[0]
d = b""
while len(d) < n:
    d += s.recv(n - len(d))
count = struct.unpack(">I", d[1:5])[0]
blob = struct.unpack(">I", d[5:9])[0]
comment = d[13 + blob:13 + blob + struct.unpack(">I", d[9 + blob:13 + blob])[0]].decode()
print(path, d[0], count, comment)
PY
  {
    echo 'FROM debian'
    echo 'RUN --mount=type=ssh --mount=type=bind,source=agent.py,target=/a.py --network=none python3 /a.py > /ssh-seen'
    echo 'RUN --mount=type=ssh,id=work,target=/agent,required --mount=type=bind,source=agent.py,target=/a.py python3 /a.py > /ssh-work'
    echo 'RUN --mount=type=bind,source=agent.py,target=/a.py python3 /a.py > /ssh-none'
  } >ctx/Dockerfile.ssh
  expect_status 0 "RUN --mount=type=ssh with --ssh default and --ssh ID=SOCKET" -- env SSH_AUTH_SOCK="$T/agent.sock" \
    "$RT" build -t sshed --ssh default --ssh work="$T/agent.sock" -f ctx/Dockerfile.ssh ctx
  R=$(rootfs sshed)
  expect_eq "$(cat "$R/ssh-seen")" "/run/buildkit/ssh_agent.0 12 1 rt-test-key" \
    "the step reaches the agent at SSH_AUTH_SOCK (with --network=none too) and sees its key"
  expect_eq "$(cat "$R/ssh-work")|$(cat "$R/ssh-none")" "/agent 12 1 rt-test-key|no agent" \
    "an agent by id at a target; a step without the mount has none"
  [ ! -e "$R/run/buildkit" ] && [ ! -e "$R/agent" ] || fail "an agent's mount point is left in the image"
  ! grep -q SSH_AUTH_SOCK "$RT_STORAGE/images/sshed/image-config.json" || fail "SSH_AUTH_SOCK reached the config"
  pass "no mount point or SSH_AUTH_SOCK left in the image"
  expect_status 125 "a required agent not given" -- "$RT" build -t x -f ctx/Dockerfile.ssh --ssh default="$T/agent.sock" ctx
  expect_match "$ERR" "Dockerfile.ssh:3: .*no SSH agent .work. was given.*--ssh work=SOCKET" "names the line and the way"
  expect_status 125 "--ssh of a file that is no socket" -- "$RT" build -t x --ssh work="$T/id" -f ctx/Dockerfile.ssh ctx
  expect_match "$ERR" "is not a socket" "is refused"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "ssh-agent is missing (test/install-deps.sh installs openssh-client)"
fi

# --- COPY --parents, ADD of xz and bzip2 and xattrs, ADD --checksum, ENV HOME -------------
sum=$(sha256sum ctx/b.tar.bz2 | cut -d' ' -f1)
sed "s|@SUM@|$sum|" "$D/misc.Dockerfile" >ctx/Dockerfile
# An archive whose file has a capability (cap_net_raw, as setcap writes
# it) and a user xattr, ADDed below a symlink (/lib -> usr/lib).
cap='\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
python3 -c '
import sys, tarfile
cap = sys.argv[2].encode().decode("unicode_escape").encode("latin-1")
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT, errors="surrogateescape") as t:
    i = tarfile.TarInfo("tool/bin/ping")
    i.size, i.mode = 3, 0o755
    i.pax_headers = {"SCHILY.xattr.user.origin": "tarball",
                     "SCHILY.xattr.security.capability": cap.decode("utf-8", "surrogateescape")}
    import io
    t.addfile(i, io.BytesIO(b"hi\n"))' ctx/caps.tar "$cap"
expect_status 0 "COPY --parents, ADD .tar.xz, ADD --checksum of a .tar.bz2" -- "$RT" build -q -t misc ctx
R=$(rootfs misc)
expect_eq "$(cat "$R/p/sub/dir/f.txt")|$(cat "$R/xz/a/xz.txt")|$(cat "$R/bz/a/bz.txt")" "nested|in-xz|in-bz2" \
  "the source's directories kept; xz and bzip2 archives unpacked"
expect_eq "$(cat "$R/home-seen")" /custom "ENV HOME is RUN's HOME"
expect_eq "$(stat -c %i "$R/l/a")" "$(stat -c %i "$R/l/b")" "COPY keeps hard links as hard links"
links=$(python3 -c 'import json,sys; print("\n".join(l[7:] for l in json.load(open(sys.argv[1]))["layers"]))' \
  "$RT_STORAGE/images/misc/rt-image.json" | while read -r b; do tar --warning=no-unknown-keyword -tvf "$RT_STORAGE/blobs/sha256/$b"; done | grep -c 'l/b link to .*l/a')
expect_eq "$links" 1 "and its layer holds one as a tar hard link"
# The ADD layer holds the archive's extended attributes (the disk cannot:
# an unprivileged user writes no security.capability).
python3 -c '
import json, sys, tarfile
store, cap = sys.argv[1], sys.argv[2].encode().decode("unicode_escape").encode("latin-1")
found = []
for l in json.load(open(store + "/images/misc/rt-image.json"))["layers"]:
    with tarfile.open(store + "/blobs/sha256/" + l[7:], errors="surrogateescape") as t:
        for m in t:
            if m.name == "usr/lib/captest/tool/bin/ping":
                found.append({k: v.encode("utf-8", "surrogateescape") for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr.")})
assert found == [{"SCHILY.xattr.user.origin": b"tarball", "SCHILY.xattr.security.capability": cap}], found
' "$RT_STORAGE" "$cap" || fail "the ADD layer lacks the archive's xattrs"
pass "ADD of an archive keeps its capability and user xattr in the layer (below a symlinked destination)"
printf 'FROM debian\nADD --checksum=sha256:%s b.tar.bz2 /x/\n' "$(printf %064d 0)" >ctx/Dockerfile.sum
expect_status 125 "a wrong --checksum" -- "$RT" build -t x -f ctx/Dockerfile.sum ctx
expect_match "$ERR" "Dockerfile.sum:2: .b.tar.bz2. hashes to sha256:$sum, not the --checksum" "names both"
