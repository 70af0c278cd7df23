#!/bin/bash
# Security claims, checked from inside the container.
. "$(dirname "$0")/lib.sh"

out=$("$RT" exec "$IMG" rt-probe nnp)
expect_eq "$out" 1 "no_new_privs is set"
out=$("$RT" exec "$IMG" rt-probe mknod /tmp/rt-test-node-$$)
expect_eq "$out" "EPERM" "mknod of a device fails"
rm -f /tmp/rt-test-node-$$
out=$("$RT" exec "$IMG" rt-probe setuid 0)
expect_match "$out" "^(EPERM|EINVAL)$" "setuid(0) fails"
out=$("$RT" exec --root "$IMG" rt-probe setuid 1)
expect_match "$out" "^(EPERM|EINVAL)$" "even as mapped root, no other id exists"

# Only stdio and what the caller passed are open in the program: rt adds
# no fd of its own (the harness may hold some open; compare with the probe
# run directly).
base=$(bash -c "exec $RT_PROBE fds" 5</dev/null 7>/dev/null)
out=$("$RT" exec "$IMG" rt-probe fds 5</dev/null 7>/dev/null)
expect_eq "$out" "$base" "rt leaks no fd into the program"
expect_match " $out " " 5( .*)? 7 " "inherited fds stay open"

# A setuid-root binary prepared by the test set-up runs without privilege.
if [ -n "${RT_SUID_FIXTURE:-}" ]; then
  [ -u "$RT_SUID_FIXTURE" ] || fail "fixture $RT_SUID_FIXTURE is not setuid"
  fx=$(dirname "$RT_SUID_FIXTURE")
  out=$("$RT" exec -b "$fx:/fx" "$IMG" /fx/"$(basename "$RT_SUID_FIXTURE")")
  expect_eq "$out" "euid=$(id -u) egid=$(id -g)" "a setuid-root binary gains nothing inside"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "RT_SUID_FIXTURE not prepared (the test command makes it as root)"
else
  echo "note: no setuid fixture (run test/run-all.sh as root to prepare one)"
fi

# Hostile image: symlinks pointing out of the root must not redirect mounts
# to the host.
mkdir -p "$T/outside" "$T/src"
echo data >"$T/src/f"
ln -s "$T/outside" "$IMG/escape"        # absolute link to a host path
ln -s ../../../../../../../.. "$IMG/up"  # climbs above the root
out=$("$RT" exec -b "$T/src:/escape/x" "$IMG" cat /escape/x/f)
expect_eq "$out" "data" "bind through an absolute symlink lands inside the image"
out=$("$RT" exec -b "$T/src:/up/y" "$IMG" cat /y/f)
expect_eq "$out" "data" "bind through a climbing symlink lands inside the image"
[ -z "$(ls -A "$T/outside")" ] || fail "something was created in the host directory"
pass "the host directory the link names is untouched"
