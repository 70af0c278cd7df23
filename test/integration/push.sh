#!/bin/bash
# rt push to a real registry (Debian's docker-registry on 127.0.0.1, TLS
# made here, basic and token auth): what is pushed reads back the same by
# skopeo and rt pull; blobs the registry has are never sent again (counted
# in its log); a killed push finished by running it again; zstd; an image
# kept as SquashFS; rt convert to oci:DIR and oci-archive:FILE.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
command -v skopeo >/dev/null || skip "skopeo missing"
OCI="python3 $RT_SOURCE_DIR/test/integration/ocitool.py"
export RT_STORAGE="$T/store"
export HOME="$T/home" && mkdir -p "$HOME"
L="$T/layers" && mkdir -p "$L"

# Built images keep their layers as plain tar blobs (rt compresses them):
# app (the base tree, an app layer) and app3 (one more layer, 20 MB of
# noise). An image pulled keeps them as the registry sent them.
mkdir -p "$T/ctx/app/data" "$T/ctx/big/data"
cp -a "$IMG" "$T/ctx/base"
printf hi >"$T/ctx/app/hello"
head -c 20000000 /dev/urandom >"$T/ctx/big/data/noise"
printf 'FROM scratch\nCOPY base/ /\nCOPY app/ /app/\nENV APP=1\nCMD ["/bin/rt-probe", "argv", "from-cmd"]\n' >"$T/ctx/Dockerfile"
"$RT" build -q -t app "$T/ctx"
printf 'FROM app\nCOPY big/ /\n' >"$T/ctx/Dockerfile3"
"$RT" build -q -t app3 -f "$T/ctx/Dockerfile3" "$T/ctx"
$OCI tar "$L/extra.tar" file:extra/x:0644:x
gzip -k "$L/extra.tar"
tar -C "$IMG" -czf "$L/base.tar.gz" .
$OCI layout "$T/lay" --tag v1 --env APP=1 "$L/base.tar.gz" "$L/extra.tar.gz" >/dev/null

REG_LOG_LEVEL=info start_registry "$T/reg" basic
creds="$REG_USER:$REG_PASS"
# Requests of a kind so far: count METHOD PATH-PATTERN.
count() { grep -c "\"$1 /v2/$2" "$T/reg/log" || true; }
rootfs_of() { echo "$("$RT" inspect "$1" | sed -n 's/.*"path": "\(.*\)".*/\1/p')/rootfs"; }

# --- refusals -----------------------------------------------------------------
expect_status 125 "no credentials" -- "$RT" push --ca-file "$REG_CA" app "$REG/test/app:v1"
expect_match "$ERR" "rt login $REG" "the hint names rt login"
[ -z "$(ls "$RT_STORAGE/compressed" 2>/dev/null)" ] && pass "nothing was compressed before access was known" ||
  fail "layers were compressed for a push the registry refuses"
expect_status 125 "an unknown image" -- "$RT" push --ca-file "$REG_CA" nosuch "$REG/test/x:v1"
expect_match "$ERR" "nosuch" "the error names it"
expect_status 125 "a compression registries do not take" -- "$RT" push --compression lz4 app "$REG/test/app:v1"
expect_match "$ERR" "gzip.*zstd" "the hint names the two"
expect_status 125 "a store name that is no registry reference" -- "$RT" push app
expect_match "$ERR" "REGISTRY/REPOSITORY:TAG" "the hint shows where to"

# --- push, read back -------------------------------------------------------------
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"
expect_status 0 "rt push" -- "$RT" push --ca-file "$REG_CA" app "$REG/test/app:v1"
expect_match "$ERR" "3 blobs sent" "two layers and the config sent"
skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/test/app:v1" >"$T/m.json" ||
  fail "skopeo cannot read the manifest"
python3 - "$T/m.json" <<'PY' || fail "the manifest: $(cat "$T/m.json")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["mediaType"] == "application/vnd.oci.image.manifest.v1+json", m
kinds = [l["mediaType"] for l in m["layers"]]
assert kinds == ["application/vnd.oci.image.layer.v1.tar+gzip"] * 2, kinds
PY
pass "an OCI manifest of two gzip layers"
# skopeo checks every digest as it copies; gunzip reads rt's gzip layer.
skopeo copy -q --src-cert-dir "$REG_CERTS" --src-creds "$creds" "docker://$REG/test/app:v1" "dir:$T/copied" 2>"$T/err" ||
  fail "skopeo cannot copy it: $(cat "$T/err")"
first=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0]["digest"][7:])' "$T/m.json")
stored=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0][7:])' "$RT_STORAGE/images/app/rt-image.json")
gzip -dc <"$T/copied/$first" | cmp - "$RT_STORAGE/blobs/sha256/$stored" &&
  pass "skopeo copies it; gunzip gives the stored layer back" || fail "the compressed layer is not the stored tar"
"$RT" pull -q --ca-file "$REG_CA" "$REG/test/app:v1" back
# podman pulls what rt pushed (rootless, TLS and basic auth) and makes the
# same tree of it.
if command -v podman >/dev/null; then
  rootless_podman
  expect_status 0 "podman pull of what rt pushed" -- pod pull -q --cert-dir "$REG_CERTS" --creds "$creds" "$REG/test/app:v1"
  c=$(pod create "$REG/test/app:v1" true 2>/dev/null) && pod export -o "$T/podman.tar" "$c" || fail "podman create/export"
  expect_eq "$(python3 "$RT_SOURCE_DIR/test/integration/tree_listing.py" tar "$T/podman.tar")" \
    "$(python3 "$RT_SOURCE_DIR/test/integration/tree_listing.py" dir "$(rootfs_of app)")" "... podman makes the image's tree of it"
  expect_eq "$(pod image inspect --format '{{json .Config.Cmd}} {{json .Config.Env}}' "$REG/test/app:v1")" \
    '["/bin/rt-probe","argv","from-cmd"] ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","APP=1"]' \
    "... and reads its Cmd and Env"
  rootless_podman_done
  rm -f "$T/podman.tar"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "podman is missing for the podman pull round trip"
fi
expect_eq "$(tree_listing "$(rootfs_of back)")" "$(tree_listing "$(rootfs_of app)")" "rt pull gives the same tree"
expect_eq "$("$RT" run back)" "[from-cmd]" "and the same CMD"

# --- nothing sent twice ------------------------------------------------------------
posts=$(count POST test/app/blobs/uploads/)
expect_status 0 "the same push again" -- "$RT" push --ca-file "$REG_CA" app "$REG/test/app:v1"
expect_match "$ERR" "0 blobs sent, 3 already there" "it says nothing was sent"
expect_eq "$(count POST test/app/blobs/uploads/)" "$posts" "no upload started (registry log)"
# The image with one more layer: only that layer goes.
expect_status 0 "an image sharing two layers" -- "$RT" push --ca-file "$REG_CA" app3 "$REG/test/app:v3"
expect_match "$ERR" "2 blobs sent, 2 already there" "only the new layer and the config sent"
# Another repository of the same registry: mounted from where it was pulled.
expect_status 0 "a pulled image to another repository" -- "$RT" push -v --ca-file "$REG_CA" back "$REG/other/app:v1"
expect_match "$ERR" "mounted from test/app" "its layers are mounted, not sent"
expect_eq "$(count PUT other/app/blobs/uploads/)" 0 "no layer data sent (registry log)"

# A pulled image's layers go as the registry sent them (skopeo's gzip).
push "$T/lay:v1" "test/lay:v1" "$creds"
"$RT" pull -q --ca-file "$REG_CA" "$REG/test/lay:v1" laid
expect_status 0 "a pulled image to a third repository" -- "$RT" push --ca-file "$REG_CA" laid "$REG/third/lay:v1"
skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/test/lay:v1" >"$T/m1.json"
skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/third/lay:v1" >"$T/m2.json"
layers() { python3 -c 'import json,sys; print([l["digest"] for l in json.load(open(sys.argv[1]))["layers"]])' "$1"; }
expect_eq "$(layers "$T/m2.json")" "$(layers "$T/m1.json")" "its layers keep their digests"
# An imported OCI layout keeps its compressed layers as a pull does: they
# go out as they came, compressed by nobody.
$OCI tar "$L/fresh.tar" file:fresh/y:0644:y && gzip -k "$L/fresh.tar"
m=$($OCI layout "$T/lay2" --tag v2 "$L/base.tar.gz" "$L/fresh.tar.gz")
"$RT" import -q "$T/lay2:v2" imported
notes=$(ls "$RT_STORAGE/compressed" | wc -l)
expect_status 0 "an imported OCI layout" -- "$RT" push --ca-file "$REG_CA" imported "$REG/fourth/lay:v2"
skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/fourth/lay:v2" >"$T/m3.json"
expect_eq "$(layers "$T/m3.json")" "$(layers "$T/lay2/blobs/sha256/${m#sha256:}")" "its layers keep the layout's digests"
expect_eq "$(ls "$RT_STORAGE/compressed" | wc -l)" "$notes" "... and nothing was compressed for it"

# --- a killed push, run again ----------------------------------------------------
# Killed early (compressing) and later (sending): each time the same command
# finishes the job, and what the registry holds reads back.
for at in 0.2 0.6 1.2; do
  rm -rf "$RT_STORAGE/compressed"  # compressed again each time
  timeout -s KILL "$at" "$RT" push -q --ca-file "$REG_CA" app3 "$REG/test/killed$at:v1" || true
  expect_status 0 "push killed after ${at}s, run again" -- "$RT" push --ca-file "$REG_CA" app3 "$REG/test/killed$at:v1"
  skopeo copy -q --src-cert-dir "$REG_CERTS" --src-creds "$creds" "docker://$REG/test/killed$at:v1" "dir:$T/k$at" ||
    fail "what the registry holds after the rerun does not verify"
done
ls "$RT_STORAGE/tmp" | grep -v '\.lock$' | grep -q . && fail "a killed push left work in the store" || true
pass "killed pushes finish when run again; nothing half-written used"

# --- zstd ---------------------------------------------------------------------------
expect_status 0 "push --compression zstd" -- "$RT" push --compression zstd --ca-file "$REG_CA" app3 "$REG/test/z:v1"
skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/test/z:v1" >"$T/z.json"
python3 -c '
import json, sys
kinds = [l["mediaType"].rsplit("+", 1)[1] for l in json.load(open(sys.argv[1]))["layers"]]
assert kinds == ["zstd"] * 3, kinds' "$T/z.json" || fail "zstd layers: $(cat "$T/z.json")"
pass "layers kept as tar go zstd"
"$RT" pull -q --ca-file "$REG_CA" "$REG/test/z:v1" zback
cmp "$(rootfs_of zback)/data/noise" "$T/ctx/big/data/noise" && pass "the zstd image reads back" ||
  fail "the zstd image does not read back"

# --- an image kept as SquashFS ------------------------------------------------------
"$RT" convert -q app "$T/app.sqfs"
expect_status 0 "push a SquashFS file" -- "$RT" push --ca-file "$REG_CA" "$T/app.sqfs" "$REG/test/sq:v1"
"$RT" pull -q --ca-file "$REG_CA" "$REG/test/sq:v1" sqback
out=$("$RT" exec sqback sh -c 'cat /app/hello; echo; echo $APP; test -e /.rt && echo has-rt; true')
expect_eq "$out" $'hi\n1' "its one layer is the tree, its config the image's (no /.rt)"
expect_eq "$(tree_listing "$(rootfs_of sqback)")" "$(tree_listing "$(rootfs_of app)")" "the same tree as the image's"
# Its tree layer is remembered by the file's path, inode, size and times:
# pushed again, nothing is compressed (no note is written anew).
notes() { (cd "$RT_STORAGE/compressed" && stat -c '%n %i' * | sort); }
before=$(notes)
expect_status 0 "push the SquashFS file again" -- "$RT" push --ca-file "$REG_CA" "$T/app.sqfs" "$REG/test/sq:v2"
expect_eq "$(notes)" "$before" "... its tree layer is not compressed again"
touch "$T/app.sqfs"
"$RT" push -q --ca-file "$REG_CA" "$T/app.sqfs" "$REG/test/sq:v3" || fail "push after touch"
expect_eq "$(notes | wc -l)" "$(($(echo "$before" | wc -l) + 1))" "a file that changed is compressed anew"

# --- rt build --push and -o ------------------------------------------------------------
expect_status 0 "rt build --push REF -o oci-archive:FILE" -- \
  env RT_CA_FILE="$REG_CA" "$RT" build -q -t built --push "$REG/test/built:v1" -o "oci-archive:$T/built.tar" -f "$T/ctx/Dockerfile3" "$T/ctx"
skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/test/built:v1" >/dev/null ||
  fail "rt build --push left no manifest"
skopeo inspect "oci-archive:$T/built.tar" >/dev/null || fail "rt build -o wrote no OCI archive"
pass "rt build pushed it and wrote the archive"

# --- token auth ---------------------------------------------------------------------
start_registry "$T/reg-token" token
export RT_AUTH_REALMS=127.0.0.1:$REG_TOKEN_PORT
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"
expect_status 0 "push through a token service (a pull,push token)" -- "$RT" push --ca-file "$REG_CA" app "$REG/test/tok:v1"
unset RT_AUTH_REALMS
skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/test/tok:v1" >/dev/null ||
  fail "the token registry has no manifest"

# --- OCI layout and archive ------------------------------------------------------------
expect_status 0 "rt convert IMAGE oci:DIR" -- "$RT" convert app3 "oci:$T/out-oci"
skopeo copy -q "oci:$T/out-oci:latest" "dir:$T/from-oci" 2>"$T/err" || fail "skopeo cannot read the layout: $(cat "$T/err")"
expect_status 0 "rt convert IMAGE oci-archive:FILE" -- "$RT" convert app3 "oci-archive:$T/out.tar"
skopeo inspect "oci-archive:$T/out.tar" >/dev/null 2>"$T/err" || fail "skopeo cannot read the archive: $(cat "$T/err")"
"$RT" import -q "$T/out.tar" ociback
cmp "$(rootfs_of ociback)/data/noise" "$T/ctx/big/data/noise" ||
  fail "the OCI archive does not read back"
pass "skopeo reads both; rt import reads the archive back"
expect_status 125 "an existing destination" -- "$RT" convert app3 "oci:$T/out-oci"
expect_match "$ERR" "--force" "the hint names --force"

# --- rt prune takes the compressed layers and their notes -------------------------------
[ -n "$(ls "$RT_STORAGE/compressed")" ] || fail "no compressed layer remembered"
"$RT" prune -q
[ -z "$(ls "$RT_STORAGE/compressed")" ] && pass "rt prune removes the compressed layers' notes" ||
  fail "notes left: $(ls "$RT_STORAGE/compressed")"
expect_status 0 "a push after the prune compresses again" -- env RT_AUTH_REALMS=127.0.0.1:$REG_TOKEN_PORT "$RT" push --ca-file "$REG_CA" app "$REG/test/pruned:v1"
