#!/bin/bash
# SIF files in an OCI registry as Apptainer keeps them (oras://), against
# Debian's docker-registry on 127.0.0.1 (TLS, basic auth, rt login):
#   - rt push of a SIF file (the SIF reference library's test corpus, one
#     made by rt convert) and of a stored image: the manifest, config and
#     layer as the registry's HTTP API gives them (curl) are Apptainer's;
#     rt pull gives the file back byte for byte, and it runs;
#   - a SIF file pushed by another client (the requests of ORAS's CLI,
#     written here in Python) is pulled by rt and runs with rt exec;
#   - refusals: an image that is no SIF file (the reference and the media
#     type named), a blob whose bytes do not match its digest (nothing
#     left behind);
#   - the Apptainer command line's pull and push of oras://.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not usable by $(id -un) (needs mode 0666)"
command -v curl >/dev/null || skip "curl missing"
CORPUS=/usr/share/gocode/src/github.com/sylabs/sif/test/images
[ -s "$CORPUS/one-group-signed.sif" ] || skip "$CORPUS missing (Debian package golang-github-sylabs-sif-dev)"
export RT_STORAGE="$T/store" HOME="$T/home"
mkdir -p "$HOME" "$T/bin"
own_rt

REG_LOG_LEVEL=info start_registry "$T/reg" basic
export RT_CA_FILE="$REG_CA"
SIF_LAYER=application/vnd.sylabs.sif.layer.v1.sif
SIF_CONFIG=application/vnd.sylabs.sif.config.v1+json
OCI_MANIFEST=application/vnd.oci.image.manifest.v1+json
# The registry's HTTP API, read with curl: api PATH [CURL ARGS].
api() {
  local path=$1
  shift
  curl -sS --fail --cacert "$REG_CA" -u "$REG_USER:$REG_PASS" "$@" "https://$REG/v2/$path"
}
# manifest REPO TAG [CURL ARGS]
manifest() { api "$1/manifests/$2" -H "Accept: $OCI_MANIFEST" "${@:3}"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# --- refusals before any credentials ---------------------------------------------
expect_status 125 "a push without credentials" -- "$RT" push "$CORPUS/one-group-signed.sif" "oras://$REG/sif/corpus:v1"
expect_match "$ERR" "rt login $REG" "the hint names rt login"
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"

# --- a SIF file of the reference library's corpus -------------------------------
src="$CORPUS/one-group-signed.sif"
expect_status 0 "rt push FILE.sif oras://REF" -- "$RT" push "$src" "oras://$REG/sif/corpus:v1"
expect_match "$ERR" "3 blobs sent" "the SIF file, the config and the chunk index sent"
manifest sif/corpus v1 -D "$T/headers" >"$T/m.json" || fail "the registry has no manifest sif/corpus:v1"
expect_match "$(tr -d '\r' <"$T/headers" | grep -i '^content-type:')" "${OCI_MANIFEST//+/\\+}" "served as an OCI image manifest"
python3 - "$T/m.json" "$(sha "$src")" "$(stat -c %s "$src")" <<'PY' || fail "the manifest: $(cat "$T/m.json")"
import json, re, sys
m = json.load(open(sys.argv[1]))
digest, size = "sha256:" + sys.argv[2], int(sys.argv[3])
assert m["schemaVersion"] == 2 and m["mediaType"] == "application/vnd.oci.image.manifest.v1+json", m
c = m["config"]
assert c["mediaType"] == "application/vnd.sylabs.sif.config.v1+json", c
assert c["size"] == 2 and c["digest"] == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", c
assert c.get("data") == "e30=", c
assert len(m["layers"]) == 1, m["layers"]
l = m["layers"][0]
assert l["mediaType"] == "application/vnd.sylabs.sif.layer.v1.sif", l
assert l["digest"] == digest and l["size"] == size, (l, digest, size)
assert set(l["annotations"]) == {"org.opencontainers.image.title", "org.rt.sif.chunks"}, l
assert l["annotations"]["org.opencontainers.image.title"] == "one-group-signed.sif", l
assert re.fullmatch(r"sha256:[0-9a-f]{64}", l["annotations"]["org.rt.sif.chunks"]), l
created = m["annotations"]["org.opencontainers.image.created"]
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", created), created
PY
pass "the manifest: Apptainer's config and layer media types, the title annotation, the digest and size"
expect_eq "$(api sif/corpus/blobs/sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a)" "{}" \
  "the config blob is {}"
api "sif/corpus/blobs/sha256:$(sha "$src")" -o "$T/blob" && cmp -s "$T/blob" "$src" &&
  pass "the layer blob is the SIF file" || fail "the layer blob is not the SIF file"
rm -f "$T/blob"

expect_status 0 "rt pull oras://REF FILE" -- "$RT" pull "oras://$REG/sif/corpus:v1" "$T/back.sif"
cmp -s "$T/back.sif" "$src" && pass "the pulled file is the pushed one, byte for byte" || fail "the pulled file differs"
mkdir "$T/here"
(cd "$T/here" && "$RT" pull -q "oras://$REG/sif/corpus:v1") || fail "rt pull oras://REF without a file name"
expect_eq "$(ls -A "$T/here")" "corpus_v1.sif" "without FILE: NAME_TAG.sif in the working directory, nothing else"
cmp -s "$T/here/corpus_v1.sif" "$src" || fail "corpus_v1.sif differs"
mkdir "$T/into"
"$RT" pull -q "oras://$REG/sif/corpus:v1" "$T/into" || fail "rt pull oras://REF DIR"
expect_eq "$(ls -A "$T/into")" "corpus_v1.sif" "into a directory: NAME_TAG.sif there"
[ ! -e "$RT_STORAGE/images" ] || [ -z "$(ls -A "$RT_STORAGE/images")" ] &&
  pass "nothing went into the store" || fail "a SIF pull stored an image"
posts=$(grep -c '"POST /v2/sif/corpus/blobs/uploads/' "$T/reg/log" || true)
expect_status 0 "the same push again" -- "$RT" push "$src" "oras://$REG/sif/corpus:v1"
expect_match "$ERR" "0 blobs sent, 3 already there" "nothing sent twice"
expect_eq "$(grep -c '"POST /v2/sif/corpus/blobs/uploads/' "$T/reg/log" || true)" "$posts" "no upload started (registry log)"
manifest sif/corpus v1 >"$T/m2.json"
cmp -s "$T/m.json" "$T/m2.json" && pass "the same file makes the same manifest" || fail "the manifest changed"

# --- a runnable SIF file made by rt convert, and a stored image ------------------
printf 'from-oras\n' >"$IMG/hello"
"$RT" convert -q "$IMG" "$T/img.sif"
expect_status 0 "push a SIF file made by rt convert" -- "$RT" push -q "$T/img.sif" "oras://$REG/sif/busybox:1"
expect_status 0 "pull it back" -- "$RT" pull -q "oras://$REG/sif/busybox:1" "$T/bb.sif"
cmp -s "$T/bb.sif" "$T/img.sif" && pass "byte for byte" || fail "the pulled file differs"
expect_status 0 "rt exec of the pulled file" -- "$RT" exec "$T/bb.sif" cat /hello
expect_eq "$OUT" "from-oras" "it runs"
expect_status 0 "rt exec oras://REF: read from the registry (lazy.sh tests how)" -- "$RT" exec "oras://$REG/sif/busybox:1" cat /hello
expect_eq "$OUT" "from-oras" "it runs"
expect_status 125 "rt exec --no-pull oras://REF not in the node cache" -- "$RT" exec --no-pull "oras://$REG/sif/app:0" true
expect_match "$ERR" "not in the node cache" "the error says so"
"$RT" convert -q "$IMG" app
expect_status 0 "rt push STORED oras://REF: made into a SIF file" -- "$RT" push -q app "oras://$REG/sif/app:1"
expect_eq "$(manifest sif/app 1 | python3 -c 'import json,sys; l=json.load(sys.stdin)["layers"][0]; print(l["mediaType"], l["annotations"]["org.opencontainers.image.title"])')" \
  "$SIF_LAYER app.sif" "a SIF layer titled app.sif"
expect_status 0 "pull it" -- "$RT" pull -q "oras://$REG/sif/app:1" "$T/app.sif"
expect_match "$("$RT_IMAGE" inspect "$T/app.sif")" '"format": "SIF"' "a SIF file"
expect_eq "$("$RT" exec "$T/app.sif" cat /hello)" "from-oras" "it runs"
[ -z "$(ls -A "$RT_STORAGE/tmp" | grep '^\.rt-tmp' || true)" ] && pass "the conversion left nothing in the store's tmp/" ||
  fail "left in tmp/: $(ls -A "$RT_STORAGE/tmp")"

# --- a SIF file pushed by another client ------------------------------------------
# ORAS's CLI as Apptainer's documentation has it push one (`oras push
# --config /dev/null:$SIF_CONFIG REG/REPO:TAG FILE.sif:$SIF_LAYER`): each
# blob POSTed, then PUT whole with its digest; the config empty (0 bytes,
# not Apptainer's {}); the manifest last, indented as ORAS writes it.
mksquashfs "$IMG" "$T/other.sqfs" -quiet -no-progress -all-root >/dev/null
python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make "$T/other.sif" --squashfs "$T/other.sqfs"
cat >"$T/oras_client.py" <<'PY'
import base64, hashlib, json, os, ssl, sys, urllib.request
reg, repo, tag, ca, creds, layer_type = sys.argv[1:7]
files = sys.argv[7:]  # [FILE.sif]; the layer's bytes
ctx = ssl.create_default_context(cafile=ca)
auth = "Basic " + base64.b64encode(creds.encode()).decode()
def call(method, url, data=None, headers={}):
    if not url.startswith("https://"):
        url = "https://" + reg + url
    req = urllib.request.Request(url, data=data, method=method, headers={"Authorization": auth, **headers})
    return urllib.request.urlopen(req, context=ctx)
def blob(data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    r = call("POST", "/v2/%s/blobs/uploads/" % repo)
    loc = r.headers["Location"]
    loc += ("&" if "?" in loc else "?") + "digest=" + digest
    call("PUT", loc, data, {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))})
    return digest
layer = open(files[0], "rb").read() if files else b"not a sif"
config = b""
manifest = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.sylabs.sif.config.v1+json", "digest": blob(config), "size": 0},
    "layers": [{"mediaType": layer_type, "digest": blob(layer), "size": len(layer),
                "annotations": {"org.opencontainers.image.title": os.path.basename(files[0]) if files else "x"}}],
    "annotations": {"org.opencontainers.image.created": "2024-01-02T03:04:05Z"},
}
body = json.dumps(manifest, indent=2).encode()
call("PUT", "/v2/%s/manifests/%s" % (repo, tag), body,
     {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
PY
oras_push() { python3 "$T/oras_client.py" "$REG" "$1" "$2" "$REG_CA" "$REG_USER:$REG_PASS" "$3" "${@:4}"; }
oras_push sif/other v1 "$SIF_LAYER" "$T/other.sif" || fail "the other client's push"
expect_status 0 "rt pull of a SIF file another client pushed" -- "$RT" pull -q "oras://$REG/sif/other:v1" "$T/got.sif"
cmp -s "$T/got.sif" "$T/other.sif" && pass "byte for byte" || fail "the pulled file differs"
expect_eq "$("$RT" exec "$T/got.sif" cat /hello)" "from-oras" "rt exec runs it"

# --- refusals ------------------------------------------------------------------------
cd "$T/here"
# An OCI image's layer where a SIF file belongs.
oras_push sif/notsif v1 application/vnd.oci.image.layer.v1.tar+gzip || fail "the push of a tar layer"
expect_status 125 "an artifact whose layer is no SIF file" -- "$RT" pull "oras://$REG/sif/notsif:v1"
expect_match "$ERR" "oras://$REG/sif/notsif:v1" "the message names the reference"
expect_match "$ERR" "application/vnd.oci.image.layer.v1.tar\+gzip" "... and the media type found"
expect_eq "$(ls -A)" "corpus_v1.sif" "nothing was written"
# A blob whose bytes no longer match its digest: the registry's copy
# changed on its disk, one byte, size kept (sif/other shares it: last).
oras_push sif/bad v1 "$SIF_LAYER" "$T/other.sif" || fail "the push of sif/bad"
d=$(sha "$T/other.sif")
data="$T/reg/data/docker/registry/v2/blobs/sha256/${d:0:2}/$d/data"
[ -f "$data" ] || fail "the registry keeps blobs elsewhere than $data"
printf 'X' | dd of="$data" bs=1 seek=5000 conv=notrunc status=none
expect_status 125 "a blob that does not match its digest" -- "$RT" pull "oras://$REG/sif/bad:v1" "$T/here/bad.sif"
expect_match "$ERR" "digest mismatch" "the message says why"
expect_eq "$(ls -A "$T/here")" "corpus_v1.sif" "nothing left behind: no file, no temporary"
printf 'not a sif\n' >"$T/plain.sif"
expect_status 125 "a file that is no SIF file is not pushed" -- "$RT" push "$T/plain.sif" "oras://$REG/sif/x:1"
expect_match "$ERR" "is no SIF file" "the message says so"
cd "$T"

# --- Apptainer's command line -----------------------------------------------------
ln -s "$RT" "$T/bin/apptainer"
mkdir "$T/app-cwd" && cd "$T/app-cwd"
cp "$T/img.sif" ./mine.sif
expect_status 0 "apptainer push FILE.sif oras://REF" -- "$T/bin/apptainer" push mine.sif "oras://$REG/sif/apptainer:1"
expect_eq "$(manifest sif/apptainer 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][0]["annotations"]["org.opencontainers.image.title"])')" \
  "mine.sif" "the title is the file's name"
expect_status 0 "apptainer pull oras://REF" -- "$T/bin/apptainer" pull "oras://$REG/sif/apptainer:1"
cmp -s apptainer_1.sif mine.sif && pass "NAME_TAG.sif, byte for byte" || fail "apptainer_1.sif differs"
expect_status 125 "apptainer pull onto an existing file" -- "$T/bin/apptainer" pull "oras://$REG/sif/apptainer:1"
expect_status 0 "apptainer pull --force DEST oras://REF" -- "$T/bin/apptainer" pull --force out.sif "oras://$REG/sif/busybox:1"
cmp -s out.sif "$T/img.sif" && pass "DEST written" || fail "out.sif differs"
expect_eq "$("$T/bin/apptainer" exec out.sif cat /hello)" "from-oras" "apptainer exec runs it"
cd "$T"
