#!/bin/bash
# rt doctor: every check passes on this test machine; a node where one fails
# (here /dev/fuse unusable, a store another user could replace) gets ✘, the
# fix, and a non-zero exit; --json says the same. Where AppArmor restricts
# user namespaces, the first check says so, and names rt's profile.
. "$(dirname "$0")/lib.sh"
export RT_STORAGE="$T/store"
out=$("$RT" doctor) || fail "rt doctor failed on the test machine: $out"
for check in "user namespaces" "/dev/fuse" "overlayfs in a user namespace" "overlay images" openat2 "mount API" "root emulation \(--seccomp\)" \
  store "launchers and MPI" \
  "NVIDIA GPUs" InfiniBand "site configuration"; do
  expect_match "$out" "✔ $check: " "$check is checked and passes"
done
[ ! -e "$RT_STORAGE" ] && pass "doctor creates no store" || fail "doctor made $RT_STORAGE"
"$RT" doctor --json | python3 -c '
import json, sys
checks = json.load(sys.stdin)
assert len(checks) == 12 and all(c["status"] == "ok" for c in checks), checks
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

# Where AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and
# later; here the sysctl is read from a file of the test's through
# RT_TEST_APPARMOR_SYSCTL), the check says so and what it finds of rt's
# profile. Where they then fail (the kernel refuses them to a chrooted
# process with EPERM, as the restriction does: doctor runs chrooted to a
# bind mount of / in a namespace of the test's own), the fix is loading
# the profile, or the sysctl.
echo 1 >"$T/restricted"
echo 0 >"$T/unrestricted"
chrooted() { unshare -Urm sh -c 'mkdir -p "$1" && mount --rbind / "$1" && exec chroot "$@"' sh "$T/chroot" "$@"; }
expect_status 0 "user namespaces that work where AppArmor restricts them pass" -- \
  env RT_TEST_APPARMOR_SYSCTL="$T/restricted" "$RT" doctor
expect_match "$(grep '^✔ user namespaces: ' <<<"$OUT")" \
  "; AppArmor restricts unprivileged user namespaces \(kernel.apparmor_restrict_unprivileged_userns=1\); rt's profile /etc/apparmor.d/rt is (not )?installed" \
  "the check names AppArmor's restriction and rt's profile"
expect_status 1 "user namespaces refused where AppArmor restricts them fail the check" -- \
  chrooted env RT_TEST_APPARMOR_SYSCTL="$T/restricted" "$RT" doctor
expect_match "$(grep -A1 '^✘ user namespaces: ' <<<"$OUT")" \
  "unshare\(CLONE_NEWUSER\): Operation not permitted; AppArmor restricts unprivileged user namespaces .*
    fix: ask the administrator to (load|install) rt's AppArmor profile.*: apparmor_parser -r /etc/apparmor.d/rt; or to lift the restriction: sysctl kernel.apparmor_restrict_unprivileged_userns=0$" \
  "it names the cause, and loading rt's profile or the sysctl as the fix"
expect_status 1 "refused where AppArmor does not restrict them" -- \
  chrooted env RT_TEST_APPARMOR_SYSCTL="$T/unrestricted" "$RT" doctor
expect_eq "$(grep -A1 '^✘ user namespaces: ' <<<"$OUT" | tail -1)" \
  "    fix: ask the administrator to allow unprivileged user namespaces" "the fix is the general one"
[[ "$OUT" != *AppArmor* ]] || fail "AppArmor named where the sysctl does not restrict: $OUT"
pass "and AppArmor is not named"
