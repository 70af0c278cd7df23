#!/bin/bash
# Root emulation (--seccomp): the calls a single-id user namespace refuses
# (chown to other ids, set*id, setgroups, device nodes) succeed without
# effect, on the native and the i386 entry points, while everything else
# is untouched; then real package managers at work in a Debian bookworm
# image from the Debian mirror: apt-get, useradd, chown -R, dpkg -i and
# pip install of a local wheel.
. "$(dirname "$0")/lib.sh"
export RT_STORAGE="$T/store"
mkdir -p "$T/w"
: >"$T/w/file"

# ---- the calls, one by one -----------------------------------------------------
# The i386 entry point where this kernel has one (some guests' kernels
# answer int 0x80 with SIGSEGV, which rt-probe says as no-i386).
calls='rt-probe chown /w/file; rt-probe chown-i386 /w/file; rt-probe setuid 1000; rt-probe mknod /w/dev'
i386=EINVAL
if [ "$("$RT_PROBE" chown-i386 "$T/w/file")" = no-i386 ]; then
  echo "note: this kernel has no i386 entry point: its calls are not checked"
  i386=no-i386
fi
expect_status 0 "without --seccomp" -- "$RT" exec --root -b "$T/w:/w" "$IMG" sh -c "$calls"
expect_eq "$(echo $OUT)" "EINVAL $i386 EINVAL EPERM" "chown, i386 chown, setuid and mknod of a device are refused"
expect_status 0 "with --seccomp" -- "$RT" exec --root --seccomp -b "$T/w:/w" "$IMG" sh -c "$calls"
expect_eq "$(echo $OUT)" "ok $([ $i386 = EINVAL ] && echo ok || echo no-i386) ok ok" "they succeed"
expect_eq "$(stat -c %u "$T/w/file")" "$(id -u)" "... without effect: the owner is unchanged"
[ ! -e "$T/w/dev" ] && pass "... and no device node was made" || fail "a device node was made"
expect_status 0 "a FIFO under --seccomp" -- "$RT" exec --root --seccomp -b "$T/w:/w" "$IMG" rt-probe fifo /w/fifo
[ -p "$T/w/fifo" ] && pass "FIFOs are still really made" || fail "no FIFO"
expect_status 0 "ordinary programs under --seccomp" -- "$RT" exec --seccomp "$IMG" sh -c 'ls / >/dev/null && id -u'
expect_eq "$OUT" "$(id -u)" "run as before"
expect_status 0 "-v" -- "$RT" exec -v --seccomp "$IMG" true
expect_match "$ERR" "root emulation \(--seccomp\): these succeed without effect: chown, .*setgroups.*mknod \(devices\)" \
  "-v lists the emulated calls"
expect_status 0 "--no-new-privs holds" -- "$RT" exec --seccomp "$IMG" rt-probe nnp
expect_eq "$OUT" "1" "the filter comes with no_new_privs"

# ---- package managers in Debian bookworm -----------------------------------------
[ -n "${RT_DEBIAN_ROOTFS:-}" ] && [ -r "$RT_DEBIAN_ROOTFS" ] ||
  skip "RT_DEBIAN_ROOTFS is not set (test/run-all.sh builds a Debian root filesystem)"
getent hosts deb.debian.org >/dev/null || skip "deb.debian.org does not resolve: no Debian mirror to install from"
"$RT" import -q "$RT_DEBIAN_ROOTFS" debian
run_root() { "$RT" exec --root --write-tmpfs --no-home --cd / "$@"; }
expect_status 100 "apt-get update without --seccomp" -- run_root debian apt-get -q update
expect_match "$ERR" "setgroups|seteuid|Operation not permitted|chown" "apt stops at a refused call"

# One container run: what a Dockerfile's RUN lines would do, in order.
cat >"$T/w/steps.sh" <<'EOF'
set -e
apt-get -q update
apt-get -q install -y --no-install-recommends python3-numpy python3-pip
python3 -c 'import numpy; print("numpy", numpy.__version__)'
useradd -m -s /bin/sh alice
chown -R alice:alice /home/alice
echo "alice $(id -u alice) $(stat -c %U /home/alice)"
mkdir -p /srv/pkg/DEBIAN /srv/pkg/usr/share/rt-test
printf 'Package: rt-test-pkg\nVersion: 1.0\nArchitecture: all\nMaintainer: rt tests <rt@localhost>\nDescription: a test\n' \
  >/srv/pkg/DEBIAN/control
echo hello >/srv/pkg/usr/share/rt-test/hello
dpkg-deb --root-owner-group --build /srv/pkg /srv/rt-test-pkg.deb >/dev/null
dpkg -i /srv/rt-test-pkg.deb >/dev/null
dpkg-query -W -f='${Package} ${Status}\n' rt-test-pkg
# A wheel made by hand (a zip with its metadata), installed offline.
python3 - <<'PY'
import base64, hashlib, zipfile
files = {"rt_hello/__init__.py": b"def hi():\n    return 'hi from a wheel'\n",
         "rt_hello-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: rt-hello\nVersion: 1.0\n",
         "rt_hello-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: rt-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
record = ""
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{name},sha256={digest},{len(data)}\n"
record += "rt_hello-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile("/srv/rt_hello-1.0-py3-none-any.whl", "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
    z.writestr("rt_hello-1.0.dist-info/RECORD", record)
PY
pip install -q --no-index --break-system-packages /srv/rt_hello-1.0-py3-none-any.whl
python3 -c 'import rt_hello; print(rt_hello.hi())'
EOF
expect_status 0 "apt-get, useradd, chown -R, dpkg -i and pip install under --seccomp" -- \
  run_root --seccomp -b "$T/w:/w" debian sh /w/steps.sh
expect_match "$OUT" "numpy [0-9]+\.[0-9]+" "apt-get installed python3-numpy from the mirror, and it imports"
expect_match "$OUT" "alice 1000 root" "useradd made a user; chown -R succeeded, without effect (the owner stays)"
expect_match "$OUT" "rt-test-pkg install ok installed" "dpkg -i installed a package"
expect_match "$OUT" "hi from a wheel" "pip installed a local wheel"
