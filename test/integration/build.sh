#!/bin/bash
# rt build, as an unprivileged user, on the Dockerfiles of test/build in a
# Debian bookworm image with packages from the Debian mirror: apt-get
# installing python3-numpy, useradd + USER, a multi-stage gcc build into
# a scratch stage, ARG/ENV expansion with .dockerignore and ADD of a tar.
# Each image is compared with podman build's of the same Dockerfile
# (test/build/podman-reference.sh; RT_PODMAN_REFERENCE): the same tree
# (owners, times and build-time logs aside) and the same Env, Cmd,
# Entrypoint, WorkingDir, Labels, User, ports, volumes, stop signal and
# health check. Then the cache (a rebuild changes nothing; an edit reruns
# from there on), errors naming FILE:LINE, a failing step, kill -9 in the
# middle of a step, a hostile context, --target, -o, --format sqfs, prune.
. "$(dirname "$0")/lib.sh"
export RT_STORAGE="$T/store"
[ -n "${RT_DEBIAN_ROOTFS:-}" ] && [ -r "$RT_DEBIAN_ROOTFS" ] ||
  skip "RT_DEBIAN_ROOTFS is not set (test/run-all.sh builds a Debian root filesystem)"
getent hosts deb.debian.org >/dev/null || skip "deb.debian.org does not resolve: no Debian mirror to install from"
LISTING="$RT_SOURCE_DIR/test/integration/tree_listing.py"
cp -r "$RT_SOURCE_DIR/test/build" "$T/ctx"
cd "$T"
"$RT" import -q "$RT_DEBIAN_ROOTFS" debian

# Build-time noise: logs, caches of inode numbers, podman's own /etc/hosts,
# the build's date in /etc/shadow (--shadow-days).
# The store's tree holds no set-id bit (kept beside it, image/file_attrs):
# it is compared without them, its export with them.
noise=(--exclude '^var/log/' --exclude '^var/cache/ldconfig/aux-cache$' --exclude '^etc/hosts$'
  --exclude '^var/cache/debconf/.*-old$' --exclude '^var/lib/dpkg/.*-old$')
compare_with_podman() { # NAME
  local name=$1 ref=${RT_PODMAN_REFERENCE:-}
  if [ -z "$ref" ] || [ ! -s "$ref/$name.tar" ]; then
    [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ] && fail "no podman reference for $name (RT_PODMAN_REFERENCE)"
    echo "SKIP: no podman reference for $name (test/run-all.sh makes them)"
    return
  fi
  python3 "$LISTING" tar "$ref/$name.tar" --no-setid --no-xattrs --shadow-days "${noise[@]}" >"$T/podman.list"
  python3 "$LISTING" dir "$RT_STORAGE/images/$name/rootfs" --no-setid --shadow-days "${noise[@]}" >"$T/rt.list"
  if ! diff -u "$T/podman.list" "$T/rt.list" >"$T/tree.diff"; then
    head -40 "$T/tree.diff" >&2
    fail "$name: the tree differs from podman build's"
  fi
  pass "$name: the same tree as podman build's ($(wc -l <"$T/rt.list") entries)"
  # What leaves rt (its layers, as a Docker archive) has the set-id bits and
  # extended attributes the store's tree cannot hold.
  "$RT" convert -q "$name" "$T/$name.docker.tar" || fail "$name: rt convert to a Docker archive"
  python3 "$LISTING" tar "$ref/$name.tar" --shadow-days "${noise[@]}" >"$T/podman.list"
  python3 "$LISTING" docker "$T/$name.docker.tar" --shadow-days "${noise[@]}" >"$T/rt.list"
  rm -f "$T/$name.docker.tar"
  if ! diff -u "$T/podman.list" "$T/rt.list" >"$T/tree.diff"; then
    head -40 "$T/tree.diff" >&2
    fail "$name: the exported layers differ from podman build's tree"
  fi
  pass "$name: its layers make podman's tree, set-id bits and extended attributes included"
  python3 - "$ref/$name.json" "$RT_STORAGE/images/$name/image-config.json" <<'PY' || fail "$name: the config differs from podman build's"
import json, sys
p = json.load(open(sys.argv[1]))[0]
r = json.load(open(sys.argv[2]))
pc, rc = p.get("Config") or {}, r.get("config") or {}
pc.get("Labels", {}).pop("io.buildah.version", None)
bad = []
for k in ("Env", "Cmd", "Entrypoint", "WorkingDir", "Labels", "User", "ExposedPorts", "Volumes", "StopSignal"):
    if (pc.get(k) or None) != (rc.get(k) or None):
        bad.append(f"{k}: podman {pc.get(k)!r}, rt {rc.get(k)!r}")
if (p.get("Healthcheck") or None) != (rc.get("Healthcheck") or None):
    bad.append(f"Healthcheck: podman {p.get('Healthcheck')!r}, rt {rc.get('Healthcheck')!r}")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  pass "$name: the same Env, Cmd, Entrypoint, WorkingDir, Labels, User, ports, volumes, stop signal, health check"
}

# ---- the Dockerfiles of test/build ---------------------------------------------
expect_status 0 "build numpy (apt-get install python3-numpy from the mirror)" -- "$RT" build -t numpy ctx/numpy
expect_match "$ERR" "STEP 2/6: RUN apt-get update" "each step prints a line"
expect_match "$OUT$ERR" "Setting up python3-numpy" "RUN output streams through"
expect_match "$ERR" "--> [0-9]+\.[0-9] s" "each step is timed"
expect_status 0 "run it" -- "$RT" run numpy
expect_match "$OUT" "^numpy [0-9.]+ sum 66.0 det 8.0$" "numpy imports and computes in the built image"
expect_eq "$("$RT" exec numpy cat /opt/app/result.txt)" "$OUT" "the RUN after COPY ran the copied file"
python3 - "$RT_STORAGE/images/numpy/image-config.json" <<'PY' || fail "the config's layers and history"
import json, sys
c = json.load(open(sys.argv[1]))
d = c["rootfs"]["diff_ids"]
h = [x for x in c["history"] if x.get("comment") == "rt build"]
assert len(d) == 4, d                      # the base, RUN, COPY, RUN
assert all(x.startswith("sha256:") for x in d)
steps = [x["created_by"].split()[0] for x in h]
assert steps == ["RUN", "COPY", "RUN", "ENV", "CMD"], steps
assert [bool(x.get("empty_layer")) for x in h] == [False, False, False, True, True]
assert len([x for x in c["history"] if not x.get("empty_layer")]) == len(d)  # one entry per layer, the base's too
PY
pass "one layer per step that changes files (diff_ids), the instructions in the history"
base_digest=$("$RT" inspect debian | python3 -c 'import json,sys; print(json.load(sys.stdin)["config_digest"])')
expect_eq "$("$RT" inspect numpy | python3 -c 'import json,sys; b=json.load(sys.stdin)["base"]; print(b["name"], b["config_digest"])')" \
  "debian $base_digest" "rt inspect names the base image and its digest"
for d in $(python3 -c "import json,sys; print(' '.join(x[7:] for x in json.load(open(sys.argv[1]))['rootfs']['diff_ids'][2:]))" \
  "$RT_STORAGE/images/numpy/image-config.json"); do
  expect_eq "$(sha256sum <"$RT_STORAGE/blobs/sha256/$d" | cut -c1-64)" "$d" "a layer blob hashes to its diff_id"
done
layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['rootfs']['diff_ids'][2][7:])" \
  "$RT_STORAGE/images/numpy/image-config.json")
expect_eq "$(tar -tf "$RT_STORAGE/blobs/sha256/$layer" | tr '\n' ' ')" "opt/ opt/app/ opt/app/app.py " \
  "COPY's layer holds the copied file and the directories above it, nothing else"
compare_with_podman numpy

expect_status 0 "build user (useradd, USER, WORKDIR)" -- "$RT" build -t user ctx/user
expect_eq "$("$RT" exec user cat /home/alice/whoami | tr '\n' ' ')" "alice 1234 /home/alice " \
  "RUN after USER runs as that user, with its home"
expect_match "$("$RT" inspect user)" '"User": "alice"' "USER is in the config"
compare_with_podman user

expect_status 0 "build multistage (gcc in one stage, COPY --from into scratch)" -- "$RT" build -t multistage ctx/multistage
expect_match "$ERR" "\[build\] STEP 2/10: RUN apt-get" "steps name their stage"
expect_eq "$("$RT" run multistage)" "hello from scratch" "the program compiled in the first stage runs in the scratch stage"
expect_eq "$("$RT" run multistage a b)" "hello a b" "ENTRYPOINT with arguments for CMD"
[ ! -e "$RT_STORAGE/images/multistage/rootfs/usr/bin/gcc" ] && [ ! -e "$RT_STORAGE/images/multistage/rootfs/bin" ] &&
  pass "nothing of the build stage is in the final image" || fail "the build stage leaked into the final image"
compare_with_podman multistage
# Rebuilt with nothing changed, COPY --from is cached by the stage's key:
# no stage is unpacked.
expect_status 0 "multistage again" -- "$RT" build -v -t multistage ctx/multistage
if echo "$ERR" | grep -q "unpacked"; then fail "a cached COPY --from unpacked its stage: $(echo "$ERR" | grep unpacked)"; fi
pass "a cached COPY --from unpacks nothing"

expect_status 0 "build args (ARG/ENV expansion, .dockerignore, ADD of a tar)" -- \
  "$RT" build -t args ctx/args
expect_eq "$("$RT" run args)" "1.0 plain 1.0 plain" "ARG before FROM, ARG in the stage, ENV from ARG, RUN sees both"
expect_eq "$("$RT" exec args cat /srv/app/listing.txt | tr '\n' ' ')" \
  ".dockerignore Dockerfile args.txt data.tar.gz docs keep.log listing.txt secret " ".dockerignore leaves out *.log (but !keep.log) and secret/ (but !secret/*.pem)"
expect_eq "$("$RT" exec args ls -A /srv/app/secret)" "public.pem" "... from an excluded directory only what ! brings back"
expect_eq "$("$RT" exec args cat /srv/unpacked/d/file.txt)" "inside a tar" "ADD unpacks a local tar.gz"
expect_eq "$("$RT" exec args sh -c 'echo $APP_EXTRA $APP_ALT $APP_FLAVOUR')" "fallback set plain" \
  '${VAR:-default} and ${VAR:+alternative} as Docker expands them'
compare_with_podman args
expect_status 0 "--build-arg" -- "$RT" build -t args2 --build-arg VERSION=2.5 --build-arg FLAVOUR=fancy ctx/args
expect_eq "$("$RT" run args2)" "2.5 fancy 2.5 fancy" "--build-arg overrides ARG defaults, before FROM and after"
expect_match "$("$RT" inspect args2)" '"flavour": "fancy"' "... and LABEL expands it"

# Old forms and names that are not ASCII, built under LANG=C (layers keep
# the names' bytes whatever the locale).
expect_status 0 "build legacy (LABEL NAME VALUE, an empty line in a RUN, SHELL, café.txt)" -- \
  env LANG=C LC_ALL=C "$RT" build -t legacy ctx/legacy
expect_eq "$("$RT" run legacy)" "un café" "ENTRYPOINT keeps the CMD set before it in the same stage"
expect_eq "$("$RT" exec legacy sh -c 'cat /data/shell /opt/tool/one; readlink /data/lien /data/naïve')" \
  $'bash\none\ntwo\nFőtanúsítvány.pem\ncafé.txt' "SHELL is used by RUN; names and link targets that are not ASCII"
python3 - "$RT_STORAGE/images/legacy/image-config.json" <<'PY' || fail "legacy: the config"
import json, sys
c = json.load(open(sys.argv[1]))["config"]
assert c["Labels"]["maintainer"] == "someone@example.org", c["Labels"]
assert c["Env"][0] == "PATH=/opt/tool/bin:/usr/local/bin:/usr/bin:/bin", c["Env"]  # kept its place
assert c["Shell"] == ["/bin/bash", "-c"], c.get("Shell")
PY
pass "legacy: LABEL's old form, ENV keeps a variable's place, SHELL recorded"
compare_with_podman legacy

expect_status 0 "build attrs (setcap-style capability, user xattr, set-id bits)" -- "$RT" build -t attrs ctx/attrs
expect_eq "$("$RT" exec attrs grep -cx -e /usr/bin/passwd -e /var/mail -e /usr/local/bin/setuid-tool /srv/setid-seen.txt)" 3 \
  "RUN sees the set-id bits of the base and of earlier steps"
expect_eq "$(find "$RT_STORAGE/images/attrs/rootfs" -perm /6000 | wc -l)" 0 "the store's tree holds no set-id bit"
compare_with_podman attrs
"$RT" convert -q attrs "$T/attrs.sqfs" || fail "convert attrs to SquashFS"
expect_match "$(unsquashfs -lls "$T/attrs.sqfs" usr/local/bin/setuid-tool usr/bin/chfn usr/bin/passwd)" \
  "-rwsr-xr-x root/root .* squashfs-root/usr/bin/passwd" "a SquashFS made from the tree has the base's set-id bits"
expect_match "$(unsquashfs -lls "$T/attrs.sqfs" usr/bin/chfn)" "-rwxr-xr-x root/root .*/usr/bin/chfn" \
  "... and not one a step took away"
expect_eq "$("$RT" exec "$T/attrs.sqfs" python3 -c 'import os; print(os.getxattr("/usr/local/bin/raw-sender", "user.origin").decode())')" \
  "rt test" "... and the extended attributes it keeps beside the tree"
rm -f "$T/attrs.sqfs"
# rt's Docker archive as podman loads it: rootless podman as this user (one
# uid mapped, vfs storage, all under $T), then the tree podman makes of it
# against podman build's own.
if command -v podman >/dev/null && [ -n "${RT_PODMAN_REFERENCE:-}" ]; then
  rootless_podman
  "$RT" convert -q attrs "$T/attrs.docker.tar" || fail "convert attrs to a Docker archive"
  expect_status 0 "podman load reads rt's Docker archive" -- pod load -i "$T/attrs.docker.tar"
  c=$(pod create localhost/attrs:latest true 2>/dev/null) && pod export -o "$T/attrs.podman.tar" "$c" ||
    fail "podman create/export of the loaded image"
  python3 "$LISTING" tar "$RT_PODMAN_REFERENCE/attrs.tar" --shadow-days "${noise[@]}" >"$T/podman.list"
  python3 "$LISTING" tar "$T/attrs.podman.tar" --shadow-days "${noise[@]}" >"$T/loaded.list"
  if ! diff -u "$T/podman.list" "$T/loaded.list" >"$T/tree.diff"; then
    head -40 "$T/tree.diff" >&2
    fail "podman load of rt's archive does not give podman build's tree"
  fi
  pass "podman load of rt's archive gives podman build's tree, set-id bits and extended attributes included"
  expect_eq "$(pod image inspect --format '{{json .Config.Cmd}} {{json .Config.Entrypoint}} {{json .Config.Env}}' localhost/attrs:latest)" \
    "$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["config"]; print(*(json.dumps(c.get(k), separators=(",", ":")) for k in ("Cmd", "Entrypoint", "Env")))' "$RT_STORAGE/images/attrs/image-config.json")" \
    "... and the config's Cmd, Entrypoint and Env"
  rootless_podman_done
  rm -f "$T/attrs.docker.tar" "$T/attrs.podman.tar"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "podman or its reference is missing for the podman load round trip"
fi
# ONBUILD: recorded in the image; its triggers run when a build starts FROM it.
mkdir -p ctx/onbuild-parent ctx/onbuild-child
printf 'FROM debian\nONBUILD RUN echo "triggered in $(pwd)" > /triggered\nONBUILD WORKDIR /srv\n' >ctx/onbuild-parent/Dockerfile
printf 'FROM onbuild-parent\nRUN echo child > child\n' >ctx/onbuild-child/Dockerfile
"$RT" build -q -t onbuild-parent ctx/onbuild-parent >/dev/null || fail "build with ONBUILD"
expect_match "$(cat "$RT_STORAGE/images/onbuild-parent/image-config.json")" '"OnBuild":\["RUN echo' "ONBUILD is recorded"
[ ! -e "$RT_STORAGE/images/onbuild-parent/rootfs/triggered" ] || fail "ONBUILD ran in its own image"
"$RT" build -q -t onbuild-child ctx/onbuild-child >/dev/null || fail "build FROM an image with ONBUILD"
expect_eq "$("$RT" exec onbuild-child cat /triggered /srv/child)" $'triggered in /\nchild' \
  "the triggers run first when a build starts FROM the image (RUN, then WORKDIR)"
[[ "$(cat "$RT_STORAGE/images/onbuild-child/image-config.json")" != *OnBuild* ]] && pass "the child does not inherit them" ||
  fail "the child inherited the triggers"

# ---- the cache -------------------------------------------------------------------
expect_status 0 "rebuild with nothing changed" -- "$RT" build -t numpy ctx/numpy
expect_eq "$(grep -c -- '--> cached' <<<"$ERR")" 3 "every step that changes files comes from the cache"
expect_match "$ERR" "image \`numpy\` is unchanged" "and the image is left as it is"
[[ "$OUT$ERR" != *"Setting up"* ]] && pass "nothing ran" || fail "a step ran again"
echo 'print("edited")' >>ctx/numpy/app.py
expect_status 0 "rebuild after editing a copied file" -- "$RT" build -t numpy ctx/numpy
expect_match "$ERR" "STEP 2/6: RUN apt-get[^
]*
[^
]*--> cached" "the steps before the edit come from the cache"
expect_match "$ERR" "STEP 3/6: COPY app.py /opt/app/
[^
]*--> [0-9.]+ s" "the COPY of the edited file runs"
expect_match "$ERR" "STEP 4/6: RUN python3[^
]*
[^
]*--> [0-9.]+ s" "... and every step after it"
expect_eq "$("$RT" run numpy | tail -1)" "edited" "the image has the edit"
sed -i 's/OMP_NUM_THREADS=1/OMP_NUM_THREADS=2/' ctx/numpy/Dockerfile
expect_status 0 "rebuild after editing a config line" -- "$RT" build -t numpy ctx/numpy
expect_eq "$(grep -c -- '--> cached' <<<"$ERR")" 3 "steps before the edited line are cached"
expect_eq "$("$RT" exec numpy sh -c 'echo $OMP_NUM_THREADS')" 2 "the edit is in the image"
expect_status 0 "--no-cache" -- "$RT" build --no-cache -t user ctx/user
expect_eq "$(grep -c -- '--> cached' <<<"$ERR")" 0 "--no-cache runs every step"

# ---- errors ----------------------------------------------------------------------
mkdir -p bad
printf 'FROM debian\nRUN true\nFROBNICATE now\n' >bad/Dockerfile
expect_status 125 "a syntax error" -- "$RT" build -t bad bad
expect_match "$ERR" "bad/Dockerfile:3: unknown or unsupported instruction \`FROBNICATE\`" "names FILE:LINE and why"
printf 'FROM debian AS one\nARG SRC=one\nFROM debian\nCOPY --from=$SRC /etc/hostname /x\n' >bad/Dockerfile
expect_status 125 "COPY --from=\$VAR" -- "$RT" build -t bad bad
expect_match "$ERR" "bad/Dockerfile:4: COPY --from=\\\$SRC: variables are not expanded in --from" "says so, pulls nothing"
printf 'FROM debian:latest\nRUN true\n' >bad/Dockerfile
expect_status 0 "FROM debian:latest finds the image stored as debian (Docker's names)" -- "$RT" build -q -t normal bad
printf 'FROM debian\nRUN echo one > /one\nRUN echo two; seq 1 30 >&2; exit 3\nRUN echo never\n' >bad/Dockerfile
expect_status 1 "a failing RUN" -- "$RT" build -t bad bad
expect_match "$ERR" "bad/Dockerfile:3: \`RUN echo two; seq 1 30 >&2; exit 3\` failed with status 3" "shows the step's exit status"
expect_eq "$(echo "$ERR" | sed -n '/its last lines/,$p' | sed -n 's/^  | //p' | tr '\n' ' ')" \
  "19 20 21 22 23 24 25 26 27 28 29 30 " "and its last twelve lines"
expect_eq "$OUT" two "its stdout still goes to stdout"
[[ "$ERR" != *"STEP 4/4"* ]] && pass "and stops there" || fail "went on after a failing step"
"$RT" images | grep -q '^bad ' && fail "a failed build stored an image" || pass "nothing is stored"
expect_status 1 "again" -- "$RT" build -t bad bad
expect_match "$ERR" "STEP 2/4: RUN echo one > /one
[^
]*--> cached" "the steps before the failing one were cached"
printf 'FROM debian\nCOPY ../../etc/passwd /x\n' >bad/Dockerfile
expect_status 125 "COPY of a path above the context" -- "$RT" build -t bad bad
expect_match "$ERR" "Dockerfile:2: \`../../etc/passwd\` names nothing in" "stays inside the context"
ln -s /etc/passwd bad/link
printf 'FROM debian\nCOPY link /x\n' >bad/Dockerfile
expect_status 125 "COPY of a symlink out of the context" -- "$RT" build -t bad bad
expect_match "$ERR" "Dockerfile:2: \`link\` names nothing" "is resolved inside the context, where it leads nowhere"
printf 'FROM debian\nRUN ln -s ../../../../.. /up\nCOPY Dockerfile /up/tmp/escaped\n' >bad/Dockerfile
rm bad/link
expect_status 0 "COPY through a symlink of the image that points above its root" -- "$RT" build -t bad bad
[ ! -e /tmp/escaped ] && [ -f "$RT_STORAGE/images/bad/rootfs/tmp/escaped" ] &&
  pass "lands inside the image" || fail "COPY wrote outside the image"
# A symlink in the context read as the host would read it leads to a
# sibling directory; read inside the context it leads to a file there.
mkdir -p inner bad/inner tarsrc
echo outside >tarsrc/which && tar -C tarsrc -czf inner/a.tar.gz which
echo inside >tarsrc/which && tar -C tarsrc -czf bad/inner/a.tar.gz which
ln -s ../inner/a.tar.gz bad/link.tar.gz
printf 'FROM debian\nADD link.tar.gz /added/\n' >bad/Dockerfile
expect_status 0 "ADD of a context symlink whose host reading leaves the context" -- "$RT" build -t bad bad
expect_eq "$(cat "$RT_STORAGE/images/bad/rootfs/added/which")" "inside" "reads the archive inside the context"
rm -r bad/link.tar.gz bad/inner
printf 'FROM debian\nADD https://example.org/x /x\n' >bad/Dockerfile
expect_status 125 "ADD of a URL" -- "$RT" build -t bad2 bad
expect_match "$ERR" "Dockerfile:2: ADD of a URL .* is not supported" "is refused naming the line"

# ---- kill -9 in the middle of a step -----------------------------------------------
"$RT" images >"$T/images.before"
before=$(cat "$RT_STORAGE/images/user/image-config.json")
mkdir -p slow
printf 'FROM debian\nRUN echo started; sleep 300\n' >slow/Dockerfile
"$RT" build -t user slow >"$T/slow.out" 2>&1 &
pid=$!
wait_until 60 grep -q started "$T/slow.out" || true
grep -q started "$T/slow.out" || fail "the slow step did not start"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
none_match() { ! pgrep -u "$(id -u)" -f "$1" >/dev/null; }
wait_until 20 none_match 'sleep 300' && pass "kill -9 of rt build ends the step's program too" ||
  fail "the step's program outlived the build"
"$RT" images >"$T/images.after"
expect_eq "$(cat "$T/images.after")" "$(cat "$T/images.before")" "after kill -9 the store lists the same images"
expect_eq "$(cat "$RT_STORAGE/images/user/image-config.json")" "$before" "and the image of that name is untouched"
"$RT" prune >/dev/null
expect_eq "$(ls "$RT_STORAGE/tmp")" "" "what the killed build left is removed as debris"

# ---- export: a Docker archive, read back by skopeo and rt import -----------------------
expect_status 0 "rt convert IMAGE out.tar (a Docker archive)" -- "$RT" convert legacy "$T/legacy.tar"
expect_match "$ERR" "wrote the Docker archive .*(5 layers)" "layer by layer"
python3 - "$T/legacy.tar" <<'PY' || fail "the archive's manifest.json"
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    m = json.load(t.extractfile("manifest.json"))
    cfg = json.load(t.extractfile(m[0]["Config"]))
    assert m[0]["RepoTags"] == ["legacy:latest"], m
    assert len(m[0]["Layers"]) == len(cfg["rootfs"]["diff_ids"]) == 5, m
    assert all("created" not in h or h["created"] for h in cfg["history"]), cfg["history"]
PY
skopeo copy -q "docker-archive:$T/legacy.tar" "oci:$T/legacy-oci:legacy" 2>"$T/err" ||
  fail "skopeo cannot read the archive: $(cat "$T/err")"
pass "skopeo copies it (layer digests as the config says)"
"$RT" import -q "$T/legacy.tar" legacy-back || fail "rt import of the archive"
expect_eq "$(python3 "$LISTING" dir "$RT_STORAGE/images/legacy-back/rootfs" | sha256sum)" \
  "$(python3 "$LISTING" dir "$RT_STORAGE/images/legacy/rootfs" | sha256sum)" "imported back: the same tree"
expect_eq "$("$RT" run legacy-back)" "un café" "and the same config"
expect_status 125 "a file name rt does not write" -- "$RT" convert legacy "$T/legacy.tar.gz"
expect_match "$ERR" "does not write this form" "is refused, not stored as an image of that name"

# ---- other outputs and --target ------------------------------------------------------
expect_status 0 "--target" -- "$RT" build -t gcc-stage --target build ctx/multistage
expect_eq "$("$RT" exec gcc-stage cat /src/built.txt)" "hello" "builds the named stage"
[[ "$ERR" != *"FROM scratch"* ]] && pass "and not the stages after it" || fail "--target built the last stage"
expect_status 0 "-o FILE.sqfs and --format sqfs" -- "$RT" build -t user-sq --format sqfs -o "$T/user.sqfs" ctx/user
[ -f "$RT_STORAGE/images/user-sq/image.sqfs" ] && pass "kept as SquashFS in the store" || fail "not kept as SquashFS"
expect_eq "$("$RT" run "$T/user.sqfs" 2>/dev/null | head -1)" "alice" "the -o file runs"
expect_eq "$("$RT" run user-sq 2>/dev/null | head -1)" "alice" "the stored SquashFS image runs"
expect_status 0 "rt convert of a built image" -- "$RT" convert user "$T/user2.sqfs"
mkdir -p from-file
printf 'FROM %s\nRUN cat /home/alice/whoami > /copy\n' "$T/user2.sqfs" >from-file/Dockerfile
expect_status 125 "FROM a SquashFS file, without --from-host" -- "$RT" build -t fromfile from-file
expect_match "$ERR" "\`$T/user2.sqfs\` is a path on the host: FROM and COPY --from take stages, stored images and registry references" \
  "a Dockerfile names no file of the builder's unless the builder allows it"
expect_status 0 "FROM a SquashFS file (--from-host)" -- "$RT" build --from-host -t fromfile from-file
expect_eq "$("$RT" exec fromfile head -1 /copy)" "alice" "builds on its tree"
expect_match "$("$RT" inspect fromfile)" '"User": "alice"' "with its config (USER alice)"
expect_status 0 "again" -- "$RT" build --from-host -t fromfile from-file
expect_match "$ERR" "is unchanged" "the file's tree is taken once per version of the file"
printf 'FROM debian\nCOPY --from=user /home/alice/whoami /from-image\n' >from-file/Dockerfile
expect_status 0 "COPY --from=IMAGE" -- "$RT" build -t fromimage from-file
expect_eq "$("$RT" exec fromimage head -1 /from-image)" "alice" "copies out of a stored image"

# ---- a hostile Dockerfile or base image --------------------------------------------
# The builder's own files are no layer: FROM a directory of the host, or
# COPY --from a path above the context.
mkdir -p hostile "$T/dotssh"
echo private-key >"$T/dotssh/id_rsa"
printf 'FROM %s\n' "$T/dotssh" >hostile/Dockerfile
expect_status 125 "FROM a host directory" -- "$RT" build -t hostile hostile
expect_match "$ERR" "is a path on the host" "is refused"
printf 'FROM debian\nCOPY --from=../dotssh / /x/\n' >hostile/Dockerfile
expect_status 125 "COPY --from=../DIR" -- "$RT" build -t hostile hostile
expect_match "$ERR" "\`../dotssh\` is a path on the host" "is refused"
"$RT" images | grep -q '^hostile ' && fail "a refused build stored an image" || pass "nothing is stored"
# Build arguments reach RUN's environment, never rt's own: a PMIX_* path
# there would have rt bind it (here, a directory RUN must not see).
mkdir -p "$T/hostdir" && echo secret >"$T/hostdir/marker"
printf 'FROM debian\nARG PMIX_SERVER_TMPDIR=%s\nRUN echo "arg=$PMIX_SERVER_TMPDIR" && test ! -e %s/marker\n' \
  "$T/hostdir" "$T/hostdir" >hostile/Dockerfile
expect_status 0 "ARG PMIX_SERVER_TMPDIR=HOSTDIR" -- "$RT" build -t hostile hostile
expect_match "$OUT" "arg=$T/hostdir" "the argument is in RUN's environment"
pass "and the host directory it names is not bound into the step"
# An image whose WorkingDir is a magic link to one of rt's descriptors
# (in a build: the store, the context, the cache).
for n in 3 4 5 6 7; do
  printf 'FROM debian\nWORKDIR /proc/self/fd/%s\nRUN echo building; ls -d "$PWD"/../* | head -3\n' "$n" >hostile/Dockerfile
  expect_status 1 "WORKDIR /proc/self/fd/$n, then RUN" -- "$RT" build -t hostile-$n hostile
  # A step has 0-2 only: N is nothing there (or, were it open, a magic link).
  expect_match "$ERR" "(working directory \`/proc/self/fd/$n\` goes through a /proc magic link; refused|chdir \`/proc/self/fd/$n\`: No such file or directory)" \
    "the step is refused before it starts"
  [[ "$OUT" != *building* ]] && pass "nothing of it ran" || fail "the step ran: $OUT"
done
mkdir -p wd-bundle
cp -a "$RT_STORAGE/images/hostile/rootfs" wd-bundle/rootfs
echo '{"config":{"WorkingDir":"/proc/self/fd/3","Env":["PATH=/usr/bin:/bin"]}}' >wd-bundle/image-config.json
"$RT" convert ./wd-bundle hostile-wd >/dev/null
printf 'FROM hostile-wd\nRUN echo building\n' >hostile/Dockerfile
expect_status 1 "FROM an image whose WorkingDir is /proc/self/fd/3, then RUN" -- "$RT" build -t hostile2 hostile
expect_match "$ERR" "(goes through a /proc magic link|chdir \`/proc/self/fd/3\`: No such file or directory)" \
  "is refused for that reason"
# RUN gets stdin, stdout and stderr only: none of the build's descriptors.
printf 'FROM debian\nRUN ls /proc/self/fd > /fds\n' >hostile/Dockerfile
expect_status 0 "RUN listing its descriptors" -- "$RT" build -t hostile hostile 7</dev/null
expect_eq "$(cat "$RT_STORAGE/images/hostile/rootfs/fds" | tr '\n' ' ')" "0 1 2 3 " \
  "a step sees 0, 1, 2 (and ls its own listing), not the build's nor the caller's"
# A daemon started by RUN is killed before the layer is taken.
tag=rt-daemon-$$
printf 'setsid sh -c "while :; do date >> /daemon.log; sleep 0.1; done; : %s" &\nsleep 0.5; echo started\n' "$tag" \
  >hostile/daemon.sh
printf 'FROM debian\nCOPY daemon.sh /\nRUN sh /daemon.sh\n' >hostile/Dockerfile
expect_status 0 "RUN leaving a daemon behind" -- "$RT" build -t daemon hostile
pgrep -u "$(id -u)" -f "$tag" >/dev/null && fail "the step's daemon outlived the step" ||
  pass "nothing the step started runs on"
n1=$(wc -l <"$RT_STORAGE/images/daemon/rootfs/daemon.log")
sleep 0.5
expect_eq "$(wc -l <"$RT_STORAGE/images/daemon/rootfs/daemon.log")" "$n1" "nothing writes into the stored image afterwards"
# ... and by a build killed in the middle of the step.
printf 'setsid sh -c "sleep 300; : %s-k" &\necho started; sleep 300\n' "$tag" >hostile/daemon.sh
"$RT" build -t daemon2 hostile >"$T/daemon.out" 2>&1 &
pid=$!
wait_until 60 grep -q started "$T/daemon.out" || true
grep -q started "$T/daemon.out" || fail "the step did not start: $(cat "$T/daemon.out")"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
wait_until 20 none_match "$tag-k" && pass "kill -9 of rt build ends the step's daemons too" ||
  fail "a daemon of a killed build's step runs on"
rm hostile/daemon.sh
# A symlink in the context to what .dockerignore leaves out is left out too.
mkdir -p hostile/secret && echo key >hostile/secret/key
printf 'secret\n' >hostile/.dockerignore
ln -sf secret/key hostile/innocent
printf 'FROM debian\nCOPY innocent /innocent\n' >hostile/Dockerfile
expect_status 125 "COPY of a symlink to an excluded file" -- "$RT" build -t hostile hostile
expect_match "$ERR" "\`innocent\` names nothing in .* \(or .dockerignore leaves it out\)" "is refused as the file would be"
printf 'FROM debian\nCOPY innocen* /x/\n' >hostile/Dockerfile
expect_status 125 "... also through a glob" -- "$RT" build -t hostile hostile
rm -rf hostile/secret hostile/innocent hostile/.dockerignore
# A build argument's value never shows in the command line other users read.
printf 'FROM debian\nARG TOKEN\nRUN echo "len=${#TOKEN}"; sleep 2\n' >hostile/Dockerfile
secret=tok-$$-$RANDOM
"$RT" build --no-cache -t tok --build-arg "TOKEN=$secret" hostile >"$T/tok.out" 2>&1 &
pid=$!
wait_until 60 grep -q "len=" "$T/tok.out" || true
titles=$(for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f" 2>/dev/null; echo; done)
wait "$pid" || fail "the build with a secret argument failed: $(cat "$T/tok.out")"
[[ "$titles" != *"$secret"* ]] || fail "the build argument's value is in a command line"
pass "--build-arg K=V: the value leaves the command line"
expect_match "$titles" "rt build -t tok \(build arguments hidden\)" "the title says what runs"
TOKEN=$secret expect_status 0 "--build-arg K takes the value from the environment" -- \
  "$RT" build --no-cache -t tok --build-arg TOKEN hostile
expect_match "$OUT" "len=${#secret}" "the step sees it"

# ---- prune -----------------------------------------------------------------------
"$RT" rm numpy
expect_status 0 "rt prune" -- "$RT" prune
expect_match "$OUT" "removed [1-9][0-9]* cached build steps, 0 RUN caches, [1-9][0-9]* unused blobs" \
  "removes the build cache and the layers no image uses"
expect_eq "$(ls "$RT_STORAGE/build-cache")" "" "the cache is empty"
expect_status 0 "a rebuild after prune" -- "$RT" build -t user ctx/user
expect_eq "$(grep -c -- '--> cached' <<<"$ERR")" 0 "runs every step again"
