#!/bin/bash
# rt pull under the containers tools' trust policy (containers-policy.json,
# registries.d), against a real registry (Debian's docker-registry, TLS,
# basic auth) and images signed by skopeo (GPG simple signing, signatures
# in a lookaside directory): what a policy admits and refuses, why, that a
# refusal stores nothing, and that skopeo's verdict under the same policy
# is the same.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
command -v skopeo >/dev/null || skip "skopeo missing"
command -v gpg >/dev/null || skip "gpg missing"
OCI="python3 $RT_SOURCE_DIR/test/integration/ocitool.py"
export RT_STORAGE="$T/store"
export HOME="$T/home" && mkdir -p "$HOME"
L="$T/layers" && mkdir -p "$L"

# Two images: A (signed as it is pushed) and B (pushed over A's tag later).
tar -C "$IMG" -czf "$L/base.tar.gz" .
$OCI tar "$L/b.tar" file:b/x:0644:b && gzip "$L/b.tar"
$OCI layout "$T/a" --tag v1 --env IMAGE=A "$L/base.tar.gz" >/dev/null
$OCI layout "$T/b" --tag v1 --env IMAGE=B "$L/base.tar.gz" "$L/b.tar.gz" >/dev/null

start_registry "$T/reg" basic
creds="$REG_USER:$REG_PASS"
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"

# Two signing keys in a private GnuPG home.
export GNUPGHOME="$T/gnupg" && mkdir -m 700 "$GNUPGHOME"
for who in one two; do
  gpg --batch --quiet --passphrase '' --quick-gen-key "rt test $who <$who@rt.test>" rsa2048 sign never 2>/dev/null
  gpg --batch --export --armor "$who@rt.test" >"$T/$who.asc"
done
fpr() { gpg --batch --with-colons --list-keys "$1@rt.test" | awk -F: '/^fpr/ { print $10; exit }'; }
FPR1=$(fpr one) FPR2=$(fpr two)
[ -n "$FPR1" ] && [ -n "$FPR2" ] || fail "gpg made no keys"

# Signatures live in a lookaside directory that registries.d names, for rt
# (the user's registries.d) and skopeo (--registries.d) alike.
SIGS="$T/sigs"
RD="$HOME/.config/containers/registries.d" && mkdir -p "$RD"
printf 'docker:\n  %s:\n    lookaside: file://%s\n' "$REG" "$SIGS" >"$RD/test.yaml"
printf '{"default": [{"type": "insecureAcceptAnything"}]}\n' >"$T/accept.json"
sk() { skopeo --policy "$T/accept.json" --registries.d "$RD" "$@"; }
# put LAYOUT REPO:TAG [FPR]: pushed, signed by FPR when given.
put() {
  sk copy -q --dest-cert-dir "$REG_CERTS" --dest-creds "$creds" ${3:+--sign-by "$3"} "oci:$1:v1" \
    "docker://$REG/$2" 2>"$T/put.err" || fail "skopeo copy to $2: $(cat "$T/put.err")"
}
digest_of() { sk inspect --raw --cert-dir "$REG_CERTS" --creds "$creds" "docker://$REG/$1" | sha256sum | cut -d' ' -f1; }

put "$T/a" test/signed:v1 "$FPR1"
ls "$SIGS"/test/signed@sha256=*/signature-1 >/dev/null 2>&1 || fail "skopeo wrote no signature into $SIGS"
pass "skopeo signed test/signed:v1 by key one into the lookaside directory"
put "$T/a" test/unsigned:v1
put "$T/a" test/other:v1
# The signed image under another tag and another repository: skopeo copies
# its signature along, which still names test/signed:v1.
sk copy -q --src-cert-dir "$REG_CERTS" --src-creds "$creds" --dest-cert-dir "$REG_CERTS" --dest-creds "$creds" \
  "docker://$REG/test/signed:v1" "docker://$REG/test/signed:v2"
sk copy -q --src-cert-dir "$REG_CERTS" --src-creds "$creds" --dest-cert-dir "$REG_CERTS" --dest-creds "$creds" \
  "docker://$REG/test/signed:v1" "docker://$REG/test/copied:v1"
ls "$SIGS"/test/copied@sha256=*/signature-1 >/dev/null 2>&1 || fail "skopeo copied no signature along"
# Tampered: A signed under test/tamper:v1, then B pushed over the tag with
# A's signature put where B's would be (a registry that swaps the image).
put "$T/a" test/tamper:v1 "$FPR1"
a_digest=$(digest_of test/tamper:v1)
put "$T/b" test/tamper:v1
b_digest=$(digest_of test/tamper:v1)
[ "$a_digest" != "$b_digest" ] || fail "B has A's manifest digest"
mkdir -p "$SIGS/test/tamper@sha256=$b_digest"
cp "$SIGS/test/tamper@sha256=$a_digest/signature-1" "$SIGS/test/tamper@sha256=$b_digest/"

# policy NAME JSON-OF-DOCKER-SCOPES [DEFAULT]: $T/NAME.json.
policy() {
  printf '{"default": [%s], "transports": {"docker": %s}}\n' "${3:-{\"type\": \"reject\"\}}" "$2" >"$T/$1.json"
}
by() { printf '{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "%s"%s}' "$T/$1.asc" "${2:+, \"signedIdentity\": $2}"; }
blobs() { { find "$RT_STORAGE" -path '*/blobs/*' -type f 2>/dev/null || true; } | wc -l; }
# judge VERDICT POLICY REPO:TAG WHAT [PATTERN]: rt pull and skopeo copy
# under the same policy; both admit (0) or both refuse, rt saying PATTERN
# and storing nothing.
judge() {
  local verdict=$1 p=$T/$2.json ref=$3 what=$4 pattern=${5:-} before skopeo_rc=0 name
  name=n$RANDOM
  before=$(blobs)
  if [ "$verdict" = admit ]; then
    expect_status 0 "$what: rt pull admits it" -- "$RT" pull --policy "$p" --ca-file "$REG_CA" "$REG/$ref" "$name"
    "$RT" images | grep -q "^$name " || "$RT" images | grep -q "$name" || fail "$what: $name is not in the store"
  else
    expect_status 125 "$what: rt pull refuses it" -- "$RT" pull --policy "$p" --ca-file "$REG_CA" "$REG/$ref" "$name"
    expect_match "$ERR" "$REG/$ref" "... the refusal names the image"
    [ -z "$pattern" ] || expect_match "$ERR" "$pattern" "... and says why ($pattern)"
    echo "   $ERR" | head -1
    expect_eq "$(blobs)" "$before" "... no blob was stored"
    ! "$RT" images | grep -q "$name" || fail "$what: the refused image is in the store"
  fi
  rm -rf "$T/copy"
  skopeo --policy "$p" --registries.d "$RD" copy -q --src-cert-dir "$REG_CERTS" --src-creds "$creds" \
    "docker://$REG/$ref" "dir:$T/copy" >/dev/null 2>"$T/skopeo.err" || skopeo_rc=$?
  if [ "$verdict" = admit ]; then
    [ "$skopeo_rc" = 0 ] || fail "$what: skopeo refuses what rt admitted: $(cat "$T/skopeo.err")"
  else
    [ "$skopeo_rc" != 0 ] || fail "$what: skopeo admits what rt refused"
  fi
  pass "$what: skopeo's verdict is the same"
}

# --- one key, the other, reject ---------------------------------------------
policy key1 "{\"$REG/test\": [$(by one)]}"
policy key2 "{\"$REG/test\": [$(by two)]}"
policy reject "{}"
judge admit key1 test/signed:v1 "signed by key one, policy wants key one"
"$RT" pull -q --policy "$T/key1.json" --ca-file "$REG_CA" "$REG/test/signed:v1" kept
info=$("$RT" inspect kept)
expect_match "$info" "\"signer\":\"$FPR1\"" "rt inspect shows the signer's fingerprint"
expect_match "$info" "\"manifest_digest\":\"sha256:$(digest_of test/signed:v1)\"" "... the digest judged"
expect_match "$info" "\"requirement\":\"signedBy \(GPGKeys from \`$T/one.asc\`\)\"" "... and the requirement"
judge refuse key2 test/signed:v1 "signed by key one, policy wants key two" "signed by a key not given"
expect_match "$ERR" "requirement signedBy" "... and names the requirement"
expect_match "$ERR" "$T/key2.json" "... and the policy file"
judge refuse reject test/signed:v1 "default reject" "rejected by policy"

# --- the most specific scope applies ----------------------------------------
policy scopes "{\"$REG/test/other\": [{\"type\": \"insecureAcceptAnything\"}], \"$REG/test/signed\": [$(by one)]}"
judge admit scopes test/other:v1 "an unsigned image whose repository's scope accepts anything"
judge refuse scopes test/unsigned:v1 "an unsigned image under default reject" "rejected by policy"
policy wild "{\"*.0.1\": [{\"type\": \"insecureAcceptAnything\"}], \"$REG/test/unsigned:v1\": [$(by one)]}"
judge admit wild test/other:v1 "a *.DOMAIN scope of the registry's host"
judge refuse wild test/unsigned:v1 "a tag's own scope over the wildcard" "no signature"

# --- identity, missing signatures, tampering ----------------------------------
judge refuse key1 test/signed:v2 "A's signature under another tag" "identity mismatch"
judge refuse key1 test/copied:v1 "A's signature in another repository" "identity mismatch"
policy repo "{\"$REG/test\": [$(by one '{"type": "matchRepository"}')]}"
judge admit repo test/signed:v2 "another tag of the signed repository under matchRepository"
policy exact "{\"$REG/test\": [$(by one "{\"type\": \"exactReference\", \"dockerReference\": \"$REG/test/signed:v1\"}")]}"
judge admit exact test/copied:v1 "a copy under exactReference naming the signed reference"
judge admit key1 "test/signed@sha256:$(digest_of test/signed:v1)" "the signed image by digest"
judge refuse key1 test/unsigned:v1 "an unsigned image" "no signature"
judge refuse key1 test/tamper:v1 "another manifest under the signed tag, with the signature moved over" "digest mismatch"
rm -r "$SIGS/test/tamper@sha256=$b_digest"
judge refuse key1 test/tamper:v1 "another manifest under the signed tag" "no signature"
sig=$(ls "$SIGS"/test/signed@sha256=*/signature-1)
cp "$sig" "$T/sig.keep"
python3 - "$sig" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 1
open(sys.argv[1], "wb").write(bytes(b))
PY
judge refuse key1 test/signed:v1 "a signature changed by one bit" "signature-1: "
cp "$T/sig.keep" "$sig"

# --- the policy's location, what rt does not know --------------------------------
mkdir -p "$HOME/.config/containers"
cp "$T/reject.json" "$HOME/.config/containers/policy.json"
expect_status 125 "the user's ~/.config/containers/policy.json applies without --policy" -- \
  "$RT" pull --ca-file "$REG_CA" "$REG/test/signed:v1" n-home
expect_match "$ERR" "$HOME/.config/containers/policy.json" "... and is named"
cp "$T/key1.json" "$HOME/.config/containers/policy.json"
expect_status 0 "... and admits what it admits" -- "$RT" pull --ca-file "$REG_CA" "$REG/test/signed:v1" n-home
# rt exec of a reference not in the store pulls it, and rt build pulls its
# FROM: both under the same policy.
cp "$T/reject.json" "$HOME/.config/containers/policy.json"
before=$(blobs)
expect_status 125 "rt exec REF pulls under the user's policy" -- env RT_CA_FILE="$REG_CA" "$RT" exec "$REG/test/unsigned:v1" true
expect_match "$ERR" "rejected by policy" "... which refuses it"
mkdir -p "$T/bctx" && printf 'FROM %s\n' "$REG/test/unsigned:v1" >"$T/bctx/Dockerfile"
expect_status 125 "rt build's FROM is pulled under it too" -- env RT_CA_FILE="$REG_CA" "$RT" build -q -t n-build "$T/bctx"
expect_match "$ERR" "rejected by policy" "... which refuses it"
expect_eq "$(blobs)" "$before" "... and neither stored a blob"
rm "$HOME/.config/containers/policy.json"
policy unknown "{\"$REG/test\": [{\"type\": \"signedByX509\", \"keyPath\": \"$T/one.asc\"}]}" '{"type": "insecureAcceptAnything"}'
expect_status 125 "a requirement type rt does not know refuses" -- \
  "$RT" pull --policy "$T/unknown.json" --ca-file "$REG_CA" "$REG/test/signed:v1" n-unknown
expect_match "$ERR" "signedByX509.*not supported" "... saying so"
policy sigstore "{\"$REG/test\": [{\"type\": \"sigstoreSigned\", \"keyPath\": \"$T/one.asc\"}]}" '{"type": "insecureAcceptAnything"}'
expect_status 125 "sigstoreSigned with an OpenPGP key refuses" -- \
  "$RT" pull --policy "$T/sigstore.json" --ca-file "$REG_CA" "$REG/test/signed:v1" n-sigstore
expect_match "$ERR" "one.asc. is not a PEM public key" "... saying so"
printf '{"default": [{"type": "signedBy", "keyType": "GPGKeys"}]}' >"$T/broken.json"
expect_status 125 "a malformed policy refuses" -- "$RT" pull --policy "$T/broken.json" --ca-file "$REG_CA" "$REG/test/signed:v1" n-broken
expect_match "$ERR" "exactly one of keyPath" "... naming what is wrong"
expect_status 125 "a --policy that does not exist refuses" -- "$RT" pull --policy "$T/none.json" "$REG/test/signed:v1"

# --- oras:// ------------------------------------------------------------------
"$RT" convert -q "$IMG" "$T/img.sif"
"$RT" push -q --ca-file "$REG_CA" "$T/img.sif" "oras://$REG/test/sif:v1"
expect_status 125 "oras:// under reject" -- "$RT" pull --policy "$T/reject.json" --ca-file "$REG_CA" "oras://$REG/test/sif:v1" "$T/r.sif"
expect_match "$ERR" "rejected by policy" "... rejected"
expect_status 125 "oras:// under signedBy" -- "$RT" pull --policy "$T/key1.json" --ca-file "$REG_CA" "oras://$REG/test/sif:v1" "$T/s.sif"
expect_match "$ERR" "not supported for oras://" "... refused as not supported"
[ ! -e "$T/r.sif" ] && [ ! -e "$T/s.sif" ] && pass "... no file written" || fail "a refused SIF file was written"
policy sifok "{\"$REG/test/sif\": [{\"type\": \"insecureAcceptAnything\"}]}"
expect_status 0 "oras:// under insecureAcceptAnything" -- "$RT" pull --policy "$T/sifok.json" --ca-file "$REG_CA" "oras://$REG/test/sif:v1" "$T/ok.sif"

# --- an https:// lookaside ----------------------------------------------------------
# The signatures served over HTTPS (Python's server, the registry's
# certificate), as a site publishes its staging store: rt reads them with
# the registry's CA, until the first 404.
put "$T/a" test/web:v1 "$FPR1"
python3 - "$SIGS" "$T/reg/cert.pem" "$T/reg/key.pem" "$T/web.port" "$T/web.log" <<'PY' &
import functools, http.server, ssl, sys
d, cert, key, portfile, log = sys.argv[1:6]
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        with open(log, "a") as f:
            f.write("%s %s\n" % (self.path, args[1] if len(args) > 1 else ""))
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=d))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(portfile + ".tmp", "w").write(str(srv.server_address[1]))
import os; os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
PY
REG_PIDS+=($!)
for i in $(seq 100); do [ -s "$T/web.port" ] && break; sleep 0.05; done
printf 'docker:\n  %s/test/web:\n    lookaside: https://127.0.0.1:%s\n' "$REG" "$(cat "$T/web.port")" >"$RD/web.yaml"
expect_status 0 "signatures read from an https:// lookaside" -- \
  "$RT" pull -v --policy "$T/key1.json" --ca-file "$REG_CA" "$REG/test/web:v1" web1
expect_match "$ERR" "lookaside .https://127.0.0.1:" "... the lookaside registries.d names for it"
d=$(digest_of test/web:v1)
grep -q "^/test/web@sha256=$d/signature-1 200" "$T/web.log" && grep -q "^/test/web@sha256=$d/signature-2 404" "$T/web.log" &&
  pass "... signature-1 fetched over HTTPS, then the 404 of signature-2 ends the list" || fail "server log: $(cat "$T/web.log")"
expect_match "$("$RT" inspect web1)" "\"signer\":\"$FPR1\"" "... and the signer recorded"
