#!/bin/bash
# Sigstore key signatures, as registry attachments: skopeo 1.18 (Debian 13's,
# run in an rt container of the Debian 13 root) signs and rt pull judges
# under a policy's sigstoreSigned; rt push --sign-by-sigstore-private-key
# signs and skopeo judges; keys from rt key generate and skopeo
# generate-sigstore-key serve both. Tampering (a signature moved to another
# image or tag, a truncated attachment, an unknown key, none at all) is
# refused, naming the image, the requirement and the reason, and nothing
# is stored.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
[ -s "${RT_DEBIAN13_ROOTFS:-}" ] || skip "RT_DEBIAN13_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
tar -tf "$RT_DEBIAN13_ROOTFS" ./usr/bin/skopeo >/dev/null 2>&1 || skip "no skopeo in $RT_DEBIAN13_ROOTFS"
export RT_STORAGE="$T/store"
export HOME="$T/home" && mkdir -p "$HOME"
unset RT_SIGN_PASSPHRASE
cd "$T"

start_registry "$T/reg" basic
creds="$REG_USER:$REG_PASS"
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"
"$RT_IMAGE" import -q "$RT_DEBIAN13_ROOTFS" trixie
# Debian 13's skopeo, in a container (the registry is on the host's loopback).
RD="$HOME/.config/containers/registries.d" && mkdir -p "$RD"
cat >"$RD/test.yaml" <<YAML
docker:
  $REG:
    use-sigstore-attachments: true
  $REG/plain:
    lookaside: file://$T/sigs
YAML
printf '{"default": [{"type": "insecureAcceptAnything"}]}\n' >"$T/any.json"
sk() { "$RT" exec trixie skopeo --registries.d "$RD" "$@"; }
sk --version | grep -q "skopeo version 1\.\(1[0-9]\|[2-9][0-9]\)" || fail "no skopeo >= 1.10 in the Debian 13 root"
regtool() { python3 "$RT_SOURCE_DIR/test/integration/regtool.py" "$1" "$REG" "$REG_CA" "$creds" "${@:2}"; }
digest_of() { printf 'sha256:%s' "$(regtool get "${1%%:*}" "${1#*:}" | sha256sum | cut -d' ' -f1)"; }
stored() { "$RT" images 2>/dev/null | grep -q "^$1 " || [ -e "$RT_STORAGE/images/$1" ]; }
policy() { # policy NAME KEY [IDENTITY-JSON]: sigstoreSigned by KEY for $REG/test
  printf '{"default": [{"type": "reject"}], "transports": {"docker": {"%s/test": [{"type": "sigstoreSigned", "keyPath": "%s"%s}]}}}\n' \
    "$REG" "$T/$2" "${3:+, \"signedIdentity\": $3}" >"$T/$1.json"
}

# --- keys: skopeo's and rt's ---------------------------------------------------------
printf 'sk pass\n' >"$T/skpass" && printf 'rt pass\n' >"$T/rtpass" && printf 'wrong\n' >"$T/wrong"
sk generate-sigstore-key --output-prefix "$T/sk" --passphrase-file "$T/skpass" >/dev/null ||
  fail "skopeo generate-sigstore-key failed"
expect_status 0 "rt key generate makes a key pair" -- \
  "$RT" key generate --output-prefix "$T/rt" --passphrase-file "$T/rtpass"
[ "$(stat -c %a "$T/rt.private")" = 600 ] && pass "... the private key the user's alone" ||
  fail "rt.private has mode $(stat -c %a "$T/rt.private")"
expect_match "$(cat "$T/rt.pub")" "BEGIN PUBLIC KEY" "... the public key PEM"
expect_status 125 "rt key generate replaces no key" -- "$RT" key generate --output-prefix "$T/rt" --passphrase-file "$T/rtpass"
expect_match "$ERR" "rt.private. exists" "... naming it"
policy by-sk sk.pub && policy by-rt rt.pub
policy by-sk-repo sk.pub '{"type": "matchRepository"}'

# --- skopeo signs, rt judges -------------------------------------------------------------
expect_status 0 "rt push an unsigned image" -- "$RT" push --ca-file "$REG_CA" "$IMG" "$REG/test/plain:v1"
sk copy -q --policy "$T/any.json" --src-cert-dir "$REG_CERTS" --dest-cert-dir "$REG_CERTS" --src-creds "$creds" \
  --dest-creds "$creds" --sign-by-sigstore-private-key "$T/sk.private" --sign-passphrase-file "$T/skpass" \
  "docker://$REG/test/plain:v1" "docker://$REG/test/sk:v1" 2>"$T/sk.err" || fail "skopeo signing copy: $(cat "$T/sk.err")"
d=$(digest_of test/sk:v1)
regtool get test/sk "sha256-${d#sha256:}.sig" >"$T/att.json" 2>/dev/null &&
  pass "skopeo attached its signature as sha256-HEX.sig" || fail "no attachment for $d"
expect_status 0 "rt pull under skopeo's key admits it" -- \
  "$RT" pull -v --policy "$T/by-sk.json" --ca-file "$REG_CA" "$REG/test/sk:v1" sk1
expect_match "$ERR" "sigstore signature 1 of .* holds" "... the signature checked"
expect_match "$("$RT" inspect sk1)" "\"signer\":\"sigstore key .*sk.pub" "... and the signer recorded in the store"
expect_status 0 "... and a start of it needs no registry" -- "$RT" exec sk1 true

expect_status 125 "rt pull under rt's key refuses it" -- "$RT" pull --policy "$T/by-rt.json" --ca-file "$REG_CA" "$REG/test/sk:v1" bad1
expect_match "$ERR" "image .$REG/test/sk:v1. refused by policy" "... naming the image"
expect_match "$ERR" "sigstoreSigned \(keys from .*rt.pub" "... the requirement"
expect_match "$ERR" "not a valid signature by the key" "... and the reason"
! stored bad1 && pass "... and stores nothing" || fail "a refused pull stored bad1"

expect_status 125 "an unsigned image is refused" -- "$RT" pull --policy "$T/by-sk.json" --ca-file "$REG_CA" "$REG/test/plain:v1" bad2
expect_match "$ERR" "no sigstore signature .* attachment .sha256-" "... no attachment, saying so"
! stored bad2 && pass "... and stores nothing" || fail "stored bad2"

# The same manifest under another tag: the signature names sk:v1.
regtool get test/sk v1 >"$T/m.json" && regtool put test/sk copy "$T/m.json"
expect_status 125 "the signature under another tag (matchRepoDigestOrExact)" -- \
  "$RT" pull --policy "$T/by-sk.json" --ca-file "$REG_CA" "$REG/test/sk:copy" bad3
expect_match "$ERR" "identity mismatch: it signs .$REG/test/sk:v1." "... an identity mismatch"
! stored bad3 && pass "... and stores nothing" || fail "stored bad3"
expect_status 0 "... which matchRepository accepts" -- \
  "$RT" pull --policy "$T/by-sk-repo.json" --ca-file "$REG_CA" "$REG/test/sk:copy" ok3

# The attachment of sk:v1 put as that of another image.
make_image "$T/img2" && echo other >"$T/img2/marker"
expect_status 0 "another image in the repository" -- "$RT" push --ca-file "$REG_CA" "$T/img2" "$REG/test/sk:other"
d2=$(digest_of test/sk:other)
regtool put test/sk "sha256-${d2#sha256:}.sig" "$T/att.json"
expect_status 125 "a signature moved to another image is refused" -- \
  "$RT" pull --policy "$T/by-sk-repo.json" --ca-file "$REG_CA" "$REG/test/sk:other" bad4
expect_match "$ERR" "digest mismatch: it signs $d, the registry's manifest is $d2" "... a digest mismatch"
! stored bad4 && pass "... and stores nothing" || fail "stored bad4"

# sk:v1's own attachment truncated: the signature cut short, then the
# payload declared shorter than it is.
python3 - "$T/att.json" "$T/att-sig.json" "$T/att-size.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
l = m["layers"][0]
a = json.loads(json.dumps(m)); k = "dev.cosignproject.cosign/signature"
a["layers"][0]["annotations"][k] = l["annotations"][k][:40]
json.dump(a, open(sys.argv[2], "w"))
b = json.loads(json.dumps(m)); b["layers"][0]["size"] = l["size"] - 10
json.dump(b, open(sys.argv[3], "w"))
PY
regtool put test/sk "sha256-${d#sha256:}.sig" "$T/att-sig.json"
expect_status 125 "a truncated signature is refused" -- "$RT" pull --policy "$T/by-sk.json" --ca-file "$REG_CA" "$REG/test/sk:v1" bad5
expect_match "$ERR" "not a valid signature by the key" "... as no valid signature"
regtool put test/sk "sha256-${d#sha256:}.sig" "$T/att-size.json"
expect_status 125 "a payload shorter than declared is refused" -- "$RT" pull --policy "$T/by-sk.json" --ca-file "$REG_CA" "$REG/test/sk:v1" bad6
expect_match "$ERR" "its payload cannot be read: .*more than the [0-9]+ bytes the manifest declares" "... as unreadable"
! stored bad5 && ! stored bad6 && pass "... and neither stores anything" || fail "a truncated attachment stored an image"
regtool put test/sk "sha256-${d#sha256:}.sig" "$T/att.json"

# --- rt signs, skopeo judges -------------------------------------------------------------
expect_status 125 "a wrong passphrase refuses the push" -- "$RT" push --ca-file "$REG_CA" \
  --sign-by-sigstore-private-key "$T/rt.private" --sign-passphrase-file "$T/wrong" "$IMG" "$REG/test/rt:v1"
expect_match "$ERR" "wrong passphrase" "... saying so"
! regtool get test/rt v1 >/dev/null 2>&1 && pass "... before anything was pushed" || fail "a wrong passphrase pushed test/rt:v1"
cat >"$RD/noatt.yaml" <<YAML
docker:
  $REG/test/noatt:
    lookaside: file://$T/sigs
YAML
expect_status 125 "a registry without use-sigstore-attachments refuses the push" -- "$RT" push --ca-file "$REG_CA" \
  --sign-by-sigstore-private-key "$T/rt.private" --sign-passphrase-file "$T/rtpass" "$IMG" "$REG/test/noatt:v1"
expect_match "$ERR" "does not set use-sigstore-attachments" "... saying why"
! regtool get test/noatt v1 >/dev/null 2>&1 && pass "... before anything was pushed" || fail "test/noatt:v1 was pushed"
rm "$RD/noatt.yaml"

expect_status 0 "rt push --sign-by-sigstore-private-key" -- "$RT" push --ca-file "$REG_CA" \
  --sign-by-sigstore-private-key "$T/rt.private" --sign-passphrase-file "$T/rtpass" "$IMG" "$REG/test/rt:v1"
r=$(digest_of test/rt:v1)
expect_match "$ERR" "signed .*$REG/test/rt:v1.* attachment .sha256-${r#sha256:}.sig" "... attached as sha256-HEX.sig"
regtool get test/rt "sha256-${r#sha256:}.sig" >"$T/ratt.json"
python3 - "$T/ratt.json" "$REG" "$creds" "$REG_CA" "$REG/test/rt:v1" "$r" <<'PY' || fail "the attachment: $(cat "$T/ratt.json")"
import base64, json, ssl, sys, urllib.request
m = json.load(open(sys.argv[1]))
assert m["mediaType"] == "application/vnd.oci.image.manifest.v1+json", m
(l,) = m["layers"]
assert l["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json", l
assert l["annotations"]["dev.cosignproject.cosign/signature"], l
req = urllib.request.Request(f"https://{sys.argv[2]}/v2/test/rt/blobs/{l['digest']}")
req.add_header("Authorization", "Basic " + base64.b64encode(sys.argv[3].encode()).decode())
p = json.load(urllib.request.urlopen(req, context=ssl.create_default_context(cafile=sys.argv[4])))
c = p["critical"]
assert c == {"identity": {"docker-reference": sys.argv[5]}, "image": {"docker-manifest-digest": sys.argv[6]},
             "type": "cosign container image signature"}, p
assert p["optional"]["creator"].startswith("rt "), p
PY
pass "... a cosign simple-signing layer naming the reference and the digest"
skjudge() { # skjudge POLICY REPO:TAG: skopeo copy under the policy (0: admitted)
  rm -rf "$T/copy"
  sk copy -q --policy "$T/$1.json" --src-cert-dir "$REG_CERTS" --src-creds "$creds" "docker://$REG/$2" "dir:$T/copy" \
    >/dev/null 2>"$T/sk.err"
}
skjudge by-rt test/rt:v1 && pass "skopeo under rt's key admits it" || fail "skopeo refuses: $(cat "$T/sk.err")"
! skjudge by-sk test/rt:v1 && pass "skopeo under skopeo's key refuses it" || fail "skopeo admits it under the other key"
expect_status 0 "rt pull under rt's key admits it" -- "$RT" pull --policy "$T/by-rt.json" --ca-file "$REG_CA" "$REG/test/rt:v1" rt1

# A second signature, by skopeo's key, added to the attachment.
expect_status 0 "the same image signed again with skopeo's key" -- "$RT" push --ca-file "$REG_CA" \
  --sign-by-sigstore-private-key "$T/sk.private" --sign-passphrase-file "$T/skpass" "$IMG" "$REG/test/rt:v1"
expect_eq "$(digest_of test/rt:v1)" "$r" "... the same manifest"
expect_eq "$(regtool get test/rt "sha256-${r#sha256:}.sig" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["layers"]))')" 2 \
  "... its attachment holds both signatures"
skjudge by-sk test/rt:v1 && pass "... skopeo under skopeo's key admits it now" || fail "skopeo: $(cat "$T/sk.err")"
skjudge by-rt test/rt:v1 && pass "... and still under rt's" || fail "skopeo: $(cat "$T/sk.err")"
expect_status 0 "... and rt pull under skopeo's key" -- "$RT" pull --policy "$T/by-sk.json" --ca-file "$REG_CA" "$REG/test/rt:v1" rt2

# skopeo signs with the key rt made.
sk copy -q --policy "$T/any.json" --src-cert-dir "$REG_CERTS" --dest-cert-dir "$REG_CERTS" --src-creds "$creds" \
  --dest-creds "$creds" --sign-by-sigstore-private-key "$T/rt.private" --sign-passphrase-file "$T/rtpass" \
  "docker://$REG/test/plain:v1" "docker://$REG/test/rtkey:v1" 2>"$T/sk.err" &&
  pass "skopeo signs with rt key generate's key" || fail "skopeo cannot use rt's key: $(cat "$T/sk.err")"
expect_status 0 "... which rt pull admits under rt's key" -- \
  "$RT" pull --policy "$T/by-rt.json" --ca-file "$REG_CA" "$REG/test/rtkey:v1" rt3

# rt exec of a reference pulls it under the same policy.
cp "$T/by-rt.json" "$HOME/.config/containers/policy.json"
expect_status 125 "rt exec REF refuses what the user's policy refuses" -- env RT_CA_FILE="$REG_CA" "$RT" exec "$REG/test/sk:v1" true
expect_match "$ERR" "refused by policy .*policy.json" "... naming the policy"
rm "$HOME/.config/containers/policy.json"
expect_status 125 "rt exec --policy judges the pull on first use" -- \
  env RT_CA_FILE="$REG_CA" "$RT" exec --policy "$T/by-rt.json" "$REG/test/sk:v1" true
expect_match "$ERR" "refused by policy .*by-rt.json" "... by that policy"
printf 'FROM %s/test/sk:v1\nRUN true\n' "$REG" >"$T/Dockerfile"
expect_status 125 "rt build --policy judges the FROM image pulled" -- \
  env RT_CA_FILE="$REG_CA" "$RT" build --policy "$T/by-rt.json" -t built -f "$T/Dockerfile" "$T"
expect_match "$ERR" "refused by policy .*by-rt.json" "... by that policy"
! stored built && pass "... and builds nothing" || fail "rt build stored an image from a refused base"
printf 'image.policy = %s\n' "$T/by-rt.json" >"$T/rt.conf"
expect_status 125 "the site configuration's image.policy stands in for /etc/containers/policy.json" -- \
  env RT_CONF="$T/rt.conf" RT_CA_FILE="$REG_CA" "$RT" pull "$REG/test/sk:v1" site1
expect_match "$ERR" "refused by policy .*by-rt.json" "... naming it"
expect_status 0 "... and admits what it admits" -- env RT_CONF="$T/rt.conf" RT_CA_FILE="$REG_CA" "$RT" pull "$REG/test/rt:v1" site2
cp "$T/by-sk.json" "$HOME/.config/containers/policy.json"
expect_status 0 "... the user's own policy file comes first" -- \
  env RT_CONF="$T/rt.conf" RT_CA_FILE="$REG_CA" "$RT" pull "$REG/test/sk:v1" site3
rm "$HOME/.config/containers/policy.json"
printf 'image.policy = %s\n' "$T/missing.json" >"$T/rt.conf"
expect_status 125 "a site policy that is missing refuses, not admits" -- \
  env RT_CONF="$T/rt.conf" RT_CA_FILE="$REG_CA" "$RT" pull "$REG/test/sk:v1" site4
expect_match "$ERR" "missing.json.*image.policy.*does not exist" "... saying so"
