#!/bin/bash
# rt push --sign-by: GPG simple signing of the manifest pushed, as skopeo
# copy --sign-by does, into the lookaside store registries.d names; the
# signatures judged by skopeo, podman and rt pull under the same policy;
# refusals (a wrong passphrase, an unknown key, an http lookaside) that
# write no signature.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
command -v skopeo >/dev/null || skip "skopeo missing"
command -v gpg >/dev/null || skip "gpg missing"
export RT_STORAGE="$T/store"
export HOME="$T/home" && mkdir -p "$HOME"
unset RT_SIGN_PASSPHRASE

start_registry "$T/reg" basic
creds="$REG_USER:$REG_PASS"
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"

# Keys in the user's keyring: one and two without a passphrase, three with
# one. Their agent is ended with the test.
export GNUPGHOME="$T/gnupg" && mkdir -m 700 "$GNUPGHOME"
trap 'gpgconf --kill all 2>/dev/null || true; stop_registries; cleanup' EXIT
for who in one two; do
  gpg --batch --quiet --passphrase '' --quick-gen-key "rt test $who <$who@rt.test>" rsa2048 sign never 2>/dev/null
  gpg --batch --export --armor "$who@rt.test" >"$T/$who.asc"
done
gpg --batch --quiet --pinentry-mode loopback --passphrase 'pass three' \
  --quick-gen-key "rt test three <three@rt.test>" rsa2048 sign never 2>/dev/null
# The agent may keep three's passphrase from its making: forgotten, so that
# only what rt gives it counts.
gpgconf --reload gpg-agent
fpr() { gpg --batch --with-colons --list-keys "$1@rt.test" 2>/dev/null | awk -F: '/^fpr/ { print $10; exit }'; }
FPR1=$(fpr one) FPR2=$(fpr two) FPR3=$(fpr three)
[ -n "$FPR1" ] && [ -n "$FPR2" ] && [ -n "$FPR3" ] || fail "gpg made no keys"
printf 'pass three\n' >"$T/pass3" && printf 'not it\n' >"$T/wrong"

# registries.d: the registry's signatures in $SIGS; one repository with a
# staging store for writes, one with only an https store.
SIGS="$T/sigs" STAGE="$T/staging"
RD="$HOME/.config/containers/registries.d" && mkdir -p "$RD"
cat >"$RD/test.yaml" <<YAML
docker:
  $REG:
    lookaside: file://$SIGS
  $REG/test/staged:
    lookaside: file://$SIGS
    lookaside-staging: file://$STAGE
  $REG/test/web:
    lookaside: https://127.0.0.1:9/sigs
YAML
by() { printf '{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "%s"}' "$T/$1.asc"; }
printf '{"default": [{"type": "reject"}], "transports": {"docker": {"%s/test": [%s]}}}\n' "$REG" "$(by one)" >"$T/key1.json"
printf '{"default": [{"type": "reject"}], "transports": {"docker": {"%s/test": [%s]}}}\n' "$REG" "$(by two)" >"$T/key2.json"
digest_of() {
  skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/$1" | sha256sum | cut -d' ' -f1
}
tagged() { skopeo inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/$1" >/dev/null 2>&1; }
# skopeo_judges POLICY REPO:TAG: skopeo copy under the policy (0: admitted).
skopeo_judges() {
  rm -rf "$T/copy"
  skopeo --policy "$T/$1.json" --registries.d "$RD" copy -q --src-cert-dir "$REG_CERTS" --src-creds "$creds" \
    "docker://$REG/$2" "dir:$T/copy" >/dev/null 2>"$T/skopeo.err"
}

# --- refusals before anything is written ----------------------------------------
expect_status 125 "an unknown key refuses the push" -- \
  "$RT" push --ca-file "$REG_CA" --sign-by 0123456789ABCDEF0123456789ABCDEF01234567 "$IMG" "$REG/test/unknown:v1"
expect_match "$ERR" "no usable secret key .0123456789ABCDEF" "... naming the key"
expect_match "$ERR" "$GNUPGHOME" "... and the GnuPG home"
! tagged test/unknown:v1 && pass "... before anything was pushed" || fail "an unknown key's push put the manifest"
[ ! -e "$SIGS/test" ] && pass "... and no signature was written" ||
  fail "a refused push wrote into the lookaside: $(find "$SIGS")"
expect_status 125 "a wrong passphrase refuses the signature" -- \
  "$RT" push --ca-file "$REG_CA" --sign-by "$FPR3" --sign-passphrase-file "$T/wrong" "$IMG" "$REG/test/wrongpw:v1"
expect_match "$ERR" "wrong passphrase|Bad passphrase" "... saying why"
expect_match "$ERR" "manifest was not pushed" "... and that the manifest was not pushed"
! tagged test/wrongpw:v1 && pass "... which it was not" || fail "a push with a wrong passphrase put the manifest"
[ ! -e "$SIGS/test" ] && pass "... and no signature was written" || fail "a wrong passphrase wrote a signature"
expect_status 125 "an https lookaside refuses the push" -- \
  "$RT" push --ca-file "$REG_CA" --sign-by "$FPR1" "$IMG" "$REG/test/web:v1"
expect_match "$ERR" "only into a file:// lookaside" "... saying rt writes file:// stores only"
expect_match "$ERR" "lookaside-staging" "... with the hint"
! tagged test/web:v1 && pass "... before anything was pushed" || fail "the https lookaside's push put the manifest"
expect_status 125 "--sign-by with oras:// refuses" -- \
  "$RT" push --ca-file "$REG_CA" --sign-by "$FPR1" "$IMG" "oras://$REG/test/sif:v1"
expect_match "$ERR" "rt sign" "... pointing at rt sign"

# --- signed by key one, judged by skopeo, rt and podman ----------------------------
expect_status 0 "rt push --sign-by key one" -- "$RT" push --ca-file "$REG_CA" --sign-by "$FPR1" "$IMG" "$REG/test/signed:v1"
d=$(digest_of test/signed:v1)
sig="$SIGS/test/signed@sha256=$d/signature-1"
[ -f "$sig" ] && pass "signature-1 is in the lookaside at REPO@sha256=HEX" || fail "no $sig: $(find "$SIGS" 2>/dev/null)"
expect_match "$ERR" "signed .*$REG/test/signed:v1.* by $FPR1" "... and rt says so"
gpg --batch --decrypt "$sig" >"$T/payload" 2>/dev/null || fail "gpg cannot read the signature"
python3 - "$T/payload" "$REG/test/signed:v1" "sha256:$d" <<'PY' || fail "the payload: $(cat "$T/payload")"
import json, sys
p = json.load(open(sys.argv[1]))
c = p["critical"]
assert c["type"] == "atomic container signature", c
assert c["identity"] == {"docker-reference": sys.argv[2]}, c
assert c["image"] == {"docker-manifest-digest": sys.argv[3]}, c
assert p["optional"]["creator"].startswith("rt "), p
assert isinstance(p["optional"]["timestamp"], int), p
PY
pass "... its payload names the reference and the digest pushed"
head -c 16 "$sig" | grep -q "BEGIN PGP" && fail "the signature is armoured or clear-signed" || pass "... a binary signed message"
[ "$(stat -c %a "$sig")" = 644 ] && pass "... readable by all, for publishing" || fail "signature mode $(stat -c %a "$sig")"
skopeo_judges key1 test/signed:v1 && pass "skopeo under key one admits it" || fail "skopeo refuses: $(cat "$T/skopeo.err")"
! skopeo_judges key2 test/signed:v1 && pass "skopeo under key two refuses it" || fail "skopeo admits it under key two"
expect_status 0 "rt pull under key one admits it" -- "$RT" pull --policy "$T/key1.json" --ca-file "$REG_CA" "$REG/test/signed:v1" s1
expect_match "$("$RT" inspect s1)" "\"signer\":\"$FPR1\"" "... signed by key one"
expect_status 125 "rt pull under key two refuses it" -- "$RT" pull --policy "$T/key2.json" --ca-file "$REG_CA" "$REG/test/signed:v1" s2
expect_match "$ERR" "signed by a key not given" "... saying why"

# Podman, rootless, reads the same store through its own registries.d.
rootless_podman
mkdir -p "$POD_HOME/.config/containers" && cp -r "$RD" "$POD_HOME/.config/containers/"
podjudge() {
  pod pull -q --signature-policy "$T/$1.json" --cert-dir "$REG_CERTS" --creds "$creds" "$REG/$2" >/dev/null 2>"$T/pod.err"
}
if pod info >/dev/null 2>"$T/pod.err"; then
  podjudge key1 test/signed:v1 && pass "podman pull under key one admits it" || fail "podman refuses: $(cat "$T/pod.err")"
  ! podjudge key2 test/signed:v1 && pass "podman pull under key two refuses it" || fail "podman admits it under key two"
else
  echo "note: podman does not run here as $(id -un): $(head -c 300 "$T/pod.err")"
fi

# --- a second push of the same image: another signature, the first kept --------------
cp "$sig" "$T/sig1.keep"
expect_status 0 "the same image pushed and signed again" -- "$RT" push --ca-file "$REG_CA" --sign-by "$FPR1" "$IMG" "$REG/test/signed:v1"
expect_eq "$(digest_of test/signed:v1)" "$d" "... the same manifest"
[ -f "$SIGS/test/signed@sha256=$d/signature-2" ] && cmp -s "$sig" "$T/sig1.keep" &&
  pass "... its signature added as signature-2, signature-1 kept" || fail "signatures: $(ls "$SIGS/test/signed@sha256=$d")"
skopeo_judges key1 test/signed:v1 && pass "... skopeo still admits it" || fail "skopeo refuses: $(cat "$T/skopeo.err")"
# Key two signs it too: one of the signatures is by key two, which
# key two's policy then accepts.
expect_status 0 "key two signs it as well" -- "$RT" push --ca-file "$REG_CA" --sign-by two@rt.test "$IMG" "$REG/test/signed:v1"
[ -f "$SIGS/test/signed@sha256=$d/signature-3" ] && pass "... as signature-3" || fail "no signature-3"
skopeo_judges key2 test/signed:v1 && pass "... and skopeo under key two admits it now" || fail "skopeo: $(cat "$T/skopeo.err")"
expect_status 0 "... and rt pull" -- "$RT" pull --policy "$T/key2.json" --ca-file "$REG_CA" "$REG/test/signed:v1" s3

# --- passphrases, key files, staging -------------------------------------------------
expect_status 0 "a protected key with --sign-passphrase-file" -- \
  "$RT" push --ca-file "$REG_CA" --sign-by "$FPR3" --sign-passphrase-file "$T/pass3" "$IMG" "$REG/test/three:v1"
[ -f "$SIGS/test/three@sha256=$(digest_of test/three:v1)/signature-1" ] && pass "... signed" || fail "no signature"
gpg --batch --pinentry-mode loopback --passphrase 'pass three' --export-secret-keys --armor "$FPR3" >"$T/three.key"
chmod 600 "$T/three.key"
expect_status 125 "a key file without its passphrase (no terminal)" -- \
  setsid -w "$RT" push --ca-file "$REG_CA" --sign-by-key "$T/three.key" "$IMG" "$REG/test/keyfile:v1"
expect_match "$ERR" "RT_SIGN_PASSPHRASE" "... asks for RT_SIGN_PASSPHRASE"
expect_status 0 "a key file with RT_SIGN_PASSPHRASE" -- env RT_SIGN_PASSPHRASE='pass three' \
  "$RT" push --ca-file "$REG_CA" --sign-by-key "$T/three.key" "$IMG" "$REG/test/keyfile:v1"
kd=$(digest_of test/keyfile:v1)
gpg --batch --verify "$SIGS/test/keyfile@sha256=$kd/signature-1" 2>"$T/v.err" && grep -q "$FPR3" "$T/v.err" &&
  pass "... signed by the file's key" || fail "gpg --verify: $(cat "$T/v.err")"
expect_status 0 "a staging store takes the writes" -- \
  "$RT" push --ca-file "$REG_CA" --sign-by "$FPR1" "$IMG" "$REG/test/staged:v1"
sd=$(digest_of test/staged:v1)
[ -f "$STAGE/test/staged@sha256=$sd/signature-1" ] && [ ! -e "$SIGS/test/staged@sha256=$sd" ] &&
  pass "... signature-1 in lookaside-staging, not in lookaside" || fail "staging: $(find "$STAGE" "$SIGS" -path '*staged*')"
! skopeo_judges key1 test/staged:v1 && pass "... unpublished, skopeo refuses it" || fail "skopeo admits an unpublished one"
mkdir -p "$SIGS/test" && cp -r "$STAGE/test/staged@sha256=$sd" "$SIGS/test/"
skopeo_judges key1 test/staged:v1 && pass "... published, skopeo admits it" || fail "skopeo: $(cat "$T/skopeo.err")"

# --- rt build --push --sign-by ------------------------------------------------------
mkdir -p "$T/ctx" && printf 'FROM %s\nENV BUILT=1\n' "$IMG" >"$T/ctx/Dockerfile"
expect_status 125 "rt build --sign-by without --push" -- "$RT" build -q --from-host --sign-by "$FPR1" -t b0 "$T/ctx"
expect_match "$ERR" "need --push" "... refused"
expect_status 0 "rt build --push --sign-by" -- env RT_CA_FILE="$REG_CA" \
  "$RT" build -q --from-host -t b1 --push "$REG/test/built:v1" --sign-by "$FPR1" "$T/ctx"
skopeo_judges key1 test/built:v1 && pass "... skopeo under key one admits what it pushed" || fail "skopeo: $(cat "$T/skopeo.err")"
