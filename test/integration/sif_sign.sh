#!/bin/bash
# SIF signatures as Apptainer writes and checks them: rt verify checks the
# SIF reference library's own signed test images (Debian's
# golang-github-sylabs-sif-dev) with the library's test key, and refuses
# another key, a flipped byte (naming the object), an unsigned file and
# legacy signatures unless asked; rt sign signs a SIF file rt made with a
# key made here, and both rt verify and the reference library's verifier
# (sifverify, built here) accept it. Then the same through rt's Apptainer
# command line (apptainer verify, apptainer sign).
. "$(dirname "$0")/lib.sh"
own_rt
SIFDIR=/usr/share/gocode/src/github.com/sylabs/sif/test
[ -d "$SIFDIR/images" ] || skip "the SIF reference library's test images are missing (golang-github-sylabs-sif-dev)"
for c in gpg go mksquashfs; do command -v "$c" >/dev/null || skip "$c missing"; done

# Keys: the library's test key (its public half exported from a GnuPG home
# of this test's) and one of this test's own, protected by a passphrase.
export GNUPGHOME="$T/gnupg"
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --import "$SIFDIR/keys/private.asc" 2>/dev/null
gpg --batch --armor --export >"$T/sylabs.asc"
cat >"$T/keyspec" <<'EOF'
Key-Type: RSA
Key-Length: 2048
Name-Real: rt test signer
Name-Email: signer@rt.invalid
Expire-Date: 0
Passphrase: s3cret words
%commit
EOF
gpg --batch --quiet --gen-key "$T/keyspec" 2>/dev/null
FPR=$(gpg --batch --with-colons --list-secret-keys signer@rt.invalid | awk -F: '$1 == "fpr" {print $10; exit}')
gpg --batch --armor --export "$FPR" >"$T/mine.asc"
gpg --batch --armor --pinentry-mode loopback --passphrase "s3cret words" --export-secret-keys "$FPR" >"$T/mine.secret.asc"
gpgconf --kill all
[ -s "$T/sylabs.asc" ] && [ -s "$T/mine.asc" ] && [ -s "$T/mine.secret.asc" ] || fail "making the test keys"
unset GNUPGHOME
pass "keys made in a private GnuPG home"

# The reference library's verifier.
GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE="$T/gocache" GOFLAGS= \
  go build -o "$T/sifverify" "$RT_SOURCE_DIR/test/integration/sifverify/main.go" || fail "building sifverify"

# No GnuPG home of rt's may be left in the temporary directory.
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"
no_leftovers() {
  local left
  left=$(ls -A "$TMPDIR")
  [ -z "$left" ] || fail "$1 left [$left] in \$TMPDIR"
}

# ---- the reference library's test images ----------------------------------------
for f in one-group-signed two-groups-signed; do
  expect_status 0 "rt verify $f.sif with the library's key" -- "$RT" verify --key "$T/sylabs.asc" "$SIFDIR/images/$f.sif"
  expect_match "$OUT" "object group 1 \(objects 1, 2\): signed by 12045C8C0B1004D058DE4BEDA20C27EE7FF7BA84" \
    "... the group, its objects and the key named"
  expect_status 1 "rt verify $f.sif with another key" -- "$RT" verify --key "$T/mine.asc" "$SIFDIR/images/$f.sif"
  expect_match "$ERR" "signature object [0-9]+ \(key .*12045C8C0B1004D058DE4BEDA20C27EE7FF7BA84\): signed by a key not given" \
    "... refused: signed by a key not given"
done
no_leftovers "rt verify"
expect_status 0 "both keys given: one of them signed" -- \
  "$RT" verify -k "$T/mine.asc" -k "$T/sylabs.asc" "$SIFDIR/images/two-groups-signed.sif"
expect_match "$OUT" "object group 2 \(objects 3\): signed by" "... every group reported"
expect_status 0 "--gpg-home DIR: the public keys of a GnuPG home" -- \
  "$RT" verify --gpg-home "$T/gnupg" "$SIFDIR/images/one-group-signed.sif"
gpgconf --homedir "$T/gnupg" --kill all

# One byte of the partition flipped: the object is named.
cp "$SIFDIR/images/two-groups-signed.sif" "$T/flipped.sif"
python3 - "$T/flipped.sif" <<'PY'
import sys
f = open(sys.argv[1], "r+b")
f.seek(40960 + 1000)   # object 3, a 256 KiB partition at byte 40960
b = f.read(1)
f.seek(40960 + 1000)
f.write(bytes([b[0] ^ 0xff]))
PY
expect_status 1 "a byte of a partition flipped" -- "$RT" verify --key "$T/sylabs.asc" "$T/flipped.sif"
expect_match "$ERR" "flipped.sif\`: the signatures do not verify" "... the file named"
expect_match "$ERR" "object group 2 \(objects 3\): signature object 5 .*: object 3 \(partition\): its data differs from what was signed" \
  "... the group, the signature and the object named"
expect_status 1 "... and the reference library agrees" -- "$T/sifverify" "$T/flipped.sif" "$T/sylabs.asc"

# Unsigned: no signature.
expect_status 1 "an unsigned file" -- "$RT" verify --key "$T/sylabs.asc" "$SIFDIR/images/one-group.sif"
expect_match "$ERR" "object group 1 \(objects 1, 2\): no signature" "... refused: no signature"
expect_status 1 "a file with no object groups" -- "$RT" verify --key "$T/sylabs.asc" "$SIFDIR/images/empty.sif"
expect_match "$ERR" "no object groups" "... refused: nothing is signed"
expect_status 125 "no key given" -- "$RT" verify "$SIFDIR/images/one-group-signed.sif"
expect_match "$ERR" "needs the public keys to trust: --key FILE" "... refused, saying what to give"
expect_status 125 "a key file that is no key" -- "$RT" verify --key "$T/keyspec" "$SIFDIR/images/one-group-signed.sif"
expect_match "$ERR" "key file \`$T/keyspec\` holds no OpenPGP key" "... refused, naming the file"

# Legacy signatures (data only): refused unless --legacy-insecure.
expect_status 1 "a legacy group signature" -- \
  "$RT" verify --key "$T/sylabs.asc" "$SIFDIR/images/one-group-signed-legacy-group.sif"
expect_match "$ERR" "legacy format only" "... refused by default"
expect_match "$ERR" "--legacy-insecure" "... with the option that accepts it"
for f in one-group-signed-legacy-group one-group-signed-legacy-all; do
  expect_status 0 "rt verify --legacy-insecure $f.sif" -- \
    "$RT" verify --legacy-insecure --key "$T/sylabs.asc" "$SIFDIR/images/$f.sif"
done
# In the two-group files only group 1 is signed.
for f in two-groups-signed-legacy-group two-groups-signed-legacy-all; do
  expect_status 1 "--legacy-insecure: $f.sif, a group signed by nobody, is still refused" -- \
    "$RT" verify --legacy-insecure --key "$T/sylabs.asc" "$SIFDIR/images/$f.sif"
  expect_match "$ERR" "object group 2 \(objects 3\): no signature" "... naming the group"
done
expect_status 1 "--legacy-insecure: one object of the group signed is not enough" -- \
  "$RT" verify --legacy-insecure --key "$T/sylabs.asc" "$SIFDIR/images/one-group-signed-legacy.sif"
expect_match "$ERR" "object 1 \(partition\) is signed by no legacy signature" "... naming the object not signed"

# ---- rt sign ---------------------------------------------------------------
expect_status 0 "rt convert DIR FILE.sif" -- "$RT" convert "$IMG" "$T/rt.sif"
cp "$T/rt.sif" "$T/rt-unsigned.sif"
expect_status 1 "rt's SIF file is not signed yet" -- "$RT" verify --key "$T/mine.asc" "$T/rt.sif"
RT_SIGN_PASSPHRASE="wrong" expect_status 125 "rt sign with a wrong passphrase" -- \
  "$RT" sign --key "$T/mine.secret.asc" "$T/rt.sif"
expect_match "$ERR" "wrong passphrase" "... refused, saying why"
cmp -s "$T/rt.sif" "$T/rt-unsigned.sif" || fail "a failed rt sign changed the file"
pass "... and the file is unchanged"
expect_status 125 "rt sign with no terminal and no RT_SIGN_PASSPHRASE" -- \
  setsid "$RT" sign --key "$T/mine.secret.asc" "$T/rt.sif" </dev/null
expect_match "$ERR" "RT_SIGN_PASSPHRASE" "... refused, naming the variable"
RT_SIGN_PASSPHRASE="s3cret words" expect_status 0 "rt sign --key SECRET FILE.sif" -- \
  "$RT" sign --key "$T/mine.secret.asc" "$T/rt.sif"
expect_match "$OUT" "object group 1: signed by $FPR" "... the group and the key named"
no_leftovers "rt sign"
expect_status 0 "rt verify accepts rt's signature" -- "$RT" verify --key "$T/mine.asc" "$T/rt.sif"
expect_status 0 "the reference library's verifier accepts it" -- "$T/sifverify" "$T/rt.sif" "$T/mine.asc"
expect_status 1 "... and refuses it with another key" -- "$T/sifverify" "$T/rt.sif" "$T/sylabs.asc"
expect_status 0 "rt inspect lists the signature" -- "$RT" inspect "$T/rt.sif"
expect_match "$OUT" "$(echo "$FPR" | tr A-F a-f)" "... with the key's fingerprint"
RT_SIGN_PASSPHRASE="s3cret words" expect_status 0 "signed twice (a second signer)" -- \
  "$RT" sign -q --key "$T/mine.secret.asc" "$T/rt.sif"
expect_status 0 "... both signatures verify" -- "$T/sifverify" "$T/rt.sif" "$T/mine.asc"

# ---- rt exec --verify-key, and the site's sif.keys ---------------------------
export RT_STORAGE="$T/store"
records() { find "$RT_STORAGE/verified" -type f 2>/dev/null | wc -l; }
expect_status 0 "rt exec --verify-key runs a file signed by that key" -- \
  "$RT" exec --verify-key "$T/mine.asc" "$T/rt.sif" cat /etc/os-release
expect_eq "$(records)" 1 "... and the store keeps a record of it"
expect_status 0 "... a second start finds the record" -- "$RT" exec -q --verify-key "$T/mine.asc" "$T/rt.sif" true
expect_eq "$(records)" 1 "... and adds none"
expect_status 125 "rt exec --verify-key with another key refuses" -- "$RT" exec --verify-key "$T/sylabs.asc" "$T/rt.sif" true
expect_match "$ERR" "rt.sif. is not run: its signatures do not verify with the keys given" "... naming the file"
expect_match "$ERR" "signed by a key not given" "... and rt verify's reason"
expect_status 125 "an unsigned file refuses" -- "$RT" exec --verify-key "$T/mine.asc" "$T/rt-unsigned.sif" true
expect_status 125 "rt instance start --verify-key with another key refuses" -- \
  "$RT" instance start --verify-key "$T/sylabs.asc" "$T/rt.sif" vk sleep 100
expect_match "$ERR" "is not run: its signatures do not verify" "... before any instance starts"
"$RT" instance list 2>/dev/null | grep -qw vk && fail "instance vk was started" || pass "... and none was"
cp "$T/rt.sif" "$T/rt-flip.sif"
expect_status 0 "a signed copy runs" -- "$RT" exec -q --verify-key "$T/mine.asc" "$T/rt-flip.sif" true
python3 - "$T/rt-flip.sif" "$(stat -c %s "$T/rt-unsigned.sif")" <<'PY'
import sys
# A byte of the SquashFS partition, which ends where the unsigned file did.
with open(sys.argv[1], "r+b") as f:
    at = int(sys.argv[2]) - 1000
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0xff]))
PY
expect_status 125 "... the same copy with a byte flipped afterwards refuses (its record no longer fits)" -- \
  "$RT" exec -q --verify-key "$T/mine.asc" "$T/rt-flip.sif" true
mkdir "$T/open" && cp "$T/rt.sif" "$T/open/" && chmod 0777 "$T/open"
expect_status 125 "a signed file in a directory others can write is not verified" -- \
  "$RT" exec --verify-key "$T/mine.asc" "$T/open/rt.sif" true
expect_match "$ERR" "cannot be verified before it runs" "... saying why"
chmod 0755 "$T/open"
expect_status 125 "--verify-key with a directory image refuses" -- "$RT" exec --verify-key "$T/mine.asc" "$IMG" true
expect_match "$ERR" "is not a SIF file" "... saying only SIF files carry signatures"
printf 'sif.keys = %s\n' "$T/mine.asc" >"$T/rt.conf"
expect_status 125 "the site's sif.keys: an unsigned SIF file refuses" -- env RT_CONF="$T/rt.conf" "$RT" exec "$T/rt-unsigned.sif" true
expect_match "$ERR" "the site's keys \(sif.keys\)" "... naming the site's keys"
expect_status 0 "... a signed one runs" -- env RT_CONF="$T/rt.conf" "$RT" exec "$T/rt.sif" true
expect_status 0 "... and a directory image is not concerned" -- env RT_CONF="$T/rt.conf" "$RT" exec "$IMG" true
unset RT_STORAGE

# ---- rt's Apptainer command line -------------------------------------------
mkdir -p "$T/bin" "$T/home"
ln -s "$RT" "$T/bin/apptainer"
cp "$T/rt-unsigned.sif" "$T/app.sif"
PATH="$T/bin:$PATH" RT_SIGN_PASSPHRASE="s3cret words" expect_status 0 "apptainer sign --key FILE FILE.sif" -- \
  apptainer sign --key "$T/mine.secret.asc" "$T/app.sif"
PATH="$T/bin:$PATH" expect_status 0 "apptainer verify --key FILE FILE.sif" -- \
  apptainer verify --key "$T/mine.asc" "$T/app.sif"
expect_status 0 "... which the reference library accepts too" -- "$T/sifverify" "$T/app.sif" "$T/mine.asc"
PATH="$T/bin:$PATH" expect_status 1 "apptainer verify with another key" -- \
  apptainer verify --key "$T/sylabs.asc" "$T/app.sif"
# Without --key: Apptainer's keyring file ($APPTAINER_KEYSDIR/pgp-public).
mkdir -p "$T/keys"
gpg --dearmor <"$T/mine.asc" >"$T/keys/pgp-public"
PATH="$T/bin:$PATH" APPTAINER_KEYSDIR="$T/keys" expect_status 0 "apptainer verify FILE.sif (Apptainer's keyring)" -- \
  apptainer verify "$T/app.sif"
PATH="$T/bin:$PATH" expect_status 125 "apptainer verify --url is refused" -- \
  apptainer verify --url https://keys.example --key "$T/mine.asc" "$T/app.sif"
expect_match "$ERR" "--url is not supported by rt" "... naming the option"
PATH="$T/bin:$PATH" expect_status 125 "apptainer sign --keyidx is refused" -- \
  apptainer sign --keyidx 1 "$T/app.sif"
expect_match "$ERR" "--keyidx is not supported by rt" "... naming the option"
no_leftovers "the Apptainer command line"
