#!/bin/bash
# SIF files (Apptainer's format): rt exec/run/shell serve the primary
# SquashFS partition in place; Apptainer's environment scripts and
# runscript are honoured; rt inspect and rt convert read them; damaged or
# unservable files are refused with the reason. Files come from this
# project's writer (siftool.py) and from the SIF reference library's own
# test images (Debian's golang-github-sylabs-sif-dev).
. "$(dirname "$0")/lib.sh"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not usable by $(id -un) (needs mode 0666)"
export RT_STORAGE="$T/store"
own_rt
SIF="python3 $RT_SOURCE_DIR/test/integration/siftool.py make"

# A busybox root as Apptainer builds it: environment scripts, a runscript,
# a startscript, labels; a definition file and a signature beside it.
root="$T/root"
cp -a "$IMG" "$root"
mkdir -p "$root/.singularity.d/env"
cat >"$root/.singularity.d/env/01-base.sh" <<'EOF'
export SIF_ORDER="base"
EOF
cat >"$root/.singularity.d/env/90-environment.sh" <<'EOF'
export SIF_ORDER="$SIF_ORDER environment"
export PATH="/opt/tools:$PATH"
EOF
cat >"$root/.singularity.d/runscript" <<'EOF'
#!/bin/sh
echo "runscript [$#]: $* ($SIF_ORDER)"
EOF
printf '#!/bin/sh\nexec sleep 300\n' >"$root/.singularity.d/startscript"
chmod 755 "$root/.singularity.d/runscript" "$root/.singularity.d/startscript"
echo '{"maintainer": "rt tests", "org.label-schema.schema-version": "1.0"}' >"$root/.singularity.d/labels.json"
printf 'Bootstrap: docker\nFrom: busybox\n\n%%runscript\n    echo hi\n' >"$T/def"
mksquashfs "$root" "$T/root.sqfs" -quiet -no-progress -all-root >/dev/null
$SIF "$T/img.sif" --squashfs "$T/root.sqfs" --deffile "$T/def" --signatures 1

# ---- running ----------------------------------------------------------------
expect_status 0 "rt exec FILE.sif" -- "$RT" exec "$T/img.sif" sh -c 'echo "$SIF_ORDER|$PATH"'
expect_match "$OUT" "^base environment\|/opt/tools:" "the environment scripts are sourced in order, before the program"
expect_status 0 "rt run FILE.sif ARGS" -- "$RT" run "$T/img.sif" one "two three"
expect_eq "$OUT" "runscript [2]: one two three (base environment)" "rt run runs the runscript with the arguments"
expect_status 0 "rt run without arguments" -- "$RT" run "$T/img.sif"
expect_eq "$OUT" "runscript [0]:  (base environment)" "... and without"
expect_status 0 "rt shell FILE.sif" -- sh -c "echo 'echo \$SIF_ORDER' | '$RT' shell '$T/img.sif'"
expect_eq "$OUT" "base environment" "rt shell sources them too"
expect_status 0 "exit status and arguments pass through" -- "$RT" exec "$T/img.sif" rt-probe argv 'a b' '$x;`y`'
expect_eq "$OUT" '[a b] [$x;`y`]' "arguments reach the program as they are, through the environment script wrapper"
expect_status 3 "a program's exit status" -- "$RT" exec "$T/img.sif" sh -c 'exit 3'
expect_status 0 "-v" -- "$RT" exec -v "$T/img.sif" true
expect_match "$ERR" "is signed \(1 signature\), but rt exec does not verify SIF signatures" "-v says the image is signed but unverified"
# The same tree as a plain SquashFS file reads the same.
listing='cd / && find bin etc .singularity.d -exec stat -c "%n %F %a %s" {} + | sort'
expect_eq "$("$RT" exec "$T/img.sif" sh -c "$listing")" "$("$RT" exec "$T/root.sqfs" sh -c "$listing")" \
  "the SIF partition and the SquashFS file show the same tree"

# ---- inspect ----------------------------------------------------------------
expect_status 0 "rt inspect FILE.sif" -- "$RT" inspect "$T/img.sif"
python3 - "$OUT" <<'PY' || fail "rt inspect output: $OUT"
import json, sys
j = json.loads(sys.argv[1])
assert j["format"] == "SIF", j
kinds = [(o["type"], o.get("partition")) for o in j["objects"]]
assert ("partition", "primary system") in kinds and ("signature", None) in kinds, kinds
assert j["signatures"] == "1, not verified by rt", j["signatures"]
assert j["labels"]["maintainer"] == "rt tests", j["labels"]
assert j["definition"].startswith("Bootstrap: docker"), j["definition"]
assert "runscript [$#]" in j["runscript"], j["runscript"]
assert "exec sleep 300" in j["startscript"], j["startscript"]
PY
pass "inspect shows the partitions, signature, labels, definition file and scripts"

# ---- convert to every form ----------------------------------------------------
expect_status 0 "convert FILE.sif to .sqfs" -- "$RT" convert "$T/img.sif" "$T/out.sqfs"
cmp -s "$T/out.sqfs" "$T/root.sqfs" && pass "the .sqfs is the partition, byte for byte" || fail "the .sqfs differs from the partition"
expect_status 0 "convert FILE.sif to a directory" -- "$RT" convert "$T/img.sif" "$T/bundle"
expect_status 0 "convert FILE.sif into the store" -- "$RT" convert "$T/img.sif" fromsif
for form in "$T/out.sqfs" "$T/bundle" fromsif; do
  expect_status 0 "rt run of the converted $form" -- "$RT" run "$form" x
  expect_eq "$OUT" "runscript [1]: x (base environment)" "the runscript and environment come along ($form)"
done
expect_status 0 "RT_STORE_FORMAT=sqfs" -- env RT_STORE_FORMAT=sqfs "$RT" convert "$T/img.sif" fromsif-sq
expect_status 0 "... runs" -- "$RT" run fromsif-sq y
expect_eq "$OUT" "runscript [1]: y (base environment)" "into the store as SquashFS too"

# ---- refused, with the reason --------------------------------------------------
refused() {  # WHAT REGEX FILE
  expect_status 125 "$1" -- "$RT" exec "$3" true
  expect_match "$ERR" "image \`$3\`: .*$2" "$1: the message names the file and the reason"
}
$SIF "$T/enc.sif" --squashfs "$T/root.sqfs" --root-fs encrypted
refused "an encrypted partition" "encrypted SquashFS partition" "$T/enc.sif"
$SIF "$T/ext3.sif" --squashfs "$T/root.sqfs" --root-fs ext3
refused "an ext3 root partition" "root filesystem partition is ext3, not SquashFS" "$T/ext3.sif"
$SIF "$T/overlay.sif" --squashfs "$T/root.sqfs" --overlay
expect_status 125 "an overlay partition that holds no ext3 file system" -- "$RT" exec "$T/overlay.sif" true
expect_match "$ERR" "could not mount the overlay partition of \`$T/overlay.sif\`" "... is refused, naming it"
$SIF "$T/noroot.sif" --deffile "$T/def" --no-root
refused "no system partition" "no primary system partition \(it holds definition file\)" "$T/noroot.sif"
head -c 20000 "$T/img.sif" >"$T/short.sif"
refused "a file cut inside its descriptor table" "SIF descriptor table .* lies past the end of the file" "$T/short.sif"
size=$(stat -c %s "$T/img.sif")
head -c $((size - 70000)) "$T/img.sif" >"$T/cut.sif"
refused "a file cut inside its partition" "lies outside the file" "$T/cut.sif"
python3 - "$T/img.sif" "$T/far.sif" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
d = 4096 + 585  # the second descriptor: the partition
b[d + 17:d + 25] = struct.pack("<q", 1 << 40)
open(sys.argv[2], "wb").write(b)
PY
refused "an offset past the end" "SIF object 2 \(partition, [0-9]+ bytes at byte 1099511627776\) lies outside the file" "$T/far.sif"
head -c 64 "$T/img.sif" >"$T/header.sif"
refused "a file with only part of a header" "the SIF header lies past the end of the file" "$T/header.sif"
expect_status 125 "rt inspect of a damaged file" -- "$RT" inspect "$T/far.sif"
expect_match "$ERR" "far.sif.*lies outside the file" "inspect names the problem too"

# ---- written by the SIF reference library ------------------------------------
ref=/usr/share/gocode/src/github.com/sylabs/sif/test/images
[ -r "$ref/one-group.sif" ] || fail "$ref/one-group.sif is missing: install golang-github-sylabs-sif-dev (test/install-deps.sh)"
# A root of one file, hello.txt: a program comes from a bind.
expect_status 0 "the reference library's one-group.sif" -- \
  "$RT" exec --bind "$(dirname "$BUSYBOX"):/host-bin" "$ref/one-group.sif" /host-bin/busybox cat /hello.txt
expect_eq "$OUT" "Hello from Sylabs!" "its SquashFS partition is served in place"
expect_status 0 "one-group-signed.sif, -v" -- \
  "$RT" exec -v --bind "$(dirname "$BUSYBOX"):/host-bin" "$ref/one-group-signed.sif" /host-bin/busybox true
expect_match "$ERR" "is signed \(1 signature\)" "its signature is noted, unverified"
expect_status 0 "inspect two-groups-signed.sif" -- "$RT" inspect "$ref/two-groups-signed.sif"
python3 - "$OUT" <<'PY' || fail "inspect of two-groups-signed.sif: $OUT"
import json, sys
j = json.loads(sys.argv[1])
parts = [(o["filesystem"], o["partition"]) for o in j["objects"] if o["type"] == "partition"]
assert ("SquashFS", "primary system") in parts and ("ext3", "system") in parts, parts
signers = {o["signer"] for o in j["objects"] if o["type"] == "signature"}
assert signers == {"12045c8c0b1004d058de4beda20c27ee7ff7ba84"}, signers
assert j["signatures"] == "2, not verified by rt", j
PY
pass "inspect reads its partitions and signatures"
refused "the reference library's empty.sif" "no primary system partition \(it holds no objects\)" "$ref/empty.sif"
refused "one-object-crypt-message.sif" "no primary system partition \(it holds cryptographic message\)" \
  "$ref/one-object-crypt-message.sif"

# ---- hostile SIF files --------------------------------------------------------
$SIF "$T/two.sif" --squashfs "$T/root.sqfs" --primaries 2
refused "two primary system partitions" "two primary system partitions \(objects [0-9]+ and [0-9]+\)" "$T/two.sif"
$SIF "$T/empty-root.sif" --squashfs "$T/root.sqfs" --empty-root
refused "a primary partition of size 0" "its primary system partition \(object [0-9]+\) is empty" "$T/empty-root.sif"
$SIF "$T/v2.sif" --squashfs "$T/root.sqfs" --version 02
refused "an unknown SIF version" "its SIF version \`02\` is not one rt knows" "$T/v2.sif"
# A partition that claims SquashFS but holds other bytes is never copied out.
head -c 200000 /dev/urandom >"$T/junk"
$SIF "$T/junk.sif" --squashfs "$T/junk"
expect_status 125 "rt convert of a SIF file whose partition is not SquashFS" -- "$RT" convert "$T/junk.sif" "$T/junk.sqfs"
[ ! -e "$T/junk.sqfs" ] || fail "rt convert wrote the partition's bytes"
pass "nothing is written"
# Names, labels and definitions that are not UTF-8 are shown escaped.
printf 'Bootstrap: docker\nFrom: caf\xe9\n' >"$T/def-latin1"
printf '{"maintainer": "caf\xe9"}' >"$T/labels-latin1"
$SIF "$T/latin1.sif" --squashfs "$T/root.sqfs" --deffile "$T/def-latin1" --labels "$T/labels-latin1" \
  --root-name "$(printf 'root\xff')"
expect_status 0 "rt inspect of a SIF file with names that are not UTF-8" -- "$RT" inspect "$T/latin1.sif"
python3 - "$OUT" <<'PY' || fail "inspect of latin1.sif: $OUT"
import json, sys
j = json.loads(sys.argv[1])
assert j["definition"] == "Bootstrap: docker\nFrom: caf\\xe9\n", j["definition"]
assert j["labels"] == '{"maintainer": "caf\\xe9"}', j["labels"]
assert any(o.get("name") == "root\\xff" for o in j["objects"]), j["objects"]
PY
pass "... each shown with its bytes escaped"

# The SIF files rt writes, as the SIF reference library reads them: a Go
# program (sifread) built here against Debian's golang-github-sylabs-sif-dev.
if command -v go >/dev/null; then
  GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE="$T/gocache" GOFLAGS= \
    go build -o "$T/sifread" "$RT_SOURCE_DIR/test/integration/sifread/main.go" || fail "building sifread"
  expect_status 0 "rt convert FILE.sqfs FILE.sif (wrapped as it is)" -- "$RT" convert "$T/root.sqfs" "$T/rt.sif"
  expect_status 0 "the reference library reads it" -- "$T/sifread" "$T/rt.sif"
  expect_eq "$OUT" "FS $(stat -c %s "$T/root.sqfs") Squashfs *System $(go env GOARCH)
primary $(sha256sum <"$T/root.sqfs" | cut -c1-64)" "... one primary system partition: the SquashFS file's bytes"
  expect_status 0 "rt convert IMAGE FILE.sif from the store" -- "$RT" convert fromsif "$T/store.sif"
  expect_status 0 "the reference library reads that too" -- "$T/sifread" "$T/store.sif"
  expect_match "$OUT" "(^|
)FS [0-9]+ Squashfs \*System $(go env GOARCH)" "... its partition"
  expect_eq "$(sed -n 's/^primary //p' <<<"$OUT")" "$("$RT" convert -q fromsif "$T/store.sqfs" && sha256sum <"$T/store.sqfs" | cut -c1-64)" \
    "... holding what rt convert makes of the image as SquashFS"
  # An image with a config: a definition and the labels before the
  # partition, both made from it.
  tar -C "$IMG" -cf "$T/busybox.tar" .
  python3 "$RT_SOURCE_DIR/test/integration/ocitool.py" layout "$T/labelled" --env "GREETING=it's \"here\"" \
    --env PATH=/bin:/usr/bin --entrypoint echo --cmd default --label maintainer="rt tests" \
    --label org.opencontainers.image.title=labelled "$T/busybox.tar" >/dev/null
  expect_status 0 "rt convert OCI-LAYOUT FILE.sif (a config with labels)" -- "$RT" convert "$T/labelled" "$T/labelled.sif"
  expect_status 0 "the reference library reads it" -- "$T/sifread" "$T/labelled.sif"
  python3 - "$OUT" "$T/def" <<'PY' || fail "what the reference library reads: $OUT"
import ast, json, sys
lines = sys.argv[1].splitlines()
kinds = [l.split(" ", 1)[0] for l in lines]
assert kinds == ["Def.FILE", "JSON.Labels", "FS", "primary"], kinds
def text(kind):
    return ast.literal_eval(next(l for l in lines if l.startswith(kind + " ")).split(" ", 2)[2])
assert json.loads(text("JSON.Labels")) == {"maintainer": "rt tests", "org.opencontainers.image.title": "labelled"}
open(sys.argv[2], "w").write(text("Def.FILE"))
PY
  pass "... a definition file, the labels, then the partition"
  expect_status 0 "rt inspect shows the same definition" -- "$RT" inspect "$T/labelled.sif"
  expect_eq "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["definition"], end="")' "$OUT")" \
    "$(cat "$T/def")" "... as the library read it"
  # Inside, Apptainer's files as its own images hold them, run by the
  # image's /bin/sh as Apptainer's actions run them: the environment script,
  # then the runscript (Entrypoint with Cmd, or with the arguments).
  env_script=/.singularity.d/env/10-rt-image-config.sh
  expect_status 0 "the environment script and runscript run in the image" -- "$RT" exec "$T/labelled.sif" /bin/sh -c \
    '. "$1"; printf "%s|" "$GREETING" "$PATH"; exec /.singularity.d/runscript' sh "$env_script"
  expect_eq "$OUT" "it's \"here\"|/bin:/usr/bin|default" "... the config's environment, Entrypoint and Cmd"
  expect_status 0 "... and with arguments" -- "$RT" exec "$T/labelled.sif" /.singularity.d/runscript one two
  expect_eq "$OUT" "one two" "... which replace Cmd"
  expect_eq "$("$RT" exec "$T/labelled.sif" cat /.singularity.d/Singularity)" "$(cat "$T/def")" \
    "/.singularity.d/Singularity is the definition"
  expect_eq "$("$RT" exec "$T/labelled.sif" cat /.singularity.d/labels.json | python3 -c 'import json,sys; print(sorted(json.load(sys.stdin).items()))')" \
    "[('maintainer', 'rt tests'), ('org.opencontainers.image.title', 'labelled')]" "/.singularity.d/labels.json the labels"
  # rt itself reads the config: the same, with no shell started for it.
  expect_status 0 "rt run FILE.sif of rt's" -- "$RT" run -v "$T/labelled.sif" via-rt
  expect_eq "$OUT" "via-rt" "runs Entrypoint with the arguments"
  [[ "$ERR" != *"/.singularity.d/env"* ]] || fail "rt sourced the environment script it made: $ERR"
  pass "... without sourcing the environment script rt made"
  expect_status 0 "rt convert FILE.sif FILE.sif" -- "$RT" convert "$T/labelled.sif" "$T/again.sif"
  expect_eq "$("$RT" exec "$T/again.sif" ls /.singularity.d/env)" "10-rt-image-config.sh" "adds Apptainer's files once"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "go is missing: the SIF reference library cannot read rt's SIF files (test/install-deps.sh installs golang-go)"
fi
