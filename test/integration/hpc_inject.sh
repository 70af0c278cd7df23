#!/bin/bash
# Host injection (--mpi, --gpu, --ib, --device) into a Debian image that has
# no MPI: the real host Open MPI and MPICH under their own launchers, a fake
# NVIDIA driver and a fake verbs stack (libraries built here with the right
# sonames, found through a dynamic linker cache made with ldconfig -C), a
# CDI spec, and the refusals (MPI ABI mismatch, glibc too old).
. "$(dirname "$0")/lib.sh"
[ -s "${RT_DEBIAN_ROOTFS:-}" ] || skip "RT_DEBIAN_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
for c in mpicc mpirun mpicc.mpich mpiexec.mpich gcc /sbin/ldconfig; do
  command -v "$c" >/dev/null || skip "$c missing (openmpi-bin libopenmpi-dev mpich libmpich-dev gcc)"
done
export RT_STORAGE="$T/store"
cd "$T"  # the working directory is bound: the test programs live here
"$RT_IMAGE" import -q "$RT_DEBIAN_ROOTFS" deb
tree_listing "$RT_STORAGE/images/deb/rootfs" >"$T/deb.before"
"$RT" exec deb sh -c 'ls /usr/lib/x86_64-linux-gnu | grep -E "^lib(mpi|mpich)\.so" && exit 1 || exit 0' ||
  fail "the test image must not have an MPI of its own"

# --- Host Open MPI into an image without MPI, under mpirun -np 4 ---------
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_disable_ipv6_family=1 \
  OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi
mpicc -O2 -o "$T/hello-ompi" "$RT_SOURCE_DIR/test/hpc/mpi_hello.c"
mpicc.mpich -O2 -o "$T/hello-mpich" "$RT_SOURCE_DIR/test/hpc/mpi_hello.c"
expect_status 127 "without --mpi the program cannot find libmpi" -- "$RT" exec deb "$T/hello-ompi" 1
expect_match "$ERR" "libmpi.so.40" "the loader names the missing library"
out=$(timeout 120 mpirun -np 4 --oversubscribe "$RT" exec --mpi deb "$T/hello-ompi" 4 2>"$T/mpirun.err") ||
  fail "mpirun -np 4 rt exec --mpi: $(cat "$T/mpirun.err")"
expect_eq "$(echo "$out" | grep -c ' of 4 sum 6 ok')" 4 "host Open MPI: 4 ranks, size 4, allreduce right"
out=$("$RT" exec --mpi=openmpi deb sh -c 'echo "$LD_LIBRARY_PATH"; ls /run/rt-host/lib')
expect_match "$out" "^/run/rt-host/lib" "LD_LIBRARY_PATH starts with the injected directory"
for lib in libmpi.so.40 libopen-pal.so.40 libpmix.so.2 libmunge.so.2 libhwloc.so.15; do
  expect_match "$out" "$lib" "Open MPI closure includes $lib"
done
[[ $out == *libc.so.6* ]] && fail "glibc must never be injected"
expect_eq "$("$RT" exec --mpi deb sh -c 'test -d /etc/openmpi && test -d /usr/lib/x86_64-linux-gnu/openmpi && echo yes')" \
  yes "Open MPI's configuration and plugin directories are at their host paths"
[ ! -e "$RT_STORAGE/images/deb/rootfs/run/rt-host" ] && [ ! -e "$RT_STORAGE/images/deb/rootfs/usr/lib/x86_64-linux-gnu/openmpi" ] ||
  fail "the image was modified"
pass "the image is not modified"

# --- Host MPICH (MPICH ABI) under Hydra ------------------------------------
# The two ranks share one container (join is on under a launcher), so UCX's
# shared memory may open /proc/<peer>/fd links.
export UCX_TLS=self,sm UCX_NET_DEVICES=lo
out=$(timeout 120 mpiexec.mpich -iface lo -n 2 "$RT" exec --mpi=mpich deb "$T/hello-mpich" 2 2>"$T/hydra.err") ||
  fail "mpiexec.mpich -n 2 rt exec --mpi=mpich: $(cat "$T/hydra.err")"
expect_eq "$(echo "$out" | grep -c ' of 2 sum 1 ok')" 2 "host MPICH: 2 ranks, size 2, allreduce right"

# --- Refusals --------------------------------------------------------------
# An image whose MPI has the other ABI.
abi="$T/abi"
cp -a "$IMG" "$abi"
mkdir -p "$abi/usr/lib/x86_64-linux-gnu"
echo 'int MPI_Init(void){return 0;}' >"$T/m.c"
gcc -shared -fPIC -Wl,-soname,libmpich.so.12 -o "$abi/usr/lib/x86_64-linux-gnu/libmpich.so.12" "$T/m.c"
expect_status 125 "Open MPI into an MPICH-ABI image is refused" -- "$RT" exec --mpi=openmpi "$abi" true
expect_match "$ERR" "MPICH-ABI MPI .*libmpich.so.12.*Open MPI \(libmpi.so.40\)" "the refusal names both ABIs"
# Plain --mpi follows the program's own MPI (its DT_NEEDED), whatever the
# host's default; an explicit --mpi of the other family is refused first.
expect_match "$("$RT" exec --dry-run --mpi deb "$T/hello-mpich")" "host MPI: .*libmpich.so.12 \(mpich ABI\)" \
  "plain --mpi injects MPICH for an MPICH program"
expect_match "$("$RT" exec --dry-run --mpi deb "$T/hello-ompi")" "host MPI: .*libmpi.so.40 \(openmpi ABI\)" \
  "and Open MPI for an Open MPI program"
expect_status 125 "--mpi=openmpi for an MPICH program is refused" -- "$RT" exec --mpi=openmpi deb "$T/hello-mpich"
expect_match "$ERR" "hello-mpich. links libmpich.so.12 \(MPICH-ABI MPI\), but --mpi=openmpi injects Open MPI" \
  "the refusal names both"
# An image whose glibc is older than what the host libraries need.
old="$T/oldglibc"
cp -a "$IMG" "$old"
mkdir -p "$old/lib/x86_64-linux-gnu"
printf 'GLIBC_2.2.5 { global: gnu_get_libc_version; local: *; };\n' >"$T/ver.map"
echo 'const char *gnu_get_libc_version(void){return "2.2.5";}' >"$T/libc.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libc.so.6 -Wl,--version-script="$T/ver.map" -o "$old/lib/x86_64-linux-gnu/libc.so.6" "$T/libc.c"
expect_status 125 "host MPI into an image with glibc 2.2.5 is refused with --no-glibc-replace" -- \
  "$RT" exec --no-glibc-replace --mpi=openmpi "$old" true
expect_match "$ERR" "has glibc 2.2.5 .* needs 2\.[0-9]+" "the refusal names the library and the glibc versions"
expect_status 0 "without it the host's glibc takes the image's place" -- "$RT" exec -v --mpi=openmpi "$old" true
expect_match "$ERR" "glibc: image .* has glibc 2.2.5 .*: the host's glibc 2\.[0-9]+ .* takes its place" "-v says so"
# The refusal names the release the libc says it is, not its newest symbol
# version (glibc 2.31 defines nothing newer than GLIBC_2.30).
echo '__attribute__((used)) static const char banner[] = "GNU C Library stable release version 2.3.";' >>"$T/libc.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libc.so.6 -Wl,--version-script="$T/ver.map" -o "$old/lib/x86_64-linux-gnu/libc.so.6" "$T/libc.c"
expect_status 125 "the same with a release banner" -- "$RT" exec --no-glibc-replace --mpi=openmpi "$old" true
expect_match "$ERR" "has glibc 2\.3 \(" "the refusal names the libc's release"
# busybox: no glibc at all.
expect_status 125 "host MPI into a busybox image is refused" -- "$RT" exec --mpi=openmpi "$IMG" true
expect_match "$ERR" "no glibc" "the refusal says the image has no glibc"

# --- A fake NVIDIA driver and verbs stack ---------------------------------
fake="$T/fake"
mkdir -p "$fake/lib" "$fake/bin" "$fake/etc/libibverbs.d" "$fake/providers"
so() { # so SONAME FILE [NEEDED...]
  local soname=$1 file=$2
  shift 2
  echo "int fake_${RANDOM}(void){return 0;}" >"$T/so.c"
  gcc -shared -fPIC -Wl,-soname,"$soname" -o "$fake/lib/$file" "$T/so.c" -L"$fake/lib" "$@"
}
so libcuda.so.1 libcuda.so.535.104.05
so libnvidia-ml.so.1 libnvidia-ml.so.535.104.05
so libnvidia-ptxjitcompiler.so.1 libnvidia-ptxjitcompiler.so.535.104.05
so libnl-3.so.200 libnl-3.so.200
ln -s libnl-3.so.200 "$fake/lib/libnl-3.so"
so libibverbs.so.1 libibverbs.so.1.14.0 -lnl-3
echo 'driver mlx5' >"$fake/etc/libibverbs.d/mlx5.driver"
printf '#!/bin/sh\necho "NVIDIA-SMI 535.104.05 (fake)"\n' >"$fake/bin/nvidia-smi"
chmod +x "$fake/bin/nvidia-smi"
echo "$fake/lib" >"$T/ld.so.conf"
/sbin/ldconfig -C "$T/ld.so.cache" -f "$T/ld.so.conf"
cat >"$T/rt.conf" <<CONF
# test site configuration
ld_cache = $T/ld.so.cache
gpu.binaries = $fake/bin/nvidia-smi
ib.paths = $fake/etc/libibverbs.d
cdi.dirs = $T/cdi
CONF
export RT_CONF="$T/rt.conf"
out=$("$RT" exec --gpu deb sh -c 'ls /run/rt-host/lib; nvidia-smi')
for lib in libcuda.so.1 libnvidia-ml.so.1 libnvidia-ptxjitcompiler.so.1; do
  expect_match "$out" "$lib" "--gpu injects $lib"
done
expect_match "$out" "NVIDIA-SMI 535.104.05 \(fake\)" "nvidia-smi is on PATH inside"
cmp <("$RT" exec --gpu deb cat /run/rt-host/lib/libcuda.so.1) "$fake/lib/libcuda.so.535.104.05" ||
  fail "the injected libcuda is the host's file"
pass "the injected libcuda.so.1 is the host's libcuda.so.535.104.05"
# Files are links into their host directories, each directory bound once
# (read-only, nosuid, nodev) at a hidden place: 4 files, 3 mounts.
out=$("$RT" exec --gpu deb sh -c 'readlink /run/rt-host/lib/libcuda.so.1 /run/rt-host/bin/nvidia-smi
  awk '\''$5 ~ "^/run/rt-host" {print $5, $6}'\'' /proc/self/mountinfo
  for f in /run/rt-host/.d/0/x /run/rt-host/lib/x; do touch "$f" 2>/dev/null && echo "wrote $f"; done; true')
expect_match "$out" "^\.\./\.d/0/libcuda\.so\.535\.104\.05
\.\./\.d/1/nvidia-smi
" "libcuda.so.1 and nvidia-smi are links into their directories (to the file libcuda.so.1 leads to)"
expect_eq "$(echo "$out" | grep -c '^/run/rt-host')" 3 "one mount for the links, one per host directory"
expect_eq "$(echo "$out" | grep '^/run/rt-host' | grep -vc '^[^ ]* ro,nosuid,nodev')" 0 "all of them read-only, nosuid, nodev"
[[ $out == *wrote* ]] && fail "a file was written under /run/rt-host: $out"
pass "nothing under /run/rt-host can be written (the host directory \$fake/lib is writable)"
expect_match "$("$RT" exec -v --gpu deb true 2>&1)" "host files: 4 links into \`/run/rt-host\` from 2 directories" \
  "-v says how many links and binds"
expect_match "$("$RT" exec --dry-run -vv --gpu deb true 2>/dev/null)" "  link \`/run/rt-host/lib/libnvidia-ml.so.1\` -> \`\.\./\.d/0/libnvidia-ml\.so\.535\.104\.05\`" \
  "-vv shows each link"
# A library whose host path is a link to a file in another directory (here
# a relative one, which would not resolve inside the bound directory): the
# link goes to the real file.
mkdir -p "$fake/other"
echo 'int xother(void){return 42;}' >"$T/xother.c"
gcc -shared -fPIC -Wl,-soname,libxother.so.1 -o "$fake/other/libxother.so.1.0.0" "$T/xother.c"
ln -s ../other/libxother.so.1.0.0 "$fake/lib/libxother.so.1"
echo 'int xother(void); int main(void){return xother() == 42 ? 0 : 1;}' >"$T/usexother.c"
gcc -o "$T/usexother" "$T/usexother.c" -L"$fake/other" -l:libxother.so.1.0.0
printf 'ld_cache = %s\ngpu.libraries = %s\n' "$T/ld.so.cache" "$fake/lib/libxother.so.1" >"$T/rt-xother.conf"
expect_status 0 "a library whose host path links to another directory loads" -- \
  env RT_CONF="$T/rt-xother.conf" "$RT" exec --gpu deb "$T/usexother"
cmp <(RT_CONF="$T/rt-xother.conf" "$RT" exec --gpu deb cat /run/rt-host/lib/libxother.so.1) "$fake/other/libxother.so.1.0.0" ||
  fail "the injected libxother.so.1 is not the host's file"
pass "and is the file the host's link leads to"
# The selection reaches CUDA; a CUDA_VISIBLE_DEVICES of the launcher wins.
out=$(NVIDIA_VISIBLE_DEVICES=GPU-1234 "$RT" exec --gpu deb sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
expect_eq "$out" "GPU-1234" "NVIDIA_VISIBLE_DEVICES selects what CUDA sees (CUDA_VISIBLE_DEVICES)"
out=$(NVIDIA_VISIBLE_DEVICES=GPU-1234 CUDA_VISIBLE_DEVICES=1 "$RT" exec --gpu deb sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
expect_eq "$out" "1" "a CUDA_VISIBLE_DEVICES from the launcher is kept"
out=$(NVIDIA_VISIBLE_DEVICES=all "$RT" exec --gpu deb sh -c 'echo "${CUDA_VISIBLE_DEVICES-unset}"')
expect_eq "$out" "unset" "NVIDIA_VISIBLE_DEVICES=all restricts nothing"
# CUDA forward compatibility: an image's /usr/local/cuda/compat goes first
# on the library path when its driver is of a newer branch than the host's
# (535.104.05 here), and only then.
compat() { # compat VERSION: a busybox image with cuda-compat libraries of that driver
  rm -rf "$T/compat"
  cp -a "$IMG" "$T/compat"
  mkdir -p "$T/compat/usr/local/cuda/compat"
  touch "$T/compat/usr/local/cuda/compat/libcuda.so.$1"
  ln -s "libcuda.so.$1" "$T/compat/usr/local/cuda/compat/libcuda.so.1"
}
compat 550.54.15
out=$("$RT" exec -v --gpu "$T/compat" sh -c 'echo "$LD_LIBRARY_PATH"' 2>"$T/compat.err")
expect_eq "$out" "/usr/local/cuda/compat:/run/rt-host/lib" "a newer driver branch in the image's CUDA compat directory goes first"
expect_match "$(cat "$T/compat.err")" "CUDA forward compatibility: .*driver 550.54.15.* host's driver 535.104.05" "-v says why"
compat 535.129.03
out=$("$RT" exec -v --gpu "$T/compat" sh -c 'echo "$LD_LIBRARY_PATH"' 2>"$T/compat.err")
expect_eq "$out" "/run/rt-host/lib" "compat libraries of the host's own branch are not used"
expect_match "$(cat "$T/compat.err")" "driver 535.129.03\) is not used: the host's driver 535.104.05 is as new" "-v says why not"
expect_eq "$("$RT" exec --gpu "$IMG" sh -c 'echo "$LD_LIBRARY_PATH"')" "/run/rt-host/lib" "an image without compat libraries: the host's driver only"

# GPUs left out of NVIDIA_VISIBLE_DEVICES lose their device nodes (a fake
# driver directory of two GPUs, and a fake /dev bound over the host's).
for g in "0000:17:00.0 GPU-aaaa 0" "0000:65:00.0 GPU-bbbb 1"; do
  set -- $g
  mkdir -p "$fake/gpus/$1" "$fake/dev/shm"
  printf 'Model: \t\t NVIDIA Fake\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t %s\n' "$2" "$1" "$3" \
    >"$fake/gpus/$1/information"
  : >"$fake/dev/nvidia$3"
done
: >"$fake/dev/nvidiactl"
: >"$fake/dev/nvidia-uvm"
printf 'gpu.procfs = %s\ngpu.dev = %s\n' "$fake/gpus" "$fake/dev" >>"$T/rt.conf"
devs() { NVIDIA_VISIBLE_DEVICES=$1 "$RT" exec --gpu --bind "$fake/dev:/dev" deb sh -c 'echo $(ls /dev) ${CUDA_VISIBLE_DEVICES-unset}'; }
expect_eq "$(devs 1)" "nvidia-uvm nvidia1 nvidiactl shm GPU-bbbb" "NVIDIA_VISIBLE_DEVICES=1: only GPU 1's node (and the control nodes) are seen"
expect_eq "$(devs GPU-aaaa)" "nvidia-uvm nvidia0 nvidiactl shm GPU-aaaa" "a GPU selected by UUID"
expect_eq "$(devs all)" "nvidia-uvm nvidia0 nvidia1 nvidiactl shm unset" "all GPUs"
expect_eq "$(devs none)" "nvidia-uvm nvidiactl shm unset" "none: no GPU node"
expect_eq "$(devs MIG-1234)" "nvidia-uvm nvidia0 nvidia1 nvidiactl shm MIG-1234" "a MIG device: every node stays"
out=$(NVIDIA_VISIBLE_DEVICES=1 "$RT" exec -v --gpu --bind "$fake/dev:/dev" deb true 2>&1)
expect_match "$out" "hide \`nvidia0\` in \`/dev\`" "-v shows what is hidden"
[ -e "$fake/dev/nvidia0" ] || fail "hiding a node left the host's untouched"
expect_status 125 "--gpu without a driver is an error" -- env RT_CONF=/dev/null "$RT" exec --gpu deb true
expect_match "$ERR" "no NVIDIA driver" "the error says there is no driver"
echo 'driver bnxt_re' >"$fake/etc/libibverbs.d/bnxt_re.driver"
# (the host directory is also seen through the working directory's bind:
# whether it is mounted at its own path is read from mountinfo)
verbs_conf='ls /run/rt-host/lib; echo "drivers=${RDMAV_DRIVERS-unset}"; echo "mounted=$(grep -c " '"$fake"'/etc/libibverbs.d " /proc/self/mountinfo)"'
out=$(RDMAV_DRIVERS=mine "$RT" exec --ib deb sh -c "$verbs_conf")
expect_match "$out" "libibverbs.so.1" "--ib injects libibverbs"
expect_match "$out" "libnl-3.so.200" "--ib injects what libibverbs needs"
expect_match "$out" "drivers=bnxt_re:mlx5:mine" \
  "an image without the provider configuration gets its providers' names in RDMAV_DRIVERS, before the caller's"
expect_match "$out" "mounted=0" "and no mount is made for the configuration directory"
# An image with the directory has the host's bound over its own.
"$RT_IMAGE" import -q "$RT_DEBIAN_ROOTFS" debconf
mkdir -p "$RT_STORAGE/images/debconf/rootfs$fake/etc/libibverbs.d"
out=$("$RT" exec --ib debconf sh -c "$verbs_conf")
expect_match "$out" "drivers=unset" "an image with the configuration directory: no RDMAV_DRIVERS"
expect_match "$out" "mounted=1" "the host's configuration is bound over the image's"
# A configuration that names a provider by path is bound as it is.
echo "driver $fake/providers/libx" >"$fake/etc/libibverbs.d/x.driver"
out=$("$RT" exec --ib deb sh -c "$verbs_conf")
expect_match "$out" "drivers=unset" "a provider named by path: no RDMAV_DRIVERS"
expect_match "$out" "mounted=1" "the configuration is bound"
rm "$fake/etc/libibverbs.d/x.driver" "$fake/etc/libibverbs.d/bnxt_re.driver"
# The host's own verbs stack into an image with a glibc and an /etc of its
# own (no /etc/libibverbs.d): nothing is laid over that /etc.
if [ -d /etc/libibverbs.d ] && /sbin/ldconfig -p | grep -q 'libibverbs.so.1 '; then
  cp -a "$IMG" "$T/bbglibc"
  mkdir -p "$T/bbglibc/lib/x86_64-linux-gnu"
  cp /lib/x86_64-linux-gnu/libc.so.6 "$T/bbglibc/lib/x86_64-linux-gnu/"
  out=$(RT_CONF=/dev/null "$RT" exec --ib "$T/bbglibc" sh -c 'echo "$RDMAV_DRIVERS"; echo "overlays=$(grep -c " overlay " /proc/self/mountinfo)"')
  expect_match "$out" "mlx5" "the host's providers are named"
  expect_match "$out" "overlays=0" "and no overlay is laid on the image's /etc"
else
  echo "note: no libibverbs on this host; the host's own stack is not tried"
fi
out=$("$RT" exec deb sh -c 'ls /run/rt-host 2>&1 || true')
expect_match "$out" "No such file" "nothing is injected unless asked (no /dev/infiniband here)"
# The links are made once, in the store, and bound at each start.
trees=$RT_STORAGE/host-trees
rm -rf "$trees"
expect_eq "$("$RT" exec --gpu deb readlink /run/rt-host/lib/libcuda.so.1)" "../.d/0/libcuda.so.535.104.05" \
  "without a kept tree, a start makes the links"
expect_eq "$(ls "$trees" | wc -l)" 1 "... and keeps them in the store, one tree"
expect_match "$("$RT" exec -vv --gpu deb true 2>&1)" "host files: the tree kept in .$trees/[0-9a-f]{32}." "... which the next start binds"
"$RT_IMAGE" prune >/dev/null
expect_eq "$(ls "$trees" | wc -l)" 1 "rt prune keeps a tree a start used this week"
# A plan is kept while the files it was made from stay as they were.
"$RT" exec --gpu deb true
expect_match "$("$RT" exec -v --gpu deb true 2>&1)" "host injection: as planned at an earlier start" \
  "a second start takes the plan of the first"
so libnvidia-ml.so.1 libnvidia-ml.so.535.104.05  # a driver library replaced
out=$("$RT" exec -v --gpu deb cat /run/rt-host/lib/libnvidia-ml.so.1 2>"$T/v.err" | cmp - "$fake/lib/libnvidia-ml.so.535.104.05" 2>&1) ||
  fail "after a driver library changed, the old one was injected: $out"
grep -q "as planned at an earlier start" "$T/v.err" && fail "a plan of files that changed was taken"
pass "a changed driver library is planned again, and the new one injected"
# An image that gains a library the host's needs takes it from then on.
cp -a "$old" "$T/gains"
expect_match "$("$RT" exec -v --ib "$T/gains" true 2>&1)" "libnl-3.so.200. from the host .*: the image has none" \
  "libnl-3 from the host while the image has none"
cp "$fake/lib/libnl-3.so.200" "$T/gains/lib/x86_64-linux-gnu/"
out=$("$RT" exec -v --ib "$T/gains" true 2>&1)
expect_match "$out" "libnl-3.so.200. from the image" "once the image has it, libnl-3 comes from the image"
[[ $out == *"as planned at an earlier start"* ]] && fail "the plan made before the image changed was taken"
# The host's own verbs stack into an image without rdma-core or UCX: the
# plugin directories it lacks cost no mount point there. UCX finds its
# modules beside the injected libucs (a link ucx in /run/rt-host/lib);
# libibverbs, its provider directory absent, loads each provider by name
# through the library path, as here by dlopen.
libdir=/usr/lib/x86_64-linux-gnu
if [ -e "$libdir/libucs.so.0" ] && [ -e "$libdir/libibverbs/libmlx5-rdmav34.so" ]; then
  out=$(env RT_CONF=/dev/null "$RT" exec -v --ib deb python3 -c '
import ctypes
ctypes.CDLL("libmlx5-rdmav34.so")
uct = ctypes.CDLL("libuct.so.0")
c, n = ctypes.c_void_p(), ctypes.c_uint()
print("uct", uct.uct_query_components(ctypes.byref(c), ctypes.byref(n)), n.value > 0)
for line in open("/proc/self/maps"):
    f = line.split()[-1]
    if "libuct_" in f or "libmlx5" in f: print("mapped", f)
' 2>&1)
  expect_match "$out" "ucx.: the image has none; found beside the injected libucs.so.0" "-v: UCX's modules are found beside libucs"
  expect_match "$out" "libibverbs.: the image has none; found beside the injected libibverbs.so.1" "-v: so are the verbs providers"
  expect_match "$out" "uct 0 True" "UCX loads its transports"
  expect_match "$out" "mapped /run/rt-host/\.d/[0-9]+/ucx/libuct_cma" "... the host's modules, from its ucx directory"
  expect_match "$out" "mapped /run/rt-host/\.d/[0-9]+/libmlx5\.so" "a provider loaded by name is the host's"
  n=$(env RT_CONF=/dev/null "$RT" exec --ib deb sh -c "awk '\$5 ~ \"^/(usr/)?lib\"' /proc/self/mountinfo | wc -l")
  expect_eq "$n" 0 "nothing is mounted in the image's library directories"
fi
tree_listing "$RT_STORAGE/images/deb/rootfs" >"$T/deb.after"
diff "$T/deb.before" "$T/deb.after" >&2 || fail "injecting host files changed the image"
pass "the image is as imported after --mpi, --gpu and --ib"

# A part nobody asked for that cannot go in is left out with a warning and
# does not stop what was asked for: an image that asks for a GPU
# (NVIDIA_VISIBLE_DEVICES) but whose glibc (2.3) is older than the host
# driver needs (getentropy: 2.25), with --ib asked for.
mkdir -p "$T/newcuda" "$T/ctx-oldgpu"
echo '#include <unistd.h>
int cuInit(unsigned f){char b[1];return getentropy(b,f);}' >"$T/cuda.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$T/newcuda/libcuda.so.1" "$T/cuda.c"
printf 'ld_cache = %s\ngpu.libraries = %s\nib.libraries = libibverbs.so.1\nib.paths = %s\ngpu.dev = %s\n' "$T/ld.so.cache" \
  "$T/newcuda/libcuda.so.1" "$fake/etc/libibverbs.d" "$fake/dev" >"$T/rt-newcuda.conf"
printf 'FROM oldglibc\nENV NVIDIA_VISIBLE_DEVICES=all\n' >"$T/ctx-oldgpu/Dockerfile"
tar -C "$old" -cf "$T/oldglibc.tar" .
"$RT_IMAGE" import -q "$T/oldglibc.tar" oldglibc
"$RT" build -q -t oldgpu "$T/ctx-oldgpu" >/dev/null || fail "rt build of an ENV-only image failed"
out=$(RT_CONF="$T/rt-newcuda.conf" "$RT" exec --ib oldgpu sh -c 'ls /run/rt-host/lib' 2>"$T/auto.err") ||
  fail "--ib with an automatic GPU that cannot go in: $(cat "$T/auto.err")"
expect_match "$out" "libibverbs.so.1" "what was asked for (--ib) is injected"
[[ $out == *libcuda* ]] && fail "the driver the image's glibc cannot take must be left out"
expect_match "$(cat "$T/auto.err")" "warning: not injecting the host's NVIDIA driver \(not asked for; --no-gpu .*needs 2\.25" \
  "the warning names the part left out and why"
expect_status 0 "--no-gpu: no warning" -- env RT_CONF="$T/rt-newcuda.conf" "$RT" exec --no-gpu oldgpu true
[ -n "$ERR" ] && fail "--no-gpu still warned: $ERR"
expect_status 125 "asked for with --gpu --no-glibc-replace, the same driver is refused" -- \
  env RT_CONF="$T/rt-newcuda.conf" "$RT" exec --gpu --no-glibc-replace oldgpu true
expect_match "$ERR" "newcuda/libcuda.so.1. needs 2\.25" "the refusal names the driver library"
out=$(RT_CONF="$T/rt-newcuda.conf" "$RT" exec -v --gpu oldgpu ls /run/rt-host/lib 2>"$T/err") ||
  fail "--gpu into an image with an older glibc: $(cat "$T/err")"
expect_match "$out" "libcuda.so.1" "asked for with --gpu, it goes in"
expect_match "$(cat "$T/err")" "glibc: .*newcuda/libcuda.so.1. needs 2\.25: the host's glibc" "with the host's glibc in the image's place"

# --- CDI -------------------------------------------------------------------
mkdir -p "$T/cdi"
cat >"$T/cdi/vendor.json" <<JSON
{"cdiVersion": "0.6.0", "kind": "example.com/gpu",
 "containerEdits": {"env": ["EXAMPLE_DRIVER=535"]},
 "devices": [{"name": "0", "containerEdits": {
   "env": ["EXAMPLE_VISIBLE=0"],
   "mounts": [{"hostPath": "$fake/lib/libcuda.so.535.104.05", "containerPath": "/usr/lib/example/libcuda.so.1", "options": ["ro"]}]}}]}
JSON
out=$("$RT" exec --device example.com/gpu=0 deb sh -c 'echo "$EXAMPLE_DRIVER $EXAMPLE_VISIBLE"; echo "$LD_LIBRARY_PATH"; test -s /usr/lib/example/libcuda.so.1 && echo mounted')
expect_eq "$out" "535 0
/usr/lib/example
mounted" "--device applies a CDI spec's environment and mounts"
# YAML, as nvidia-ctk writes it, with its hooks: rt makes the links
# (create-symlinks) and puts the folders on the library path
# (update-ldcache) without writing the image; other hooks are reported.
cat >"$T/cdi/accel.yaml" <<YAML
---
cdiVersion: 0.5.0
kind: example.org/accel
containerEdits:
  env:
  - EXAMPLE_ACCEL=yes
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-ctk
    args: [nvidia-ctk, hook, update-ldcache, --folder, /usr/lib/accel]
  - hookName: createContainer
    path: /usr/bin/nvidia-ctk
    args: [nvidia-ctk, hook, create-symlinks, --link, libaccel.so.1::/usr/lib/accel/libaccel.so, --link, /usr/lib/accel/libaccel.so.1::/usr/lib/x86_64-linux-gnu/libaccel.so.1, --link=/bin/true::/usr/bin/env]
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, enable-cuda-compat, --host-driver-version=535.104.05]
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, chmod, --mode, "755", --path, /dev/dri]
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/null
    mounts:
    - hostPath: $fake/lib/libcuda.so.535.104.05
      containerPath: /usr/lib/accel/libaccel.so.1
      options: [ro, nosuid, nodev, bind]
YAML
out=$("$RT" exec -v --device example.org/accel=all deb sh -c 'echo "$EXAMPLE_ACCEL"; test -s /usr/lib/accel/libaccel.so.1 && echo mounted; echo "$LD_LIBRARY_PATH"; readlink /usr/lib/accel/libaccel.so /usr/lib/x86_64-linux-gnu/libaccel.so.1; cmp /usr/lib/accel/libaccel.so /usr/lib/accel/libaccel.so.1 && echo same; test -L /usr/bin/env || echo env kept' 2>"$T/err")
expect_eq "$out" "yes
mounted
/usr/lib/accel
libaccel.so.1
/usr/lib/accel/libaccel.so.1
same
env kept" "--device reads a YAML CDI spec; create-symlinks makes the links the image lacks (keeping its own /usr/bin/env), update-ldcache puts its folder on the library path"
expect_match "$(cat "$T/err")" "hook \`/usr/bin/nvidia-cdi-hook chmod\` is not run" "an unknown hook is reported as not run"
# enable-cuda-compat: the image's compat libraries of a newer branch than
# the hook's host driver go first, before the spec's folders.
compat 550.54.15
out=$("$RT" exec --device example.org/accel=0 "$T/compat" sh -c 'echo "$LD_LIBRARY_PATH"')
expect_eq "$out" "/usr/local/cuda/compat:/usr/lib/accel" "a CDI enable-cuda-compat hook puts the image's newer compat libraries first"
compat 470.57.02
out=$("$RT" exec --device example.org/accel=0 "$T/compat" sh -c 'echo "$LD_LIBRARY_PATH"')
expect_eq "$out" "/usr/lib/accel" "an older compat driver than the hook's host driver is not used"
[ -e "$RT_STORAGE/images/deb/rootfs/usr/lib/accel" ] && fail "a CDI link was written into the image"
printf 'kind: example.org/broken\ndevices: [\n' >"$T/cdi/broken.yaml"
# Specs are read in order only until the kinds asked for are found.
expect_status 0 "a broken YAML spec after the one needed is not read" -- "$RT" exec --device example.org/accel=0 deb true
expect_status 125 "a kind no readable spec declares is an error" -- "$RT" exec --device example.org/other=0 deb true
expect_match "$ERR" "no CDI spec for .example.org/other.*broken.yaml.*not valid YAML" "the error names the broken file"
rm "$T/cdi/broken.yaml"
expect_status 125 "an unknown CDI device is an error" -- "$RT" exec --device example.com/gpu=7 deb true
expect_match "$ERR" "has no device .7." "the error names the device"
