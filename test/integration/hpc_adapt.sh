#!/bin/bash
# Host injection that adapts to the node and to the image:
#   - the InfiniBand stack is automatic only with a verbs device (a
#     directory holding only rdma_cm injects nothing), an image's
#     NVIDIA_VISIBLE_DEVICES only with the driver's control device;
#   - a dependency of an injected library comes from the image when the
#     image's copy defines the symbol versions it needs (libstdc++: the
#     image's is loaded), from the host when it does not, and -v says which;
#   - a Debian 13 image's own C++ programs (apt-get needs GLIBCXX_3.4.32)
#     still start with a host library that needs libstdc++ injected;
#   - an image whose glibc is older than an injected library needs gets the
#     host's glibc in its place (here the "host" is a Debian 13 tree named
#     by the site configuration's linker cache), --no-glibc-replace refuses;
#   - the driver's programs are found beside its libraries, and a wrapper
#     script is never injected in place of the program it runs.
. "$(dirname "$0")/lib.sh"
[ -s "${RT_DEBIAN_ROOTFS:-}" ] || skip "RT_DEBIAN_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
[ -s "${RT_DEBIAN13_ROOTFS:-}" ] || skip "RT_DEBIAN13_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
for c in gcc g++ /sbin/ldconfig; do command -v "$c" >/dev/null || skip "$c missing"; done
export RT_STORAGE="$T/store"
cd "$T"
"$RT_IMAGE" import -q "$RT_DEBIAN_ROOTFS" deb
"$RT_IMAGE" import -q "$RT_DEBIAN13_ROOTFS" trixie
fake="$T/fake"
mkdir -p "$fake/lib" "$fake/dev/infiniband" "$fake/driver/lib64" "$fake/driver/bin" "$fake/wrapper"
so() { # so SONAME FILE SOURCE-SUFFIX [gcc args...]
  local soname=$1 file=$2 ext=$3
  shift 3
  gcc -x "$ext" -shared -fPIC -Wl,-soname,"$soname" -o "$file" "$T/src.$ext" "$@"
}
echo 'int ibv_fake(void){return 0;}' >"$T/src.c"
so libibverbs.so.1 "$fake/lib/libibverbs.so.1.14.0" c
# A host fabric library written in C++: it needs the host's libstdc++
# (GLIBCXX_3.4.21 and later for std::string) and libgcc_s.
cat >"$T/src.c++" <<'EOF'
#include <string>
#include <stdexcept>
extern "C" int cxx_fabric(int n) {
  try {
    if (n < 0) throw std::runtime_error("negative");
    return static_cast<int>(std::string(static_cast<size_t>(n), 'x').size());
  } catch (const std::exception&) {
    return -1;
  }
}
EOF
so libcxxfabric.so.1 "$fake/lib/libcxxfabric.so.1" c++ -lstdc++
echo "$fake/lib" >"$T/ld.so.conf"
echo "$fake/driver/lib64" >>"$T/ld.so.conf"
/sbin/ldconfig -C "$T/ld.so.cache" -f "$T/ld.so.conf"
conf() { # conf KEY=VALUE...: the site configuration, with the test's linker cache
  { echo "ld_cache = $T/ld.so.cache"; for kv in "$@"; do echo "${kv%%=*} = ${kv#*=}"; done; } >"$T/rt.conf"
}
export RT_CONF="$T/rt.conf"

# --- InfiniBand: by the devices there are -----------------------------------------
: >"$fake/dev/infiniband/rdma_cm"
conf "ib.devices=$fake/dev/infiniband/uverbs*" "ib.paths="
out=$("$RT" exec -v deb sh -c 'ls /run/rt-host 2>&1 || true' 2>"$T/err")
expect_match "$out" "No such file" "a /dev/infiniband with only rdma_cm: nothing injected"
expect_match "$(cat "$T/err")" "InfiniBand: not injected: no verbs device" "-v says why"
: >"$fake/dev/infiniband/uverbs0"
out=$("$RT" exec -v deb ls /run/rt-host/lib 2>"$T/err")
expect_match "$out" "libibverbs.so.1" "with uverbs0 the verbs stack is injected"
expect_match "$(cat "$T/err")" "InfiniBand: injected: verbs device $fake/dev/infiniband/uverbs0" "-v names the device"
out=$("$RT" exec --no-ib deb sh -c 'ls /run/rt-host 2>&1 || true')
expect_match "$out" "No such file" "--no-ib: nothing, device or not"
expect_match "$("$RT" doctor 2>&1 || true)" "InfiniBand.*verbs devices $fake/dev/infiniband/uverbs0" \
  "rt doctor names the verbs device"
rm "$fake/dev/infiniband/uverbs0"
expect_match "$("$RT" doctor 2>&1 || true)" "InfiniBand.*no verbs device" "rt doctor says there is none"

# --- An image asking for a GPU gets the driver only where its device is ------------
so libcuda.so.1 "$fake/driver/lib64/libcuda.so.535.104.05" c
/sbin/ldconfig -C "$T/ld.so.cache" -f "$T/ld.so.conf"
mkdir -p "$T/ctx-gpu" "$fake/gpudev"
printf 'FROM deb\nENV NVIDIA_VISIBLE_DEVICES=all\n' >"$T/ctx-gpu/Dockerfile"
"$RT" build -q -t gpuimg "$T/ctx-gpu" >/dev/null || fail "rt build of an ENV-only image failed"
conf "gpu.dev=$fake/gpudev" "ib.devices=$fake/dev/infiniband/uverbs*"
out=$("$RT" exec -v gpuimg sh -c 'ls /run/rt-host 2>&1 || true' 2>"$T/err")
expect_match "$out" "No such file" "no control device: the image's NVIDIA_VISIBLE_DEVICES injects nothing"
expect_match "$(cat "$T/err")" "GPU: the image asks for one .*no .$fake/gpudev/nvidiactl." "-v says why"
: >"$fake/gpudev/nvidiactl"
expect_match "$("$RT" exec gpuimg ls /run/rt-host/lib)" "libcuda.so.1" "with the control device it is injected"

# --- Dependencies: the image's copy when it has what is needed ------------------------
conf "ib.devices=$fake/dev/infiniband/uverbs*" "ib.libraries=libibverbs.so.1 libcxxfabric.so.1" "ib.paths="
cxxprobe='import ctypes
l = ctypes.CDLL("libcxxfabric.so.1")
assert l.cxx_fabric(7) == 7 and l.cxx_fabric(-1) == -1
print("".join(sorted({line.split()[-1] + "\n" for line in open("/proc/self/maps") if "libstdc++" in line or "libgcc_s" in line})), end="")'
out=$("$RT" exec -v --ib deb python3 -c "$cxxprobe" 2>"$T/err") || fail "the C++ fabric library in the Debian 12 image: $(cat "$T/err")"
expect_eq "$out" "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1
/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30" "the process maps the image's libstdc++ and libgcc_s, not the host's"
expect_match "$(cat "$T/err")" "\`libstdc\+\+.so.6\` from the image \(.*\): it has what \`$fake/lib/libcxxfabric.so.1\` needs" \
  "-v says the image's libstdc++ is used, and why"
# The issue's case: a Debian 13 image, whose apt-get needs GLIBCXX_3.4.32
# (the host's libstdc++ has 3.4.30): the image's own libstdc++ stays.
out=$("$RT" exec --ib trixie sh -c 'apt-get --version | head -1; ls /run/rt-host/lib') ||
  fail "apt-get of a Debian 13 image with a C++ host library injected"
expect_match "$out" "^apt [0-9]" "a Debian 13 image's apt-get starts with a C++ host library injected"
[[ $out == *libstdc++* ]] && fail "the host's libstdc++ was injected into a Debian 13 image"
pass "... and the host's older libstdc++ is not injected"
# An image whose libstdc++ lacks what the library needs: the host's comes in.
old="$T/oldcxx"
cp -a "$IMG" "$old"
mkdir -p "$old/usr/lib/x86_64-linux-gnu"
cp /lib/x86_64-linux-gnu/libc.so.6 "$old/usr/lib/x86_64-linux-gnu/libc.so.6"
printf 'GLIBCXX_3.4 { global: old_cxx; local: *; };\nCXXABI_1.3 { global: old_abi; } GLIBCXX_3.4;\n' >"$T/cxx.map"
echo 'int old_cxx(void){return 0;} int old_abi(void){return 0;}' >"$T/oldcxx.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libstdc++.so.6 -Wl,--version-script="$T/cxx.map" \
  -o "$old/usr/lib/x86_64-linux-gnu/libstdc++.so.6" "$T/oldcxx.c"
out=$("$RT" exec -v --ib "$old" ls /run/rt-host/lib 2>"$T/err")
expect_match "$out" "libstdc\+\+.so.6" "an image libstdc++ without GLIBCXX_3.4.21: the host's is injected"
expect_match "$(cat "$T/err")" "\`libstdc\+\+.so.6\` from the host \(.*\): the image's /usr/lib/x86_64-linux-gnu/libstdc\+\+.so.6 lacks (GLIBCXX|CXXABI)_[0-9.]+, which \`$fake/lib/libcxxfabric.so.1\` needs" \
  "-v names the missing version"
expect_match "$out" "libgcc_s.so.1" "and libgcc_s, which the image lacks"

# --- glibc: the host's in place of an older image's -------------------------------
# The "host" is a Debian 13 tree (glibc 2.41) named by the linker cache; the
# injected library calls strlcpy (GLIBC_2.38), which Debian 12 (2.36) lacks.
tri="$T/trixie-root"
mkdir -p "$tri"
tar -xf "$RT_DEBIAN13_ROOTFS" -C "$tri" --exclude=./dev ./usr/lib/x86_64-linux-gnu 2>/dev/null || true
[ -s "$tri/usr/lib/x86_64-linux-gnu/libc.so.6" ] || fail "no libc.so.6 in the Debian 13 tree"
mkdir -p "$T/newlib"
echo 'unsigned long strlcpy(char *, const char *, unsigned long);
int new_glibc(char *d, int n) { return (int)strlcpy(d, "glibc 2.38", (unsigned long)n); }' >"$T/new.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libnewglibc.so.1 -o "$T/newlib/libnewglibc.so.1" "$T/new.c" \
  "$tri/usr/lib/x86_64-linux-gnu/libc.so.6"
printf '%s\n%s\n' "$T/newlib" "$tri/usr/lib/x86_64-linux-gnu" >"$T/ld13.conf"
/sbin/ldconfig -C "$T/ld13.so.cache" -f "$T/ld13.conf"
printf 'ld_cache = %s\nib.devices =\nib.libraries = libnewglibc.so.1\nib.paths =\n' "$T/ld13.so.cache" >"$T/rt13.conf"
probe='import ctypes, os
b = ctypes.create_string_buffer(32)
n = ctypes.CDLL("libnewglibc.so.1").new_glibc(b, 32)
print(os.confstr("CS_GNU_LIBC_VERSION"), n, b.value.decode())'
out=$(RT_CONF="$T/rt13.conf" "$RT" exec -v --ib deb python3 -c "$probe" 2>"$T/err") ||
  fail "a library needing glibc 2.38 in a Debian 12 image: $(cat "$T/err")"
expect_eq "$out" "glibc 2.41 10 glibc 2.38" "Debian 12's python3 runs on the host's glibc 2.41 and calls strlcpy"
expect_match "$(cat "$T/err")" "glibc: image .deb. has glibc 2\.36 .* needs 2\.38: the host's glibc 2\.41 .* takes its place" \
  "-v says the image's glibc was replaced, and why"
# The same image as one SquashFS file (its files read through rt's server).
"$RT_IMAGE" convert -q deb "$T/deb.sqfs"
out=$(RT_CONF="$T/rt13.conf" "$RT" exec --ib "$T/deb.sqfs" python3 -c "$probe" 2>"$T/err") ||
  fail "the same in the SquashFS image: $(cat "$T/err")"
expect_eq "$out" "glibc 2.41 10 glibc 2.38" "the same in the image as a SquashFS file"
out=$("$RT" exec --ib "$T/deb.sqfs" python3 -c "$cxxprobe" 2>"$T/err") || fail "the C++ library, SquashFS: $(cat "$T/err")"
expect_eq "$out" "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1
/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30" "and its libstdc++ and libgcc_s are the SquashFS image's"
expect_eq "$("$RT" exec deb python3 -c 'import os; print(os.confstr("CS_GNU_LIBC_VERSION"))')" "glibc 2.36" \
  "without the injection the image's own glibc runs"
[ "$(cat "$RT_STORAGE/images/deb/rootfs/usr/lib/x86_64-linux-gnu/libc.so.6" | md5sum)" != \
  "$(md5sum <"$tri/usr/lib/x86_64-linux-gnu/libc.so.6")" ] || fail "the image's libc file was changed"
pass "the image's own libc file is untouched"
expect_status 125 "--no-glibc-replace refuses" -- env RT_CONF="$T/rt13.conf" "$RT" exec --no-glibc-replace --ib deb true
expect_match "$ERR" "has glibc 2\.36 .*needs 2\.38" "the refusal names both versions"
printf 'glibc.replace = no\n' >>"$T/rt13.conf"
expect_status 125 "glibc.replace = no in the site configuration refuses" -- env RT_CONF="$T/rt13.conf" "$RT" exec --ib deb true
# As new as needed: nothing replaced.
err=$(RT_CONF="$T/rt13.conf" "$RT" exec -v --ib trixie true 2>&1)
[[ $err == *"glibc: "* ]] && fail "an image with glibc 2.41 had its glibc replaced: $err"
pass "an image as new as needed keeps its glibc"

# --- The driver's programs -----------------------------------------------------------
echo '#include <stdio.h>
int main(void) { puts("NVIDIA-SMI fake driver program"); return 0; }' >"$T/smi.c"
gcc -o "$fake/driver/bin/nvidia-smi" "$T/smi.c"
printf '#!/bin/sh\nexec %s "$@"\n' "$fake/driver/bin/nvidia-smi" >"$fake/wrapper/nvidia-smi"
chmod +x "$fake/wrapper/nvidia-smi"
conf "gpu.libraries=libcuda.so.1" "ib.devices="
expect_eq "$("$RT" exec --gpu deb nvidia-smi)" "NVIDIA-SMI fake driver program" \
  "nvidia-smi is found beside the driver's libraries (../bin of libcuda's directory) and on PATH"
conf "gpu.libraries=libcuda.so.1" "gpu.binaries=$fake/wrapper/nvidia-smi" "ib.devices="
out=$("$RT" exec -v --gpu deb sh -c 'nvidia-smi; head -c 4 /run/rt-host/bin/nvidia-smi | od -An -c' 2>"$T/err")
expect_match "$out" "NVIDIA-SMI fake driver program" "a wrapper script of the driver's program: the program runs"
expect_match "$out" "177 +E +L +F" "what is injected is the program, not the script"
expect_match "$(cat "$T/err")" "is a script that runs .$fake/driver/bin/nvidia-smi." "-v says so"
