#!/bin/bash
# Realism: a Debian bookworm image (mmdebstrap minbase + python3, two gzip
# layers) pushed to the local TLS registry, pulled and run with python3.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
[ -s "${RT_DEBIAN_ROOTFS:-}" ] || skip "RT_DEBIAN_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
command -v skopeo >/dev/null || skip "skopeo missing"
export RT_STORAGE="$T/store" HOME="$T/home"
mkdir -p "$HOME"
python3 - "$RT_DEBIAN_ROOTFS" "$T" <<'PY'
import sys, tarfile
src, out = sys.argv[1], sys.argv[2]
outs = [tarfile.open(f"{out}/l{i}.tar", "w", format=tarfile.PAX_FORMAT) for i in (1, 2)]
with tarfile.open(src) as t:
    for m in t:
        o = outs[1] if m.name.lstrip("./").startswith("usr/") else outs[0]
        o.addfile(m, t.extractfile(m) if m.isfile() else None)
for o in outs:
    o.close()
PY
gzip -1 "$T/l1.tar" "$T/l2.tar"
python3 "$RT_SOURCE_DIR/test/integration/ocitool.py" layout "$T/deb" --tag bookworm \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
  --cmd python3 --cmd -c --cmd 'print("cmd ok")' "$T/l1.tar.gz" "$T/l2.tar.gz" >/dev/null
start_registry "$T/reg" open
push "$T/deb:bookworm" "debian:bookworm"
"$RT" pull -q --ca-file "$REG_CA" "$REG/debian:bookworm" debian
out=$("$RT" exec debian python3 -c 'import sys, platform; print(sys.version_info[0], platform.freedesktop_os_release()["VERSION_CODENAME"])')
expect_eq "$out" "3 bookworm" "python3 runs in the pulled Debian image"
out=$("$RT" run debian)
expect_eq "$out" "cmd ok" "rt run uses the image's CMD"
out=$("$RT" exec --root debian sh -c 'id -u; ls -ld /usr/bin | cut -c1-10')
expect_eq "$out" $'0\ndrwxr-xr-x' "--root in a Debian image"
out=$("$RT" exec debian sh -c 'getent passwd "$(id -u)" | cut -d: -f1')
expect_eq "$out" "$(id -un)" "the caller resolves through the synthesized passwd"
