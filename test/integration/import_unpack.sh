#!/bin/bash
# rt import and layer unpacking: valid tricky layers work, hostile ones are
# refused or neutralised, and nothing is written outside the target.
. "$(dirname "$0")/lib.sh"
OCI="python3 $RT_SOURCE_DIR/test/integration/ocitool.py"
export RT_STORAGE="$T/store"
L="$T/layers"
mkdir -p "$L" "$T/outside"
base="$L/base.tar.gz"
tar -C "$IMG" -czf "$base" .

# store_unchanged: no image and no debris appeared.
snapshot() { (cd "$RT_STORAGE" 2>/dev/null && find images tmp -mindepth 1 -maxdepth 1 | sort) || true; }
outside_untouched() {
  [ -z "$(ls -A "$T/outside")" ] || fail "something was written to $T/outside: $(ls -A "$T/outside")"
  pass "nothing outside the target"
}

# --- valid images ------------------------------------------------------------
"$RT" import -q "$base" base
out=$("$RT" exec base rt-probe argv ok)
expect_eq "$out" "[ok]" "imported rootfs tar runs by name"
# A root filesystem tar's digest identifies its content, in either form.
mkdir -p "$T/other" && echo other >"$T/other/file" && tar -C "$T/other" -cf "$L/other.tar" .
"$RT" import -q "$L/other.tar" other
"$RT" import -q --format sqfs "$base" base-sqfs
digest() { "$RT" inspect "$1" | sed -n 's/.*"config_digest": "\(.*\)".*/\1/p'; }
[ "$(digest base)" != "$(digest other)" ] && pass "two root filesystems have two digests" ||
  fail "two root filesystem tars share the digest $(digest base)"
expect_eq "$(digest base-sqfs)" "$(digest base)" "the same root filesystem has one digest in both forms"

make_tricky_layers "$L"
$OCI layout "$T/lay" --tag v1 --env FOO=bar "$base" "$L/l1.tar.gz" "$L/l2.tar.zst" >/dev/null
"$RT" import "$T/lay" tricky 2>"$T/import.err" || fail "import of the tricky layout failed: $(cat "$T/import.err")"
expect_match "$(cat "$T/import.err")" "skipping device nodes" "device nodes skipped with a warning"
R=$("$RT" inspect tricky | sed -n 's/.*"path": "\(.*\)".*/\1/p')/rootfs
[ -d "$R" ] || fail "no rootfs at $R"
[ ! -e "$R/a/gone" ] && pass "whiteout removed a lower file" || fail "a/gone survived its whiteout"
[ -e "$R/a/sub/keep" ] || fail "whiteout removed too much"
expect_eq "$(ls "$R/x")" "new" "opaque whiteout hid the lower directory's contents, kept the new"
expect_eq "$(cat "$R/usr/lib/viasymlink")" "lib/viasymlink" "a later layer writes through lib -> usr/lib"
[ -d "$R/f2d" ] && [ -f "$R/f2d/child" ] && pass "file replaced by a directory" || fail "f2d"
[ -f "$R/d2f" ] && pass "directory replaced by a file" || fail "d2f"
[ -f "$R/s2f" ] && [ ! -L "$R/s2f" ] && pass "symlink replaced by a file" || fail "s2f"
expect_eq "$(stat -c %a "$R/ro")" "555" "a 0555 directory keeps its mode"
[ -f "$R/ro/inside" ] && pass "and was filled" || fail "ro/inside missing"
expect_eq "$(stat -c %a "$R/suid")" "755" "no setuid bit on disk"
expect_eq "$(tr '\0' ' ' <"$R/../file-attrs")" "suid 4000 0 " "... it is kept beside the tree (file-attrs)"

# A whiteout applies to lower layers only: an entry of its own layer stays
# (OCI image spec, layer.md), in a directory and in a SquashFS file alike.
$OCI tar "$L/l3.tar" dir:w file:w/lower file:w/same
$OCI tar "$L/l4.tar" file:w/same file:w/.wh.same file:w/.wh.lower file:w/.wh.new file:w/new
$OCI layout "$T/lay3" --tag v1 "$base" "$L/l3.tar" "$L/l4.tar" >/dev/null
"$RT" import -q "$T/lay3" samelayer
R3=$("$RT" inspect samelayer | sed -n 's/.*"path": "\(.*\)".*/\1/p')/rootfs
expect_eq "$(ls "$R3/w" | tr '\n' ' ')" "new same " "a whiteout leaves its own layer's entries, before or after it (directory)"
"$RT" import -q --squash "$T/samelayer.sqfs" "$T/lay3"
expect_eq "$("$RT" exec "$T/samelayer.sqfs" ls /w | tr '\n' ' ')" "new same " "and in a SquashFS file written from the layers"
[ ! -e "$R/dev/evil" ] && pass "device node not created" || fail "device node exists"
[ -p "$R/pipe" ] && pass "fifo created" || fail "fifo missing"
expect_eq "$(stat -c %i "$R/a/hl")" "$(stat -c %i "$R/a/sub/keep")" "hard link inside the image"
out=$("$RT" run tricky rt-probe env FOO)
expect_eq "$out" "bar" "the layout's config Env applies"

# OCI archive (a tar of the layout), SOURCE:TAG, docker-archive (via skopeo).
tar -C "$T/lay" -cf "$T/lay.tar" .
"$RT" import -q "$T/lay.tar:v1" fromarchive
"$RT" exec fromarchive test -f /x/new || fail "OCI archive import"
pass "OCI archive with :TAG"
if command -v skopeo >/dev/null; then
  # docker-archive holds no zstd: the same layers with the last one plain.
  $OCI layout "$T/lay2" --tag v1 "$base" "$L/l1.tar.gz" "$L/l2.tar" >/dev/null
  skopeo copy -q "oci:$T/lay2:v1" "docker-archive:$T/docker.tar:example/tricky:v1" 2>"$T/skopeo.err" ||
    fail "skopeo could not make a docker-archive: $(cat "$T/skopeo.err")"
  "$RT" import -q "$T/docker.tar"
  "$RT" exec example/tricky:v1 test -f /x/new || fail "docker-archive import"
  pass "docker-archive import, named by its RepoTags"
fi


# --- hostile layers ----------------------------------------------------------
refuse() {  # refuse WHAT PATTERN TARFILE: import must fail naming the reason
  local what=$1 pat=$2 tarfile=$3 before
  before=$(snapshot)
  expect_status 125 "$what is refused" -- "$RT" import "$tarfile" evil
  expect_match "$ERR" "$pat" "$what: the error says why"
  expect_eq "$(snapshot)" "$before" "$what: the store is unchanged"
  outside_untouched
}
if [ -f "$T/docker.tar" ]; then
  # Its config is named by its digest: a changed config is refused.
  mkdir -p "$T/dx" && tar -C "$T/dx" -xf "$T/docker.tar"
  cfg=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["Config"])' "$T/dx/manifest.json")
  chmod u+w "$T/dx/$cfg"
  printf ' ' >>"$T/dx/$cfg"
  tar -C "$T/dx" -cf "$T/docker-bad.tar" .
  refuse "a docker-archive whose config does not match its name" "does not match its name" "$T/docker-bad.tar"
fi
# An image for another platform is refused, naming it and the host's.
$OCI layout "$T/arm" --tag v1 --platform linux/arm64 "$base" >/dev/null
refuse "an arm64 image" "holds an image for linux/arm64; this host runs linux/" "$T/arm"
# A descriptor and the document it points to must agree on what it is.
cp -r "$T/lay" "$T/lay-mt"
python3 - "$T/lay-mt/index.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p))
j["manifests"][0]["mediaType"] = "application/vnd.oci.image.index.v1+json"
json.dump(j, open(p, "w"))
PY
refuse "a manifest its descriptor calls an index" "descriptor that points to it says .*index.*manifest" "$T/lay-mt"
# One image under two tags is one image: no tag needed; the name is the
# layout's with the first tag.
cp -r "$T/lay" "$T/twotags"
python3 - "$T/twotags/index.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p))
second = dict(j["manifests"][0]); second["annotations"] = {"org.opencontainers.image.ref.name": "latest"}
j["manifests"].append(second)
json.dump(j, open(p, "w"))
PY
"$RT" import -q "$T/twotags" || fail "a layout with two tags of one image: $(cat "$T/err")"
"$RT" exec twotags:v1 test -f /x/new || fail "twotags:v1 does not run"
pass "one image under two tags imports without a tag, as LAYOUT:TAG"
# An image's USER is shown by inspect; rt run says once that it runs the
# program as the caller.
$OCI layout "$T/userimg" --tag v1 --user app:app "$base" >/dev/null
"$RT" import -q "$T/userimg" userimg
expect_match "$("$RT" inspect userimg)" '"User": "app:app"' "inspect shows the image's USER"
expect_status 0 "rt run of an image with USER" -- "$RT" run userimg rt-probe argv ok
expect_match "$ERR" "asks to run as user .app:app.; rt runs it as $(id -un) \(uid $(id -u)\)" "rt run says whom it runs as"
expect_eq "$(grep -c 'asks to run' "$T/err")" 1 "once"
$OCI tar "$L/dotdot.tar" file:ok file:../../outside/pwned
refuse "an entry with .." "\\.\\." "$L/dotdot.tar"
$OCI tar "$L/abs.tar" file:ok "file:$T/outside/pwned"
refuse "an absolute entry" "absolute" "$L/abs.tar"
$OCI tar "$L/hlout.tar" file:ok hardlink:h:../../../etc/passwd
refuse "a hard link out of the image" "hard link" "$L/hlout.tar"
$OCI tar "$L/hlabs.tar" file:ok hardlink:h:/etc/passwd
refuse "an absolute hard link" "hard link" "$L/hlabs.tar"
head -c 100000 /dev/urandom >"$L/garbage.tar"
refuse "a layer that is not a tar" "not a .*tar" "$L/garbage.tar"
# Corrupt in the middle of a file's data: the cause is named, not "read failed".
python3 - "$L/midcorrupt.tar.gz" <<'PY'
import gzip, io, os, sys, tarfile
data = os.urandom(3000000)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    info = tarfile.TarInfo("big")
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))
z = bytearray(gzip.compress(buf.getvalue(), 1))
for i in range(len(z) // 2, len(z) // 2 + 200):
    z[i] ^= 0xff
open(sys.argv[1], "wb").write(z)
PY
refuse "a gzip layer corrupt inside a file" "entry .big.: cannot read file data: .*corrupt gzip" "$L/midcorrupt.tar.gz"
head -c 50000 "$base" >"$L/truncated.tar.gz"
refuse "a truncated gzip layer" "truncated|corrupt" "$L/truncated.tar.gz"
$OCI tar "$L/bomb.tar" big:b1:3000000 big:b2:3000000
gzip -k "$L/bomb.tar"
before=$(snapshot)
expect_status 125 "an image over --max-size is refused" -- "$RT" import --max-size 4000000 "$L/bomb.tar.gz" evil
expect_match "$ERR" "larger than the limit" "says why"
expect_eq "$(snapshot)" "$before" "decompression bomb: the store is unchanged"
# A sparse file counts by its apparent size, in every form rt writes.
mkdir -p "$T/sparse"
truncate -s 1T "$T/sparse/hole"
tar -C "$T/sparse" --sparse -cf "$L/sparse.tar" hole
[ "$(stat -c %s "$L/sparse.tar")" -lt 1000000 ] || fail "the sparse tar is not sparse"
rm -f "$T/sparse/hole"
expect_status 125 "a 1 TiB sparse file over --max-size is refused" -- "$RT" import --max-size 1000000000 "$L/sparse.tar" evil
expect_match "$ERR" "larger than the limit.*sparse" "says why, and that holes count"
expect_status 125 "and with --squash" -- "$RT" import --max-size 1000000000 --squash "$T/sparse.sqfs" "$L/sparse.tar"
expect_match "$ERR" "larger than the limit" "says why"
expect_status 125 "and with --format sqfs" -- "$RT" import --max-size 1000000000 --format sqfs "$L/sparse.tar" evil
[ ! -e "$T/sparse.sqfs" ] && pass "no SquashFS file left" || fail "sparse.sqfs was written"
expect_eq "$(snapshot)" "$before" "sparse file: the store is unchanged"

# A symlink naming a host path, then a file through it: resolved inside the
# image, never on the host.
$OCI tar "$L/symesc.tar" "dir:${T#/}/outside" "symlink:esc:$T/outside" file:esc/pwned \
  "symlink:up:../../../../../../.." file:up/pwned2
"$RT" import -q "$L/symesc.tar" symesc
outside_untouched
R=$("$RT" inspect symesc | sed -n 's/.*"path": "\(.*\)".*/\1/p')/rootfs
[ -f "$R/$T/outside/pwned" ] && [ -f "$R/pwned2" ] && pass "writes through escaping symlinks stay inside the root" ||
  fail "escaping symlink writes went somewhere unexpected"
$OCI tar "$L/dangling.tar" "symlink:esc:$T/outside" file:esc/pwned
refuse "a write through a symlink to a directory the image lacks" "not a directory" "$L/dangling.tar"

# Layouts with bad metadata.
$OCI layout "$T/baddiff" --tag v1 --bad-diff-id 0 "$L/l1.tar.gz" >/dev/null
refuse "a diff_id mismatch" "diff_id mismatch" "$T/baddiff"
$OCI layout "$T/foreign" --media-type 0=application/vnd.docker.image.rootfs.foreign.diff.tar.gzip "$L/l1.tar.gz" >/dev/null
refuse "a foreign layer" "foreign" "$T/foreign"
$OCI layout "$T/enc" --media-type 0=application/vnd.oci.image.layer.v1.tar+gzip+encrypted "$L/l1.tar.gz" >/dev/null
refuse "an encrypted layer" "encrypted" "$T/enc"
cp -r "$T/enc" "$T/baddigest"
python3 - "$T/baddigest" <<'PY'
import json, os, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "index.json")))
m = idx["manifests"][0]["digest"][7:]
man = json.load(open(os.path.join(d, "blobs/sha256", m)))
man["layers"][0]["digest"] = "sha256:../../../../etc/passwd"
man["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
data = json.dumps(man).encode()
import hashlib
h = hashlib.sha256(data).hexdigest()
open(os.path.join(d, "blobs/sha256", h), "wb").write(data)
idx["manifests"][0]["digest"] = "sha256:" + h
idx["manifests"][0]["size"] = len(data)
json.dump(idx, open(os.path.join(d, "index.json"), "w"))
PY
refuse "a malformed digest" "malformed digest" "$T/baddigest"
python3 -c "print('{\"a\":' * 100 + '1' + '}' * 100)" >"$T/deep.json"
mkdir -p "$T/deep" && cp "$T/deep.json" "$T/deep/index.json" && echo '{}' >"$T/deep/oci-layout"
refuse "JSON nested too deep" "nested deeper" "$T/deep"

# Debris of a killed import is cleared by the next run.
"$RT" import -q "$base" again &
pid=$!
sleep 0.05
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
"$RT" import -q "$base" again
"$RT" exec again true
expect_eq "$(ls "$RT_STORAGE/tmp")" "" "no debris after a killed import and a new one"
"$RT" rm again
expect_status 125 "a removed image is gone" -- "$RT" exec again true

# File names are arbitrary bytes.
python3 - "$L/names.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape") as t:
    for name in ["n/sp ace", "n/new\nline", "n/bad\udcffbyte", "n/\u00fcn\u00ef"]:
        ti = tarfile.TarInfo(name)
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"x"))
PY
"$RT" import -q "$L/names.tar" names
R=$("$RT" inspect names | sed -n 's/.*"path": "\(.*\)".*/\1/p')/rootfs
expect_eq "$(ls -b "$R/n" | LC_ALL=C sort | tr '\n' '|')" 'bad\377byte|new\nline|sp\ ace|ünï|' "names with spaces, newlines, invalid UTF-8 and UTF-8 survive"

# Progress: a bar on a terminal (script(1) gives one), nothing when stderr
# is no terminal or under Slurm, lines and a summary at -v.
on_tty() { script -qec "$(printf '%q ' "$@")" /dev/null; }
out=$(on_tty "$RT" import "$base" progress 2>&1)
expect_match "$out" $'\r'"rt: unpacking \`progress\`: [0-9.]+ [kMG]?B / [0-9.]+ [kMG]?B \([0-9]+%\)" "a terminal shows bytes of the total"
expect_match "$out" "imported \`progress\`" "... then the result"
out=$(SLURM_JOB_ID=1 on_tty "$RT" import "$base" progress 2>&1)
[[ "$out" != *"unpacking"* ]] && pass "no bar under Slurm" || fail "a bar under Slurm: $out"
out=$(on_tty "$RT" import -q "$base" progress 2>&1)
[[ "$out" != *"unpacking"* ]] && pass "no bar with -q" || fail "a bar with -q: $out"
expect_status 0 "import, stderr no terminal" -- "$RT" import "$base" progress
[[ "$ERR" != *"unpacking"* ]] && pass "no progress off a terminal" || fail "progress off a terminal: $ERR"
expect_status 0 "import -v, stderr no terminal" -- "$RT" import -v "$base" progress
expect_match "$ERR" "unpacking \`progress\`: [0-9.]+ [kMG]?B in [0-9.]+ s" "-v off a terminal: a summary line"
out=$(on_tty "$RT" convert progress "$T/progress.sqfs" 2>&1)
expect_match "$out" $'\r'"rt: writing \`$T/progress.sqfs\`: [0-9.]+ [kMG]?B / " "convert to SquashFS shows what mksquashfs read of the tree"
out=$(on_tty "$RT" import --squash "$T/progress2.sqfs" "$base" 2>&1)
expect_match "$out" $'\r'"rt: writing \`$T/progress2.sqfs\`: [0-9.]+ [kMG]?B / " "import --squash too"
