#!/bin/bash
# rt pull from a real registry (Debian's docker-registry) on 127.0.0.1 with
# TLS made here, basic auth, token auth; platform selection; verification;
# kill -9 in the middle; concurrent pulls.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
command -v skopeo >/dev/null || skip "skopeo missing"
OCI="python3 $RT_SOURCE_DIR/test/integration/ocitool.py"
export RT_STORAGE="$T/store"
export HOME="$T/home" && mkdir -p "$HOME"
L="$T/layers" && mkdir -p "$L"

tar -C "$IMG" -czf "$L/base.tar.gz" .
$OCI tar "$L/app.tar" file:app/hello:0755:hi dir:app/data
gzip -k "$L/app.tar"
$OCI layout "$T/bb" --tag v1 --env APP=1 --cmd /bin/rt-probe --cmd argv --cmd from-cmd "$L/base.tar.gz" "$L/app.tar.gz" >/dev/null

# --- basic auth over TLS -----------------------------------------------------
start_registry "$T/reg-basic" basic
push "$T/bb:v1" "test/bb:v1" "$REG_USER:$REG_PASS"

expect_status 125 "an untrusted certificate is refused" -- "$RT" pull "$REG/test/bb:v1"
expect_match "$ERR" "--ca-file" "the hint names --ca-file"
expect_status 125 "no credentials" -- "$RT" pull --ca-file "$REG_CA" "$REG/test/bb:v1"
expect_match "$ERR" "rt login" "the hint names rt login"
# rt login asks the registry first: wrong credentials are refused, not saved.
echo wrong >"$T/wrong"
expect_status 125 "rt login with a wrong password is refused" -- \
  "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG" <"$T/wrong"
expect_match "$ERR" "refused the credentials of .$REG_USER.*nothing was saved" "it says so"
[ ! -e "$HOME/.docker/config.json" ] || ! grep -q "$REG" "$HOME/.docker/config.json" && pass "nothing was saved" ||
  fail "refused credentials were saved"
"$RT" login -q --no-check -u "$REG_USER" --password-stdin "$REG" <"$T/wrong"
expect_status 125 "wrong credentials saved with --no-check fail at pull" -- "$RT" pull --ca-file "$REG_CA" "$REG/test/bb:v1"
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"
[ "$(stat -c %a "$HOME/.docker/config.json")" = 600 ] || fail "config.json is not private"
expect_status 0 "pull with saved credentials" -- "$RT" pull --ca-file "$REG_CA" "$REG/test/bb:v1"
if echo "$OUT$ERR" | grep -q "$REG_PASS"; then fail "the password was printed"; fi
pass "the password is never printed"
out=$("$RT" run "$REG/test/bb:v1")
expect_eq "$out" "[from-cmd]" "the pulled image runs with its CMD"
out=$("$RT" exec "$REG/test/bb:v1" sh -c 'echo $APP; cat /app/hello')
expect_eq "$out" $'1\nhi' "layers and Env of the pulled image"
out=$("$RT" images)
expect_match "$out" "$REG/test/bb:v1" "rt images lists it"
expect_eq "$(echo "$out" | awk '{print index($0, " " $2 " ")}' | sort -u | wc -l)" 1 "its columns line up, long names included"
cfg=$("$RT" inspect "$REG/test/bb:v1" | sed -n 's/.*"config_digest": "sha256:\(.\{12\}\).*/\1/p')
expect_match "$out" "$REG/test/bb:v1 +$cfg " "the ID is the config digest's start"
"$RT" images --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[0]["manifest_digest"].startswith("sha256:")' ||
  fail "rt images --json"
pass "rt images --json"
expect_status 0 "a second pull finds it up to date" -- "$RT" pull --ca-file "$REG_CA" "$REG/test/bb:v1"
expect_match "$ERR" "up to date" "says so"
# rt logout removes those credentials and nothing else of the file (a
# copy of it, beside another registry's and Docker's credential helpers).
mkdir -p "$T/home2/.docker"
python3 - "$HOME/.docker/config.json" "$T/home2/.docker/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["auths"]["https://other.example.org"] = {"auth": "b3RoZXI6cHc="}
c["credHelpers"] = {"gcr.io": "gcloud"}
json.dump(c, open(sys.argv[2], "w"))
PY
auths() { python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); print(" ".join(sorted(c["auths"])), c["credHelpers"])' "$T/home2/.docker/config.json"; }
expect_status 0 "rt logout REGISTRY" -- env HOME="$T/home2" "$RT" logout "$REG"
expect_eq "$OUT" "removed credentials for $REG" "says which"
expect_eq "$(auths)" "https://other.example.org {'gcr.io': 'gcloud'}" "only that registry's credentials are gone"
expect_eq "$(stat -c %a "$T/home2/.docker/config.json")" 600 "the file stays private"
expect_status 125 "a pull after rt logout" -- \
  env HOME="$T/home2" RT_STORAGE="$T/store2" "$RT" pull -q --ca-file "$REG_CA" "$REG/test/bb:v1"
expect_match "$ERR" "rt login" "has no credentials"
expect_status 125 "rt logout of a registry with none" -- env HOME="$T/home2" "$RT" logout "$REG"
expect_match "$ERR" "no credentials for .$REG. in .$T/home2/.docker/config.json." "names the registry and the file"
expect_status 0 "rt logout --all" -- env HOME="$T/home2" "$RT" logout --all
expect_eq "$OUT" "removed credentials for https://other.example.org" "says which"
expect_eq "$(auths)" " {'gcr.io': 'gcloud'}" "every registry's credentials are gone, the helpers kept"
expect_status 125 "rt logout with neither a registry nor --all" -- "$RT" logout
expect_match "$ERR" "needs a REGISTRY or --all" "is refused"
rm -rf "$T/home2" "$T/store2"
expect_status 0 "--insecure skips verification" -- "$RT" pull -q --insecure "$REG/test/bb:v1" insecure-copy
digest=$("$RT" inspect "$REG/test/bb:v1" | sed -n 's/.*"manifest_digest": "\(.*\)".*/\1/p')
expect_status 0 "pull by digest" -- "$RT" pull -q --ca-file "$REG_CA" "$REG/test/bb@$digest" bydigest
# Kept in the store as one SquashFS file: the same image, served from it.
expect_status 0 "pull --format sqfs" -- "$RT" pull -q --format sqfs --ca-file "$REG_CA" "$REG/test/bb:v1" bbsq
[ -f "$RT_STORAGE/images/bbsq/image.sqfs" ] && [ ! -e "$RT_STORAGE/images/bbsq/rootfs" ] &&
  pass "the store keeps it as image.sqfs, with no tree" || fail "no image.sqfs in the store"
expect_eq "$("$RT" exec bbsq sh -c 'echo $APP; cat /app/hello')" $'1\nhi' "it runs with its layers and Env"
expect_status 0 "pulling it again as a tree replaces it" -- "$RT" pull -q --format dir --ca-file "$REG_CA" "$REG/test/bb:v1" bbsq
[ -d "$RT_STORAGE/images/bbsq/rootfs" ] && [ ! -e "$RT_STORAGE/images/bbsq/image.sqfs" ] && pass "now a tree" || fail "not replaced"
expect_status 125 "an unknown store format" -- env RT_STORE_FORMAT=zip "$RT" pull -q --ca-file "$REG_CA" "$REG/test/bb:v1" x
expect_match "$ERR" "RT_STORE_FORMAT" "names the variable"
expect_status 125 "pull of a missing tag" -- "$RT" pull --ca-file "$REG_CA" "$REG/test/bb:nope"
expect_match "$ERR" "not found" "says so"

# Multi-platform index: the host's platform is chosen; a missing one lists what exists.
$OCI layout "$T/arm" --platform linux/arm64 "$L/app.tar.gz" >/dev/null
$OCI layout "$T/amd" --platform linux/amd64 "$L/base.tar.gz" "$L/app.tar.gz" >/dev/null
$OCI index "$T/multi" multi "$T/amd" "$T/arm" >/dev/null
push "$T/multi:multi" "test/multi:v1" "$REG_USER:$REG_PASS"
if [ "$(uname -m)" = x86_64 ]; then
  expect_status 0 "the host's platform is picked from an index" -- "$RT" pull -q --ca-file "$REG_CA" "$REG/test/multi:v1"
  "$RT" exec "$REG/test/multi:v1" test -x /bin/sh || fail "wrong platform pulled"
fi
expect_status 125 "a platform the index lacks" -- "$RT" pull --ca-file "$REG_CA" --platform linux/s390x "$REG/test/multi:v1"
expect_match "$ERR" "linux/amd64.*linux/arm64|linux/arm64.*linux/amd64" "the error lists the platforms"

# A corrupted blob in the registry: digest mismatch, nothing stored.
$OCI tar "$L/c.tar" file:c/x:0644:original
gzip -k "$L/c.tar"
$OCI layout "$T/corrupt" --tag v1 "$L/base.tar.gz" "$L/c.tar.gz" >/dev/null
push "$T/corrupt:v1" "test/corrupt:v1" "$REG_USER:$REG_PASS"
blob=$(python3 -c "import json,sys; m=json.load(open('$T/corrupt/index.json'))['manifests'][0]['digest'][7:]; print(json.load(open('$T/corrupt/blobs/sha256/'+m))['layers'][1]['digest'][7:])")
data=$(find "$T/reg-basic/data" -path "*blobs/sha256/${blob:0:2}/$blob/data")
[ -f "$data" ] || fail "cannot find the blob in the registry's storage"
printf 'X' | dd of="$data" bs=1 seek=20 conv=notrunc 2>/dev/null
expect_status 125 "a corrupted layer is refused" -- "$RT" pull --ca-file "$REG_CA" "$REG/test/corrupt:v1"
expect_match "$ERR" "digest mismatch" "says why"
expect_status 125 "and nothing was stored" -- "$RT" exec "$REG/test/corrupt:v1" true
[ ! -e "$RT_STORAGE/blobs/sha256/$blob" ] || fail "a bad blob entered the cache"
pass "no bad blob in the cache"

# kill -9 at several points, then a clean pull; debris cleared.
$OCI tar "$L/big.tar" big:big/zeros:60000000
head -c 20000000 /dev/urandom >"$L/rand" && $OCI tar "$L/big2.tar" file:big/r:0644:x
python3 - "$L/big2.tar" "$L/rand" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    t.add(sys.argv[2], arcname="big/random")
PY
gzip -1 -k "$L/big.tar" "$L/big2.tar"
$OCI layout "$T/big" --tag v1 "$L/base.tar.gz" "$L/big.tar.gz" "$L/big2.tar.gz" >/dev/null
push "$T/big:v1" "test/big:v1" "$REG_USER:$REG_PASS"
for delay in 0.05 0.2 0.4 0.8; do
  "$RT" pull -q --ca-file "$REG_CA" "$REG/test/big:v1" killed &
  pid=$!
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if "$RT" exec killed true 2>/dev/null; then
    "$RT" exec killed test -f /big/random || fail "a visible image is incomplete after kill at ${delay}s"
    "$RT" rm -q killed
  fi
done
pass "no partial image is ever visible"
expect_status 0 "pull after kills" -- "$RT" pull -q --ca-file "$REG_CA" "$REG/test/big:v1" killed
expect_eq "$("$RT" exec killed stat -c %s /big/random)" 20000000 "the image is complete"
expect_eq "$(ls "$RT_STORAGE/tmp")" "" "no debris left"

# Two pulls of one image into one store at once.
"$RT" rm -q killed
"$RT" pull -q --ca-file "$REG_CA" "$REG/test/big:v1" both >"$T/p1" 2>&1 &
p1=$!
"$RT" pull -q --ca-file "$REG_CA" "$REG/test/big:v1" both >"$T/p2" 2>&1 &
p2=$!
wait $p1 || fail "first concurrent pull failed: $(cat "$T/p1")"
wait $p2 || fail "second concurrent pull failed: $(cat "$T/p2")"
expect_eq "$("$RT" exec both stat -c %s /big/random)" 20000000 "both concurrent pulls succeed, one image"
expect_eq "$(ls "$RT_STORAGE/images" | grep -c '^both$')" 1 "one copy"

"$RT" rm -q both bydigest insecure-copy
freed=$("$RT" prune)
expect_match "$freed" "^removed 0 cached build steps, 0 RUN caches, [1-9][0-9]* unused blobs? \([0-9.]+ MB\), .*; freed [0-9.]+ MB" \
  "prune says what it removed and what it freed"
expect_match "$("$RT" prune)" "^removed 0 cached build steps, 0 RUN caches, 0 unused blobs \(0.0 MB\), 0 stale SquashFS records \(0.0 kB\), 0 pieces of interrupted work, 0 dead instances, 0 ended jobs' staged images; freed 0.0 MB" \
  "and that a second prune found nothing"

# --- token auth ----------------------------------------------------------------
start_registry "$T/reg-token" token
push "$T/bb:v1" "test/bb:v1" "$REG_USER:$REG_PASS"
rm -f "$HOME/.docker/config.json"
expect_status 125 "token auth without credentials" -- "$RT" pull --ca-file "$REG_CA" "$REG/test/bb:v1"
# The token service listens on another port of 127.0.0.1, which on a
# shared node may be anybody's: credentials go there only when listed.
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG" 2>"$T/err" &&
  fail "rt login sent the credentials to a token service on another port"
expect_match "$(cat "$T/err")" "not sending your credentials .*another port \(127.0.0.1:$REG_TOKEN_PORT\)" \
  "credentials are kept from a token service on another port of the registry's host"
export RT_AUTH_REALMS=127.0.0.1:$REG_TOKEN_PORT
echo wrong | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG" 2>"$T/err" &&
  fail "a wrong password was accepted by the token service"
expect_match "$(cat "$T/err")" "refused the credentials" "rt login checks them through the token service"
echo "$REG_PASS" | "$RT" login -q -u "$REG_USER" --password-stdin --ca-file "$REG_CA" "$REG"
expect_status 0 "token auth with credentials (RT_AUTH_REALMS lists the token service)" -- \
  "$RT" pull -q --ca-file "$REG_CA" "$REG/test/bb:v1"
unset RT_AUTH_REALMS
out=$("$RT" run "$REG/test/bb:v1")
expect_eq "$out" "[from-cmd]" "the image pulled with a bearer token runs"

# --- a flaky network: 503 and 429 on manifests, connections cut mid-blob -------
start_registry "$T/reg-open" open
push "$T/big:v1" "test/big:v1"

# --- pull on first use -----------------------------------------------------------
push "$T/bb:v1" "test/bb:v1"
export RT_CA_FILE=$REG_CA
expect_status 125 "--no-pull: a reference not in the store is an error" -- \
  env RT_STORAGE="$T/store-first" "$RT" exec --no-pull "$REG/test/bb:v1" true
expect_match "$ERR" "not found.*hint: rt pull" "and the hint says how to get it"
# Three ranks at once on one node: each runs, the image is stored once.
ranks=()
for i in 1 2 3; do
  RT_STORAGE="$T/store-first" "$RT" run "$REG/test/bb:v1" >"$T/first$i.out" 2>"$T/first$i.err" &
  ranks+=($!)
done
wait "${ranks[@]}"  # not the registries, which are jobs of this shell too
for i in 1 2 3; do
  expect_eq "$(cat "$T/first$i.out")" "[from-cmd]" "rank $i ran the image pulled on first use"
done
expect_match "$(cat "$T/first1.err")" "is not in the store: pulling it" "it says it pulls"
expect_eq "$(RT_STORAGE="$T/store-first" "$RT" images | grep -c "test/bb:v1")" 1 "one image in the store"
out=$(RT_STORAGE="$T/store-first" "$RT" run "docker://$REG/test/bb:v1" 2>"$T/err")
expect_eq "$out" "[from-cmd]" "docker://REF finds it"
[ -s "$T/err" ] && fail "a stored image was pulled again: $(cat "$T/err")"
pass "and pulls nothing once it is stored"
expect_status 125 "an image no registry has" -- env RT_STORAGE="$T/store-first" "$RT" exec "$REG/test/none:v1" true
expect_match "$ERR" "could not pull .*rt import FILE NAME" "says the pull failed and suggests rt import"
unset RT_CA_FILE
python3 "$RT_SOURCE_DIR/test/integration/flaky_proxy.py" "$T/pport" "$REG" "$REG_CA" 2>"$T/proxy.log" &
REG_PIDS+=($!)
wait_until 30 test -s "$T/pport" || true
expect_status 0 "pull through a flaky proxy" -- "$RT" pull --plain-http "127.0.0.1:$(cat "$T/pport")/test/big:v1" flaky
expect_match "$ERR" "resuming at byte [1-9]" "a cut download resumes where it stopped"
grep -q '" 503 ' "$T/proxy.log" && grep -q '" 429 ' "$T/proxy.log" || fail "the proxy did not answer 503/429"
grep -q '" 206 ' "$T/proxy.log" || fail "no ranged (206) request reached the proxy"
pass "429 and 503 are retried; the resumed blob is fetched with a Range request"
expect_eq "$("$RT" exec flaky stat -c %s /big/random)" 20000000 "the image pulled through the flaky proxy is complete"

# --- a misbehaving server: no ranges, too much, too slow ----------------------
proxy() {  # proxy MODE: a flaky_proxy.py in MODE; its port in $PORT
  python3 "$RT_SOURCE_DIR/test/integration/flaky_proxy.py" "$T/pport-$1" "$REG" "$REG_CA" "$1" 2>"$T/proxy-$1.log" &
  REG_PIDS+=($!)
  wait_until 30 test -s "$T/pport-$1" || true
  PORT=$(cat "$T/pport-$1")
}
proxy norange
# Each in a store of its own: the layers must come from the server.
expect_status 0 "pull from a server that ignores Range" -- \
  env RT_STORAGE="$T/store-norange" "$RT" pull --plain-http "127.0.0.1:$PORT/test/big:v1" norange
expect_match "$ERR" "cannot resume; restarting" "the blob restarts from its start, once"
expect_eq "$(RT_STORAGE="$T/store-norange" "$RT" exec norange stat -c %s /big/random)" 20000000 \
  "and the image is complete"
proxy long
expect_status 125 "a blob longer than its descriptor is refused" -- \
  env RT_STORAGE="$T/store-long" "$RT" pull --plain-http "127.0.0.1:$PORT/test/big:v1" long
expect_match "$ERR" "sends more than the [0-9]+ bytes the manifest declares" "the error says so"
[ -z "$(find "$T/store-long" -size +21M 2>/dev/null)" ] && pass "nothing past the declared size was kept" ||
  fail "a file over the blob's size is in the store"
proxy trickle
SECONDS=0
expect_status 125 "a blob trickling past its deadline is refused" -- \
  env RT_STORAGE="$T/store-slow" RT_PULL_TIMEOUT=2 RT_PULL_MIN_RATE=100000000 "$RT" pull --plain-http "127.0.0.1:$PORT/test/big:v1" slow
expect_match "$ERR" "too slow: [0-9]+ of [0-9]+ bytes in 2 s" "the error gives what came and the deadline"
[ "$SECONDS" -lt 30 ] && pass "it gives up at the deadline" || fail "the trickled pull took $SECONDS s"
