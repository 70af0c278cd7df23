#!/bin/bash
# rt doctor: every check passes on this test machine; a node where one fails
# (here /dev/fuse unusable, a store another user could replace) gets ✘, the
# fix, and a non-zero exit; --json says the same.
. "$(dirname "$0")/lib.sh"
export RT_STORAGE="$T/store"
out=$("$RT" doctor) || fail "rt doctor failed on the test machine: $out"
for check in "user namespaces" "/dev/fuse" "overlayfs in a user namespace" openat2 "root emulation \(--seccomp\)" \
  store "launchers and MPI" \
  "NVIDIA GPUs" InfiniBand "site configuration"; do
  expect_match "$out" "✔ $check: " "$check is checked and passes"
done
[ ! -e "$RT_STORAGE" ] && pass "doctor creates no store" || fail "doctor made $RT_STORAGE"
"$RT" doctor --json | python3 -c '
import json, sys
checks = json.load(sys.stdin)
assert len(checks) == 10 and all(c["status"] == "ok" for c in checks), checks
assert {"check", "status", "detail", "fix"} <= set(checks[0])' || fail "rt doctor --json"
pass "--json lists every check"

# /dev/fuse replaced by a file of mode 0600, in a namespace of our own.
: >"$T/fuse"
chmod 0600 "$T/fuse"
expect_status 1 "a node without a usable /dev/fuse fails the check" -- \
  unshare -Urm sh -c 'mount --bind "$1" /dev/fuse && exec "$2" doctor' sh "$T/fuse" "$RT"
expect_match "$OUT" "✘ /dev/fuse: missing, or not a device" "it says what is wrong"
expect_match "$OUT" "fix: ask the administrator: modprobe fuse" "and how to fix it"
expect_match "$OUT" "✔ user namespaces" "the other checks still run"

# A store in a directory others may write.
mkdir -m 0777 "$T/open"
expect_status 1 "a store others could replace fails the check" -- env RT_STORAGE="$T/open" "$RT" doctor
expect_match "$OUT" "✘ store: .*mode 0777" "it names the store and its mode"
out=$(RT_STORAGE="$T/open" "$RT" doctor --json || true)
expect_match "$out" '"status": "fail"' "--json says fail too"
