#!/bin/bash
# Bad input: one clear error naming the thing, exit 125, nothing changed.
. "$(dirname "$0")/lib.sh"

before=$(tree_listing "$IMG")

expect_status 125 "missing image" -- "$RT" exec "$T/nope" true
expect_match "$ERR" "image \`$T/nope\`: no file or directory" "names the missing image: a path is only a path"
expect_status 125 "missing image by name" -- "$RT" exec --no-pull nope true
expect_match "$ERR" "image \`nope\` not found: no image of that name in store" "says where it looked"
expect_eq "$(echo "$ERR" | grep -c '^rt: error')" 1 "one error line"
expect_match "$ERR" "rt: hint: rt pull .*nope.*rt import" "and a hint of how to get it"
# A name that is stored only with a tag: the error names the tagged ones.
export RT_STORAGE="$T/store"
tar -C "$IMG" -cf "$T/img.tar" .
"$RT" import -q "$T/img.tar" myapp:1.0
expect_status 125 "an image stored only with a tag" -- "$RT" run myapp true
expect_match "$ERR" "hint: the store has myapp:1.0" "the hint names the tagged image"
unset RT_STORAGE

mkdir -p "$T/empty"
expect_status 125 "not a root filesystem" -- "$RT" exec "$T/empty" true
expect_match "$ERR" "not a root filesystem" "says why"

echo x >"$T/file"
expect_status 125 "image is a file" -- "$RT" exec "$T/file" true
expect_match "$ERR" "neither a directory, a SquashFS file nor a SIF" "says why"

expect_status 125 "missing bind source" -- "$RT" exec -b "$T/nosrc:/x" "$IMG" true
expect_match "$ERR" "nosrc" "names the bind source"

expect_status 125 "--write with --write-tmpfs" -- "$RT" exec --write --write-tmpfs "$IMG" true
expect_status 125 "unknown option" -- "$RT" exec --no-such-option "$IMG" true
expect_status 125 "no program" -- "$RT" exec "$IMG"
expect_status 125 "--cd to a missing directory" -- "$RT" exec --cd /nonexistent "$IMG" true
expect_match "$ERR" "/nonexistent" "names the directory"

# User namespaces disabled: the limit is per user namespace, so an outer
# namespace of our own can set it to 0 for everything below it.
expect_status 125 "user namespaces disabled" -- unshare -Ur sh -c \
  "echo 0 > /proc/sys/user/max_user_namespaces && exec '$RT' exec '$IMG' true"
expect_match "$ERR" "unshare" "names the call"
expect_match "$ERR" "max_user_namespaces" "hints at the sysctl"

# Installed setuid: refuse. The set-up (as root) prepares a root-owned
# setuid copy of rt.
if [ -n "${RT_SUID_RT:-}" ]; then
  expect_status 125 "setuid rt refuses to run" -- "$RT_SUID_RT" exec "$IMG" true
  expect_match "$ERR" "setuid" "says why"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "RT_SUID_RT not prepared (the test command makes it as root)"
fi
# A setuid bit the kernel ignores (our own file, nosuid or not) still refuses.
cp "$RT" "$T/rt-suid-own"
chmod u+s "$T/rt-suid-own"
expect_status 125 "rt with a setuid bit refuses even when it gains nothing" -- "$T/rt-suid-own" exec "$IMG" true

expect_eq "$(tree_listing "$IMG")" "$before" "the image is unchanged after every error"
