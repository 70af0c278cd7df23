#!/bin/bash
# rt exec oras://REF: a SIF file read from the registry by range into the
# node cache, against Debian's docker-registry on 127.0.0.1 (TLS, basic
# auth), with the Debian test image padded with 48 MB of random bytes no
# program reads:
#   - rt push writes the chunk index beside the file, named by an annotation
#     of the layer; its digests are the file's (checked here in Python);
#   - a lazy start runs python3 and fetches a fraction of the file (the
#     registry's log counts the bytes), none of the padding;
#   - of a large file first read, the rest is fetched ahead of the reads,
#     unless it is an ELF object: then its ends only;
#   - through a proxy that cuts an answer halfway, the range is asked
#     again and the file read is the pushed one; lazy-open leaves the
#     image's facts for the first start;
#   - two containers at once share the cache; a later start with a fresh
#     server fetches nothing; what is cached runs with the registry gone,
#     what is not fails, and a new reference fails naming the registry;
#   - a chunk the registry serves corrupted is refused, naming it, and
#     nothing of it is kept;
#   - the background fill completes the file: byte for byte the pushed one;
#   - a file pushed without an index (Apptainer's way) is fetched whole;
#   - the cache's size limit evicts the least recently used entry.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not usable by $(id -un) (needs mode 0666)"
[ -n "${RT_DEBIAN_ROOTFS:-}" ] && [ -s "$RT_DEBIAN_ROOTFS" ] || skip "RT_DEBIAN_ROOTFS (a Debian root filesystem tarball) not given"
export RT_STORAGE="$T/store" HOME="$T/home" RT_SQUASHFS_LINGER=0
mkdir -p "$HOME"
own_rt

REG_LOG_LEVEL=info start_registry "$T/reg" basic
export RT_CA_FILE="$REG_CA"
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"
sha() { sha256sum "$1" | cut -d' ' -f1; }
# Bytes the registry sent of blob HEX so far.
sent() { blob_bytes_sent "$T/reg/log" "$1"; }

# --- the image: Debian, padded ----------------------------------------------------
mkdir -p "$T/pad/opt"
head -c 48000000 /dev/urandom >"$T/pad/opt/padding"
{ printf '\177ELF'; head -c 12000000 /dev/urandom; } >"$T/pad/opt/elf-big"
head -c 12000000 /dev/urandom >"$T/pad/opt/data-big"
cp "$RT_DEBIAN_ROOTFS" "$T/deb.tar" && tar -rf "$T/deb.tar" -C "$T/pad" opt/padding opt/elf-big opt/data-big
"$RT" import -q "$T/deb.tar" deb || fail "rt import"
"$RT" convert -q deb "$T/deb.sif" || fail "rt convert deb deb.sif"
size=$(stat -c %s "$T/deb.sif")
hex=$(sha "$T/deb.sif")
REF="oras://$REG/lazy/deb:1"

expect_status 0 "rt push FILE.sif oras://REF" -- "$RT" push "$T/deb.sif" "$REF"
expect_match "$ERR" "3 blobs sent" "the file, the config and the chunk index sent"
python3 - "$T/reg/data" "$T/deb.sif" <<'PY' || fail "the chunk index"
import glob, hashlib, json, os, sys
data, sif = sys.argv[1:3]
tags = glob.glob(data + "/docker/registry/v2/repositories/lazy/deb/_manifests/tags/1/current/link")
digest = open(tags[0]).read().strip()
def blob(d):
    h = d.split(":")[1]
    return open(f"{data}/docker/registry/v2/blobs/sha256/{h[:2]}/{h}/data", "rb").read()
m = json.loads(blob(digest))
layer = m["layers"][0]
assert layer["mediaType"] == "application/vnd.sylabs.sif.layer.v1.sif", layer
index = blob(layer["annotations"]["org.rt.sif.chunks"]).decode()
lines = index.split("\n")
assert lines[0] == "rt-chunks 1" and lines[-1] == "", lines[:3]
cs, size = int(lines[1].split()[1]), int(lines[2].split()[1])
content = open(sif, "rb").read()
assert size == len(content) == layer["size"], (size, len(content))
want = [hashlib.sha256(content[i:i + cs]).hexdigest() for i in range(0, size, cs)]
assert lines[3:-1] == want, "digests differ"
PY
pass "the layer's annotation names the chunk index; its digests are the file's, chunk by chunk"

# --- a lazy start -------------------------------------------------------------------
export RT_LAZY_BACKGROUND=0
expect_status 0 "rt exec oras://REF python3" -- "$RT" exec "$REF" python3 -c 'import json; print(json.dumps({"lazy": 1}))'
expect_eq "$OUT" '{"lazy": 1}' "python3 ran from the registry's file"
first=$(sent "$hex")
[ "$first" -gt 0 ] && [ "$first" -lt $((size / 2)) ] ||
  fail "fetched $first bytes of a $size-byte file (expected more than none, less than half)"
pass "the first start fetched $first of $size bytes ($((first * 100 / size)) %)"
entry="$RT_STORAGE/lazy/$hex"
[ -s "$entry/have" ] && [ ! -e "$entry/complete" ] || fail "no cache entry at $entry"
python3 - "$entry" "$T/deb.sif" <<'PY' || fail "the cache entry's chunks"
import sys
entry, sif = sys.argv[1:3]
lines = open(entry + "/chunks").read().split("\n")
cs = int(lines[1].split()[1])
have = open(entry + "/have", "rb").read()
a, b = open(entry + "/image.sif", "rb").read(), open(sif, "rb").read()
n = 0
for i, h in enumerate(have):
    if h == 1:
        n += 1
        assert a[i * cs:(i + 1) * cs] == b[i * cs:(i + 1) * cs], f"chunk {i} differs"
assert 0 < n < len(have), (n, len(have))
PY
pass "every chunk the cache has is the file's"

# Two containers at once, then a later start: nothing more fetched.
before=$(sent "$hex")
"$RT" exec "$REF" python3 -c 'import json' & a=$!
"$RT" exec "$REF" python3 -c 'import json' & b=$!
wait $a && wait $b || fail "two containers of the lazy image at once"
"$RT" exec "$REF" python3 -c 'import json' || fail "a later start"
expect_eq "$(sent "$hex")" "$before" "two containers at once and a later start fetched nothing more"

# A large file's first read: the rest of it is fetched ahead of the reads,
# but of an ELF object only its ends (where the loader reads). Random bytes
# lie in the image as they are, so the test finds them in the file.
"$RT" exec "$REF" sh -c 'head -c 4096 /opt/elf-big && head -c 4096 /opt/data-big && exec sleep 60' >/dev/null & c=$!
python3 - "$RT_STORAGE/lazy/$hex" "$T/deb.sif" "$T/pad/opt" <<'PY' || fail "a large file's first read"
import sys, time
entry, sif, pad = sys.argv[1:4]
cs = int(open(entry + "/chunks").read().split("\n")[1].split()[1])
image = open(sif, "rb").read()
def chunk(name, at):
    piece = open(f"{pad}/{name}", "rb").read()[at:at + 64]
    i = image.find(piece)
    assert i >= 0 and image.find(piece, i + 1) < 0, (name, at)
    return i // cs
have = lambda c: open(entry + "/have", "rb").read()[c] == 1
data = [chunk("data-big", at) for at in (6000000, 11000000)]
elf_end, elf_middle = chunk("elf-big", 11000000), chunk("elf-big", 6000000)
for _ in range(300):
    if all(have(c) for c in data + [elf_end]):
        break
    time.sleep(0.1)
else:
    sys.exit("never fetched ahead: the rest of /opt/data-big (%s), the end of /opt/elf-big (%s)" %
             ([have(c) for c in data], have(elf_end)))
assert not have(elf_middle), "the ELF object's middle was fetched, unread"
PY
kill $c 2>/dev/null; wait $c 2>/dev/null || true
pass "a large file read from its start comes ahead of the reads; of an ELF object only its ends"

# The registry's requests: a blob read by range, not whole.
grep -q "response completed.*/blobs/sha256:$hex.*http.response.status=206" "$T/reg/log" &&
  pass "the file is read with range requests (HTTP 206)" || fail "no range request for the file"

# --- a connection cut halfway -------------------------------------------------------
# Through a proxy that cuts each blob's first answer halfway (the file's
# first range, in lazy-open): the range is asked again, and the bytes
# already handed over are not handed over twice (a chunk with bytes
# doubled or missing would not match its digest, and the start fails).
python3 "$RT_SOURCE_DIR/test/integration/flaky_proxy.py" "$T/pport" "$REG" "$REG_CA" 2>"$T/proxy.log" &
REG_PIDS+=($!)
wait_until 30 test -s "$T/pport" || fail "the proxy did not start"
PROXY=127.0.0.1:$(cat "$T/pport")
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --plain-http "$PROXY" || fail "rt login to the proxy"
expect_status 0 "lazy-open through a proxy that cuts the file's first answer" -- \
  env RT_STORAGE="$T/store-cut" "$RT_IMAGE" lazy-open -q --plain-http "oras://$PROXY/lazy/deb:1"
[ "$(grep -c "GET /v2/lazy/deb/blobs/sha256:$hex .* 206 " "$T/proxy.log")" -ge 2 ] ||
  fail "the proxy did not see the file's first range twice: $(cat "$T/proxy.log")"
# What the first start would read and check, lazy-open has: the image's
# facts, as rt exec keeps them.
[ "$(sed -n 2p "$T/store-cut/sqfs-facts/"* 2>/dev/null)" = "$T/store-cut/lazy/$hex/image.sif" ] &&
  pass "lazy-open keeps the image's facts for the first start" || fail "no facts of the image after lazy-open"
expect_status 0 "a file read through it" -- env RT_STORAGE="$T/store-cut" "$RT" exec "oras://$PROXY/lazy/deb:1" sha256sum /opt/data-big
expect_eq "${OUT%% *}" "$(sha "$T/pad/opt/data-big")" "the file read after a cut answer is the file pushed"

# --- offline --------------------------------------------------------------------
stop_registries
expect_status 0 "with the registry gone, what is cached runs" -- "$RT" exec "$REF" python3 -c 'print(7)'
expect_eq "$OUT" 7 "python3 from the cache"
expect_status 1 "with the registry gone, a file not cached fails" -- "$RT" exec "$REF" python3 -c 'open("/opt/padding", "rb").read()'
expect_match "$ERR" "Input/output error" "an I/O error"
expect_status 126 "with the registry gone, a program not cached does not start" -- "$RT" exec "$REF" sha1sum /opt/padding
expect_match "$ERR" "could not be fetched into the node cache" "rt says why"
expect_status 125 "with the registry gone, a new reference fails" -- "$RT" exec "oras://$REG/lazy/other:1" true
expect_match "$ERR" "$REG" "the error names the registry"
REG_LOG_LEVEL=info start_registry "$T/reg2" basic
export RT_CA_FILE="$REG_CA"
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"

# --- a corrupted chunk ------------------------------------------------------------
REF2="oras://$REG/lazy/deb:2"
"$RT" push -q "$T/deb.sif" "$REF2" || fail "push to the second registry"
blob="$T/reg2/data/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data"
cp "$blob" "$T/good-blob"
# A byte of the SquashFS tables (read by every start) flipped in the
# registry's own copy.
off=$((size - 100))
printf '\x5a' | dd of="$blob" bs=1 seek="$off" conv=notrunc status=none
cmp -s "$blob" "$T/good-blob" && printf '\xa5' | dd of="$blob" bs=1 seek="$off" conv=notrunc status=none
export RT_STORAGE="$T/store2"
expect_status 125 "a corrupted chunk" -- "$RT" exec "$REF2" true
expect_match "$ERR" "other bytes than its index says" "the chunk is refused"
expect_match "$ERR" "chunk [0-9]+" "the chunk is named"
python3 - "$RT_STORAGE/lazy/$hex" <<'PY' || fail "the corrupted chunk was kept"
import os, sys
e = sys.argv[1]
if os.path.exists(e + "/have"):
    have = open(e + "/have", "rb").read()
    lines = open(e + "/chunks").read().split("\n")
    cs, size = int(lines[1].split()[1]), int(lines[2].split()[1])
    assert have[(size - 100) // cs] == 0
PY
pass "nothing of the corrupted chunk was kept"
cp "$T/good-blob" "$blob"
expect_status 0 "with the registry's copy repaired" -- "$RT" exec "$REF2" true

# --- the background fill -------------------------------------------------------
export RT_STORAGE="$T/store3" RT_LAZY_BACKGROUND=1 RT_SQUASHFS_LINGER=60
expect_status 0 "a start with the background fill" -- "$RT" exec "$REF2" true
wait_until 60 test -e "$RT_STORAGE/lazy/$hex/complete" || fail "the background fill did not complete the file"
cmp -s "$RT_STORAGE/lazy/$hex/image.sif" "$T/deb.sif" && pass "the filled file is the pushed one, byte for byte" ||
  fail "the filled file differs from the pushed one"
expect_status 0 "the whole file runs" -- "$RT" exec "$REF2" sha256sum /opt/padding
expect_eq "${OUT%% *}" "$(sha "$T/pad/opt/padding")" "the padding read whole through the cache"
pkill -u "$(id -u)" -f "^rt-sqfs $RT_STORAGE/" || true  # the 60 s server, and its fetcher with it
export RT_SQUASHFS_LINGER=0 RT_LAZY_BACKGROUND=0

# --- a file without a chunk index (as Apptainer pushes it) ----------------------------
python3 - "$REG" "$REG_CA" "$REG_USER:$REG_PASS" "$T/deb.sif" <<'PY' || fail "a push without an index"
import base64, hashlib, json, ssl, sys, urllib.request
reg, ca, creds, path = sys.argv[1:5]
ctx = ssl.create_default_context(cafile=ca)
auth = "Basic " + base64.b64encode(creds.encode()).decode()
def req(method, url, data=None, headers={}):
    r = urllib.request.Request(url if url.startswith("https") else f"https://{reg}{url}", data=data, method=method)
    r.add_header("Authorization", auth)
    for k, v in headers.items(): r.add_header(k, v)
    return urllib.request.urlopen(r, context=ctx)
def blob(data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    loc = req("POST", "/v2/lazy/plain/blobs/uploads/").headers["Location"]
    sep = "&" if "?" in loc else "?"
    req("PUT", f"{loc}{sep}digest={d}", data, {"Content-Type": "application/octet-stream"})
    return d
sif = open(path, "rb").read()
m = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
     "config": {"mediaType": "application/vnd.sylabs.sif.config.v1+json", "size": 2, "digest": blob(b"{}")},
     "layers": [{"mediaType": "application/vnd.sylabs.sif.layer.v1.sif", "size": len(sif), "digest": blob(sif),
                 "annotations": {"org.opencontainers.image.title": "deb.sif"}}]}
req("PUT", "/v2/lazy/plain/manifests/1", json.dumps(m).encode(),
    {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
PY
export RT_STORAGE="$T/store4"
expect_status 0 "rt exec oras://REF of a file without an index" -- "$RT" exec -v "oras://$REG/lazy/plain:1" python3 -c 'print(3)'
expect_eq "$OUT" 3 "it runs"
expect_match "$ERR" "no chunk index: fetching the whole file" "-v says the file is fetched whole"
[ -e "$RT_STORAGE/lazy/$hex/complete" ] && cmp -s "$RT_STORAGE/lazy/$hex/image.sif" "$T/deb.sif" &&
  pass "the whole file, verified, in the cache" || fail "the file without an index is not whole in the cache"

# --- the cache's size limit -------------------------------------------------------
export RT_STORAGE="$T/store5"
"$RT" exec "$REF2" true || fail "a first entry"
cp "$T/deb.sif" "$T/deb2.sif"
printf 'x' >>"$T/deb2.sif"  # another file, another digest
"$RT" push -q "$T/deb2.sif" "oras://$REG/lazy/deb2:1" || fail "push of a second file"
hex2=$(sha "$T/deb2.sif")
wait_until 20 test -z "$(rt_processes)" || fail "servers left: $(ps -o pid,args -p "$(rt_processes | paste -sd,)")"
RT_LAZY_CACHE_SIZE=1K "$RT" exec "oras://$REG/lazy/deb2:1" true || fail "a second entry over the limit"
[ ! -e "$RT_STORAGE/lazy/$hex" ] && [ -e "$RT_STORAGE/lazy/$hex2" ] &&
  pass "over the size limit, the older entry was evicted, the new one kept" ||
  fail "eviction: $hex $hex2: $(ls "$RT_STORAGE/lazy")"
expect_status 0 "the evicted reference is fetched again" -- "$RT" exec "$REF2" true
