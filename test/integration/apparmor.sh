#!/bin/bash
# rt's AppArmor profile (bin/apparmor/rt.in), which hosts that restrict
# unprivileged user namespaces (Ubuntu 23.10 and later, DGX OS) need:
# cmake --install makes it for the prefix it installs to and puts it in
# /etc/apparmor.d only where that directory exists; Debian 13's
# apparmor_parser (4.1, which knows the `userns` rule; Debian 12's 3.0 does
# not), run in an rt container, compiles it and refuses broken copies.
# Where the restriction is on, a refused user namespace's error names it
# and the fix.
. "$(dirname "$0")/lib.sh"
[ -s "${RT_DEBIAN13_ROOTFS:-}" ] || skip "RT_DEBIAN13_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
: "${RT_BUILD_DIR:?RT_BUILD_DIR must name the build directory}"
[ -w "$RT_BUILD_DIR" ] || skip "cmake --install writes its manifest into $RT_BUILD_DIR, which this user cannot write"
export RT_STORAGE="$T/store"

# The install, as this user, under DESTDIR, to a prefix with characters
# AppArmor reads as patterns.
prefix="/opt/rt test{1}"
dest=$T/dest
mkdir -p "$dest/etc/apparmor.d/abi"
: >"$dest/etc/apparmor.d/abi/4.0"  # AppArmor 4, which knows the userns rule
out=$(DESTDIR="$dest" cmake --install "$RT_BUILD_DIR" --prefix "$prefix" 2>&1) || fail "cmake --install: $out"
profile=$dest/etc/apparmor.d/rt
[ -s "$profile" ] || fail "cmake --install did not put the profile in DESTDIR/etc/apparmor.d: $out"
pass "cmake --install puts the profile in /etc/apparmor.d where AppArmor 4 is"
expect_match "$out" "load it as root: apparmor_parser -r /etc/apparmor.d/rt" "and says how to load it"
cmp -s "$profile" "$dest$prefix/share/rt/apparmor/rt" || fail "PREFIX/share/rt/apparmor/rt differs from the profile"
pass "a copy lies in PREFIX/share/rt/apparmor"

# The profile names rt and rt-image where the install put them (the
# programs of those names in its own report), quoted, the braces escaped.
installed() {
  local f
  echo "$out" | sed -n "s|^-- Installing: $dest||p" | grep -x ".*/$1" | while IFS= read -r f; do
    [ ! -x "$dest$f" ] || echo "$f"
  done
}
attachment() { printf '"%s"' "$(printf '%s' "$1" | sed 's/[][\\"*?{}^]/\\&/g')"; }
rt_at=$(installed rt) rt_image_at=$(installed rt-image)
expect_eq "$rt_at" "$prefix/bin/rt" "cmake --install puts rt in PREFIX/bin"
[ -n "$rt_image_at" ] || fail "cmake --install installed no program rt-image: $out"
expect_eq "$(grep -c "^profile " "$profile")" 2 "the file has two profiles"
grep -qxF "profile rt $(attachment "$rt_at") flags=(unconfined) {" "$profile" ||
  fail "the profile does not name rt at [$rt_at]: $(grep '^profile' "$profile")"
pass "the profile rt names the installed rt ($(attachment "$rt_at"))"
grep -qxF "profile rt-image $(attachment "$rt_image_at") flags=(unconfined) {" "$profile" ||
  fail "the profile does not name rt-image at [$rt_image_at]: $(grep '^profile' "$profile")"
pass "the profile rt-image names the installed rt-image ($rt_image_at)"
for line in "abi <abi/4.0>," "include <tunables/global>" "  userns," "  include if exists <local/rt>" \
  "  include if exists <local/rt-image>"; do
  grep -qxF "$line" "$profile" || fail "the profile lacks [$line]"
done
pass "abi 4.0, the global tunables, userns and the local includes"

# Without /etc/apparmor.d (no AppArmor), and with an AppArmor before 4.0
# (Debian 12's parser would fail on the file at every boot), the install
# leaves it out, says so, and succeeds.
out2=$(DESTDIR="$T/dest2" cmake --install "$RT_BUILD_DIR" --prefix "$prefix" 2>&1) || fail "cmake --install: $out2"
[ ! -e "$T/dest2/etc" ] || fail "cmake --install made $T/dest2/etc: $(find "$T/dest2/etc")"
[ -s "$T/dest2$prefix/share/rt/apparmor/rt" ] || fail "no PREFIX/share/rt/apparmor/rt without /etc/apparmor.d"
expect_match "$out2" "Not installing rt's AppArmor profile to $T/dest2/etc/apparmor.d: no such directory" \
  "without /etc/apparmor.d it is left out, and said"
mkdir -p "$T/dest3/etc/apparmor.d/abi"
: >"$T/dest3/etc/apparmor.d/abi/3.0"
out3=$(DESTDIR="$T/dest3" cmake --install "$RT_BUILD_DIR" --prefix "$prefix" 2>&1) || fail "cmake --install: $out3"
[ ! -e "$T/dest3/etc/apparmor.d/rt" ] || fail "cmake --install put the profile beside AppArmor 3.0's files"
expect_match "$out3" "Not installing rt's AppArmor profile to $T/dest3/etc/apparmor.d: no abi/4.0 there" \
  "with AppArmor 3.0 it is left out, and said"

# Debian 13's parser, in a container of its root, compiles the profile
# against its policy features (no kernel needed): both profiles, no warning.
"$RT" import -q "$RT_DEBIAN13_ROOTFS" trixie
mkdir "$T/aa"
cp "$profile" "$T/aa/rt"
sed 's/^  userns,$/  usernamespace,/' "$profile" >"$T/aa/misspelt"
sed '/^profile rt-image/,$ s/^}$//' "$profile" >"$T/aa/unclosed"
sed 's/flags=(unconfined)/flags=(unconfinde)/' "$profile" >"$T/aa/badflag"
parse() {
  "$RT" exec --bind "$T/aa:/aa:ro" trixie apparmor_parser --features-file /usr/share/apparmor-features/features \
    --skip-kernel-load --skip-cache --Werror --ofile /dev/null "$@"
}
expect_eq "$("$RT" exec trixie apparmor_parser --version | head -1)" "AppArmor parser version 4.1.0" \
  "Debian 13's apparmor_parser is 4.1"
expect_status 0 "Debian 13's apparmor_parser compiles the profile, warnings as errors" -- parse /aa/rt
expect_eq "$OUT$ERR" "" "without a word"
expect_eq "$("$RT" exec --bind "$T/aa:/aa:ro" trixie apparmor_parser \
  --features-file /usr/share/apparmor-features/features --names /aa/rt | tr '\n' ' ')" "rt rt-image " \
  "it finds the profiles rt and rt-image"
for broken in misspelt unclosed badflag; do
  expect_status 1 "a broken copy ($broken) is refused" -- parse "/aa/$broken"
  expect_match "$ERR" "AppArmor parser error" "with the parser's error"
done

# Where AppArmor restricts user namespaces (here: the sysctl read from a
# file of the test's, RT_TEST_APPARMOR_SYSCTL), the kernel's refusal names
# it. The kernel refuses unshare(CLONE_NEWUSER) with EPERM to a chrooted
# process, as the restriction does: rt runs chrooted to a bind mount of /
# in a namespace of the test's own.
echo 1 >"$T/restricted"
echo 0 >"$T/unrestricted"
chrooted() { unshare -Urm sh -c 'mkdir -p "$1" && mount --rbind / "$1" && exec chroot "$@"' sh "$T/chroot" "$@"; }
expect_status 125 "rt exec where the kernel refuses the user namespace" -- \
  chrooted env RT_TEST_APPARMOR_SYSCTL="$T/restricted" "$RT" exec "$IMG" true
expect_match "$ERR" "error: unshare\(CLONE_NEWUSER\|CLONE_NEWNS\): Operation not permitted" "the error names the call"
expect_match "$ERR" "hint: AppArmor restricts unprivileged user namespaces on this host" "the hint names AppArmor"
expect_match "$ERR" "apparmor_parser -r /etc/apparmor.d/rt" "and loading rt's profile"
expect_match "$ERR" "sysctl kernel.apparmor_restrict_unprivileged_userns=0" "and the sysctl"
expect_status 125 "the same where AppArmor does not restrict them" -- \
  chrooted env RT_TEST_APPARMOR_SYSCTL="$T/unrestricted" "$RT" exec "$IMG" true
expect_match "$ERR" "hint: unprivileged user namespaces are disabled or exhausted here" "gets the general hint"
[[ "$ERR" != *"AppArmor restricts"* ]] || fail "the hint names AppArmor where the sysctl is 0: $ERR"
pass "and not AppArmor's"
