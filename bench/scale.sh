#!/bin/bash
# The cost of a job start as nodes are added. Two parts on a real Slurm
# cluster of eight nodes (test/hpc/cluster.sh) and one on this node alone,
# all as the unprivileged rt-test:
#  1. in one allocation per N = 1, 2, 4, 8 nodes: `rt stage` of a SquashFS
#     image (its time), then rounds of steps `srun -N N -n N*R X /bin/true`
#     for R = 1, 4, 16 ranks per node, X = nothing (bare), `rt exec` of a
#     directory and of a SquashFS image on the shared file system, and of
#     the staged SquashFS copy, and srun --container-image= of the SquashFS
#     image (rt's Slurm plugin); and an MPI init + allreduce + finalize
#     (Open MPI, srun --mpi=pmix) bare and in rt (the image's Open MPI) for
#     R = 1, 4; all interleaved. Round 1 is the job's first step (in
#     brackets: no container, no image server yet); the medians are of the
#     later rounds.
#  2. on one node, with strace: what one node's start reads from the
#     shared file system (metadata operations on its paths, bytes read from
#     its files), for each image form, first and later steps; and rt's
#     memory there (peak RSS of a rank, RSS of a SquashFS image's server).
#  3. the model's inputs, measured on this node with no cluster: a step's
#     ranks emulated by Slurm's variables (two ranks of one node, so they
#     join), `rt stage` through stand-ins for srun and sbcast that copy on
#     this node; what the node's first rank and each later rank ask of a
#     directory standing for the shared file system (which holds the images,
#     $HOME and the working directory), by call and path, under strace, for
#     a directory image there, a SquashFS image there, its copy staged by
#     path, and an image staged by name; what a Python program's start
#     (python3 -c 'import json', Debian) opens there from a directory image
#     and reads of the SquashFS file; a rank's start and a node's first
#     container, timed. Then bench/scale-model.py prints the start model at
#     1 to 10,000 nodes x 64 ranks from them (doc/SCALE.md).
# Usage (as root): bench/scale.sh [model]   part 3 only (the default; under
#                  two minutes once the Debian image is cached)
#                  bench/scale.sh ROUNDS    parts 1, 2 and 3 (ROUNDS: 6 is usual)
# The Debian image comes from mmdebstrap (Debian mirror), once per machine;
# part 3 uses $RT_BUILD (default: the tree's build-bench/) when it holds rt
# and rt-image, else builds them there.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
# --- 3. The model's inputs on this node, and the model ----------------------------
model_part() {
  local m=/var/tmp/rt-bench-scale-model deb=/var/tmp/rt-bench-scale-debian b=${RT_BUILD:-$src/build-bench}
  if ! [ -x "$b/rt" ] || ! [ -x "$b/rt-image" ]; then
    b=$src/build-bench
    build_release rt rt-image
  fi
  rm -rf "$m"
  install -d -o rt-test "$m" "$m/bin" "$m/fake" "$m/shared" "$m/shared/home" "$m/node"
  install -m 0755 -o rt-test "$b/rt" "$b/rt-image" "$m/bin/"  # copies: a rebuild meanwhile changes nothing
  # The Debian image (python3) as a directory and as SquashFS, kept between
  # runs: it stands on the shared file system too.
  if ! [ -s "$deb/debian.sqfs" ]; then
    rm -rf "$deb"
    install -d -o rt-test "$deb" "$deb/rootfs"
    runuser -u rt-test -- tar -xf "$BENCH_DEBIAN" -C "$deb/rootfs" --exclude='./dev/*'
    runuser -u rt-test -- env RT_STORAGE="$deb/store" "$m/bin/rt" import -q "$BENCH_DEBIAN" debian --squash "$deb/debian.sqfs"
    rm -rf "$deb/store"
  fi
  # Stand-ins for srun and sbcast: the job has one node, this one, whose
  # store is $m/node/a; sbcast also copies into $m/node/b, a second node's
  # store that has no image of its own.
  cat >"$m/fake/srun" <<'SRUN'
#!/bin/bash
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
"$@" || exit
for arg; do set -- "$@" "${arg/%\/node\/a/\/node\/b}"; shift; done
RT_STORAGE=${RT_STORAGE/%\/node\/a/\/node\/b} "$@"
SRUN
  cat >"$m/fake/sbcast" <<'SBCAST'
#!/bin/bash
while [ $# -gt 2 ]; do shift; done
cp "$1" "$2" && cp "$1" "${2/\/node\/a\//\/node\/b\/}"
SBCAST
  chmod 0755 "$m/fake/srun" "$m/fake/sbcast"
  chown -R rt-test "$m"
  cat >"$m/node.sh" <<'NODE'
set -euo pipefail
m=$1 deb=$2
rt=$m/bin/rt shared=$m/shared a=$m/node/a b=$m/node/b
export HOME=$shared/home PATH=$m/fake:$PATH USER=rt-test
cd "$HOME"  # a job's working directory: on the shared file system, as home is
bash "$m/src/examples/make-busybox-image.sh" "$shared/img" >/dev/null
mksquashfs "$shared/img" "$shared/img.sqfs" -comp zstd -all-root -quiet -no-progress >/dev/null
cp "$shared/img.sqfs" "$shared/staged.sqfs"
tar -C "$shared/img" -cf "$m/img.tar" .
RT_STORAGE=$a "$rt" import -q "$m/img.tar" bb --format sqfs
RT_STORAGE=$b "$rt" images >/dev/null 2>&1 || true
export SLURM_JOB_ID=900001
RT_STORAGE=$a "$rt" stage -q "$shared/staged.sqfs" bb
rank() {  # STEP RANK RANKS: Slurm's variables for one rank of a step on one node
  echo SLURM_JOB_ID=$SLURM_JOB_ID SLURM_STEP_ID=$1 SLURM_PROCID=$2 SLURM_LOCALID=$2 SLURM_NODEID=0 \
    SLURM_STEP_NUM_NODES=1 SLURM_STEP_TASKS_PER_NODE=$3 SLURM_STEP_NODELIST=node0 SLURMD_NODENAME=node0
}
# strace_rank FILE STORE STEP RANK RANKS IMAGE PROGRAM...: one rank under strace,
# and whatever it starts (the node's container, the image's server).
strace_rank() {
  local out=$1 store=$2 step=$3 r=$4 n=$5
  shift 5
  strace -f -y -qq -o "$out" -e trace=%file,read,pread64,readv,preadv,clone,clone3,fork,vfork \
    env $(rank "$step" "$r" "$n") RT_STORAGE="$store" "$rt" exec "$@" >/dev/null
}
# pair LABEL STORE STEP IMAGE PROGRAM...: a step of two ranks on the node,
# each under strace: the first starts the node's container, the second
# joins it while it waits.
pair() {
  local label=$1 store=$2 step=$3
  shift 3
  strace_rank "$m/trace.0" "$store" "$step" 0 2 "$@" &
  for _ in $(seq 500); do pgrep -u "$(id -u)" -f '^rt-join ' >/dev/null && break; sleep 0.01; done
  strace_rank "$m/trace.1" "$store" "$step" 1 2 "$@"
  wait
  count "$label.first" "$m/trace.0"
  count "$label.later" "$m/trace.1"
}
# count LABEL TRACE: prints LABEL opens lookups bytes [ranges of 1 MiB and
# 8 MiB read of a SquashFS file there]; the calls, by path, go to $m/calls.LABEL.
count() {
  local label=$1
  awk -v s="$shared" -v d="$deb" -v label="$label" -v calls="$m/calls.$label" '
    function shared(t) { return index(t, "\"" s) || index(t, "\"" d) || index(t, "<" s) || index(t, "<" d) }
    # Reads: a descriptor is the file the trace last named for it in that
    # process or the one it came from (strace cannot name them in a server
    # that is no longer dumpable); a call cut in two ends in its "resumed" half.
    /(clone|clone3|fork|vfork)(\(| resumed>).* = [0-9]+$/ { parent[$NF] = $1; next }
    /^[0-9]+ +(read|pread64|readv|preadv)\(/ || /<\.\.\. (read|pread64|readv|preadv) resumed>/ {
      if (/<\.\.\. [a-z0-9]+ resumed>/) { fd = wait_fd[$1]; delete wait_fd[$1] }
      else {
        fd = $2; sub(/^[a-z0-9]+\(/, "", fd)
        if (fd ~ /</) { f = fd; sub(/<.*/, "", fd); sub(/^[^<]*</, "", f); sub(/>.*/, "", f); file[$1, fd] = f }
        else sub(/,.*/, "", fd)
        if (/<unfinished \.\.\.>/) { wait_fd[$1] = fd; next }
      }
      for (q = $1; q != "" && !((q, fd) in file); q = parent[q]) {}
      f = q == "" ? "" : file[q, fd]
      if (index(f, s) == 1 || index(f, d) == 1) {
        n = $NF; if (n > 0) bytes += n
        if (/pread64/) { off = $0; sub(/\) += -?[0-9]+ *$/, "", off); sub(/.*, /, "", off)
          r1[int(off / 1048576)] = 1; r8[int(off / 8388608)] = 1 }
      }
      next
    }
    /resumed>/ { next }                          # counted at its start
    { gsub(/AT_FDCWD<[^>]*>/, "AT_FDCWD") }  # -y names the working directory: no lookup of it
    /^[0-9]+ +getcwd\(/ { next }                # the kernel answers from its own dentries
    /^[0-9]+ +[a-z0-9_]+\([0-9]+</ {            # a path below a directory descriptor: judged by it
      p = $0; sub(/^[^<]*</, "", p); sub(/>.*/, "", p)
      if (index(p, s) != 1 && index(p, d) != 1) next
      call = $2; sub(/\(.*/, "", call)
      if (call ~ /^(open|openat|openat2|execve|creat)$/ && !/O_PATH/) opens++; else lookups++
      seen[call " " p "/..."]++
      next
    }
    shared($0) {
      call = $2; sub(/\(.*/, "", call)
      p = $0; sub(/^[^"]*"/, "", p); sub(/".*/, "", p)
      if (call ~ /^(open|openat|openat2|execve|creat)$/ && !/O_PATH/) opens++; else lookups++
      seen[call " " p]++
    }
    END {
      for (k in seen) print seen[k], k > calls
      for (k in r1) n1++; for (k in r8) n8++
      printf "%s %d %d %d %d %d\n", label, opens, lookups, bytes, n1, n8
    }' "$2"
}
# program LABEL TRACE: the file operations of the program itself, once rt
# has exec'd it (paths inside the container; /proc, /dev and /sys left out):
# with a directory image they are the image's files on the shared file system.
program() {
  awk -v label="$1" '
    /resumed>/ { next }
    /^[0-9]+ +execve\("[^"]*python3"/ && / = 0$/ { mine[$1] = 1; next }
    !($1 in mine) || /^[0-9]+ +(read|pread64|readv|preadv)\(/ { next }
    {
      p = $0; if (!sub(/^[^"]*"/, "", p)) next; sub(/".*/, "", p)
      if (p ~ /^\/(proc|dev|sys)(\/|$)/) next
      call = $2; sub(/\(.*/, "", call)
      if (call ~ /^(open|openat|openat2|execve|creat)$/ && !/O_PATH/) opens++; else lookups++
    }
    END { printf "%s %d %d 0 0 0\n", label, opens, lookups }' "$2"
}
rm -rf "$a/sqfs-facts" "$b/sqfs-facts"
export RT_SQUASHFS_LINGER=1
{
  pair dir "$a" 1 "$shared/img" /bin/true
  pair pfs "$b" 2 "$shared/img.sqfs" /bin/true
  pair path "$b" 3 "$shared/staged.sqfs" /bin/true
  pair name "$b" 4 bb /bin/true
  strace_rank "$m/trace.0" "$b" 5 0 1 "$deb/rootfs" python3 -c 'import json'
  count prog.dir "$m/trace.0"
  program prog.files "$m/trace.0"
  strace_rank "$m/trace.0" "$b" 6 0 1 "$deb/debian.sqfs" python3 -c 'import json'
  count prog.sqfs "$m/trace.0"
} >"$m/counts"
# Times: a rank's start beside the bare program's, and a node's first
# container (a server started for the image file: RT_SQUASHFS_LINGER=0).
export RT_STORAGE=$b
env $(rank 7 0 1000) "$rt" exec bb /bin/sleep 60 &  # the step's container, waiting for 999 more ranks
sleep 1
# Medians of runs interleaved with the bare program: a rank joining that
# container (200), a node's first container of another image (20: its facts
# kept), and of that image read anew (10: its facts removed).
times=$(python3 - "$rt" "$shared/img.sqfs" $(rank 7 1 1000) <<'PY'
import os, statistics, subprocess, sys, time
rt, img, env = sys.argv[1], sys.argv[2], dict(os.environ)
env.update(kv.split("=", 1) for kv in sys.argv[3:])
alone = {k: v for k, v in os.environ.items()}
def run(argv, e, pre=None):
    while subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", "^rt-sqfs .*img.sqfs"],
                         stdout=subprocess.DEVNULL).returncode == 0:
        time.sleep(0.01)  # the last server still leaving: it would be started over
    if pre: pre()
    s = time.perf_counter()
    subprocess.run(argv, env=e, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - s) * 1e3
def facts_gone():
    subprocess.run(["rm", "-rf", os.environ["RT_STORAGE"] + "/sqfs-facts"], check=True)
once = dict(alone, RT_SQUASHFS_LINGER="0")
t = {"bare": [], "joined": [], "attach": [], "cold": []}
for i in range(200):
    t["bare"].append(run(["/bin/true"], env))
    t["joined"].append(run([rt, "exec", "bb", "/bin/true"], env))
    if i % 10 == 0:
        t["attach"].append(run([rt, "exec", img, "/bin/true"], once))
    if i % 20 == 0:
        t["cold"].append(run([rt, "exec", img, "/bin/true"], once, facts_gone))
print(" ".join("%.2f" % statistics.median(t[k]) for k in ("bare", "joined", "attach", "cold")))
PY
)
read -r bare joined attach cold <<<"$times"
kill %1 2>/dev/null || true
wait || true
awk -v bare="$bare" -v joined="$joined" -v attach="$attach" -v cold="$cold" -v size="$(stat -c %s "$deb/debian.sqfs")" '
  { f[$1] = $0; o[$1] = $2; l[$1] = $3; b[$1] = $4; r1[$1] = $5; r8[$1] = $6 }
  END {
    split("dir pfs path name", forms, " ")
    for (i = 1; i <= 4; i++) {
      x = forms[i]
      printf "%s.o0=%d\n%s.l0=%d\n%s.b0=%d\n%s.o1=%d\n%s.l1=%d\n%s.b1=%d\n", x, o[x ".first"], x, l[x ".first"],
        x, b[x ".first"], x, o[x ".later"], x, l[x ".later"], x, b[x ".later"]
    }
    printf "prog.o=%d\nprog.l=%d\nprog.sqfs_bytes=%d\nprog.ranges_1m=%d\nprog.ranges_8m=%d\n", o["prog.files"],
      l["prog.files"], b["prog.sqfs"], r1["prog.sqfs"], r8["prog.sqfs"]
    printf "t_rank_ms=%.2f\nt_attach_ms=%.2f\nt_attach_cold_ms=%.2f\nimage_bytes=%d\n", joined - bare, attach - bare, cold - bare, size
    printf "# bare %.2f ms, joined rank %.2f ms, first container %.2f ms (facts kept), %.2f ms (image read)\n", bare, joined, attach, cold
  }' "$m/counts" >"$m/inputs"
RT_STORAGE=$a "$rt" stage -q --clean || true
NODE
  chown rt-test "$m/node.sh"
  install -d -o rt-test "$m/src" "$m/src/examples"
  install -m 0755 -o rt-test "$src/examples/make-busybox-image.sh" "$m/src/examples/"
  echo
  echo "One node's start, by image form: the first rank of a step and a later one (joining it), under strace;"
  echo "operations on the shared file system (opens and execs | lookups) and bytes read there:"
  runuser -u rt-test -- bash "$m/node.sh" "$m" "$deb"
  column -t "$m/counts" | sed 's/^/  /'
  echo "(columns: start, opens, lookups, bytes, 1 MiB and 8 MiB ranges of a SquashFS file read)"
  for f in path.first path.later name.first; do
    echo "  $f, by call and path (count, call, path):"
    sort -k3 "$m/calls.$f" 2>/dev/null | sed "s|$m/shared|SHARED|; s/^/    /"
  done
  echo "Inputs (key=value; $m/inputs):"
  sed 's/^/  /' "$m/inputs"
  echo
  python3 "$src/bench/scale-model.py" "$m/inputs"
}

case "${1:-model}" in
  model) rounds=0 ;;
  *[!0-9]* | 0) echo "usage: bench/scale.sh [model | ROUNDS]" >&2; exit 2 ;;
  *) rounds=$1 ;;
esac
[ "$(id -u)" = 0 ] || { echo "bench/scale.sh: run it as root (it makes rt-test, and starts a cluster)" >&2; exit 1; }
. "$src/bench/common.sh"
debian_rootfs
[ -c /dev/fuse ] && chmod 0666 /dev/fuse
id rt-test >/dev/null 2>&1 || useradd --create-home --shell /bin/bash rt-test
[ "$rounds" = 0 ] && { model_part; exit 0; }
work=/var/tmp/rt-bench-scale
cluster=/var/tmp/rt-bench-scale-cluster
cleanup() { bash "$src/test/hpc/cluster.sh" stop "$cluster" || true; }
trap cleanup EXIT
copy_tree "$work"
as_user() { runuser -u rt-test -- "$@"; }
as_user bash -c "cd '$work' && . bench/common.sh && src='$work' && build_release rt rt-image rt_spank"
rt=$work/build-bench/rt
as_user bash "$work/examples/make-busybox-image.sh" "$work/img" >/dev/null
as_user mksquashfs "$work/img" "$work/img.sqfs" -comp zstd -all-root -quiet -no-progress >/dev/null
as_user cp "$work/img.sqfs" "$work/staged.sqfs"  # its own server and facts
as_user env RT_STORAGE="$work/store" "$rt" import -q "$BENCH_DEBIAN" debian
as_user env RT_STORAGE="$work/store" "$rt" convert -q debian "$work/debian.sqfs"
as_user rm -rf "$work/store"
as_user mpicc -O2 -o "$work/hello" "$work/test/hpc/mpi_hello.c"
bash "$src/test/hpc/cluster.sh" start 8 "$cluster" "$work" >/dev/null
install -m 0644 "$work/build-bench/rt_spank.so" "$cluster/rt_spank.so"  # root's: slurmstepd loads it
echo "required $cluster/rt_spank.so rt=$rt" >"$cluster/plugstack.conf"
on() { CLUSTER_DIR=$cluster bash "$cluster/cluster.sh" on "$1" --user rt-test "${@:2}"; }

echo "$("$rt" --version 2>&1 | head -1), $(on head srun --version), kernel $(uname -r), $(nproc) cores, 8 emulated nodes"

# --- 1. Job starts ----------------------------------------------------------------
# One allocation per N; the steps run inside it, each timed there.
cat >"$work/steps.sh" <<'STEPS'
set -euo pipefail
rt=$1 work=$2 n=$3 rounds=$4
cd "$work"  # the steps' working directory, which rt binds: the MPI program is there
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx \
  OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 OMPI_MCA_oob_tcp_disable_ipv6_family=1
step() {  # KEY ROUND COMMAND...: a step that fails or hangs (120 s) is counted as failed
  local key=$1 round=$2 s e
  shift 2
  s=$(date +%s%N)
  if ! timeout 120 "$@" >/dev/null 2>"$work/err.$n"; then
    echo "bench: $key (round $round) failed: $(tail -3 "$work/err.$n")" >&2
    echo "$key|$round|fail"
    return
  fi
  e=$(date +%s%N)
  echo "$key|$round|$(( (e - s) / 1000 ))"
}
step "$n stage" 1 "$rt" stage -q "$work/staged.sqfs"
for r in $(seq "$rounds"); do
  for per in 1 4 16; do
    np=$((n * per))
    step "$n $per bare" "$r" srun -O -N "$n" -n "$np" /bin/true
    step "$n $per dir" "$r" srun -O -N "$n" -n "$np" "$rt" exec "$work/img" /bin/true
    step "$n $per sqfs" "$r" srun -O -N "$n" -n "$np" "$rt" exec "$work/img.sqfs" /bin/true
    step "$n $per staged" "$r" srun -O -N "$n" -n "$np" "$rt" exec "$work/staged.sqfs" /bin/true
    step "$n $per plugin" "$r" srun -O -N "$n" -n "$np" --container-image="$work/img.sqfs" /bin/true
    [ "$per" -le 4 ] || continue
    step "$n $per mpi-bare" "$r" srun -O --mpi=pmix -N "$n" -n "$np" "$work/hello" "$np"
    step "$n $per mpi-rt" "$r" srun -O --mpi=pmix -N "$n" -n "$np" "$rt" exec "$work/debian.sqfs" "$work/hello" "$np"
  done
done
"$rt" stage -q --clean
STEPS
chown rt-test "$work/steps.sh"
declare -A t first failed
for n in 1 2 4 8; do
  on head salloc -O -N "$n" -n $((n * 16)) bash "$work/steps.sh" "$rt" "$work" "$n" "$rounds" \
    >"$work/steps.out" 2>"$work/salloc.err" || { echo "bench: salloc -N $n failed: $(cat "$work/salloc.err")" >&2; exit 1; }
  while IFS='|' read -r key round us; do
    if [ "$us" = fail ]; then failed[$key]=$(( ${failed[$key]:-0} + 1 ));
    elif [ "$round" = 1 ]; then first[$key]=$us; else t[$key]+="$us "; fi
  done <"$work/steps.out"
  grep "^bench:" "$work/salloc.err" >&2 || true
done
ms() { awk -v us="$1" 'BEGIN {printf "%.1f", us / 1000}'; }
cell() { printf '%s [%s]%s' "$(ms "$(echo "${t[$1]:-0}" | median)")" "$(ms "${first[$1]:-0}")" "${failed[$1]:+ ${failed[$1]}x failed}"; }
minus() { ms $(( $(echo "${t[$1]:-0}" | median) - $(echo "${t[$2]:-0}" | median) )); }
echo
echo "rt stage of a $(( $(stat -c %s "$work/staged.sqfs") / 1024 )) KiB SquashFS file (sbcast), ms:" \
  "$(for n in 1 2 4 8; do printf 'N=%s %s  ' "$n" "$(ms "${first[$n stage]}")"; done)"
echo
echo "srun -N N -n N*R X /bin/true inside one allocation, wall ms: median of rounds 2..$rounds [round 1]"
printf '%-3s %-3s %16s %16s %16s %16s %16s %9s %9s %9s %9s\n' N R bare "rt dir" "rt sqfs" "rt staged" "plugin sqfs" \
  dir-bare sqfs-bare stgd-bare plug-sqfs
for n in 1 2 4 8; do
  for per in 1 4 16; do
    c="$n $per"
    printf '%-3s %-3s %16s %16s %16s %16s %16s %9s %9s %9s %9s\n' "$n" "$per" "$(cell "$c bare")" "$(cell "$c dir")" \
      "$(cell "$c sqfs")" "$(cell "$c staged")" "$(cell "$c plugin")" "$(minus "$c dir" "$c bare")" \
      "$(minus "$c sqfs" "$c bare")" "$(minus "$c staged" "$c bare")" "$(minus "$c plugin" "$c sqfs")"
  done
done
echo
echo "srun --mpi=pmix -N N -n N*R mpi_hello (init, allreduce, finalize), wall ms: median [round 1]"
printf '%-3s %-3s %16s %16s %9s\n' N R bare "rt sqfs" rt-bare
for n in 1 2 4 8; do
  for per in 1 4; do
    c="$n $per"
    printf '%-3s %-3s %16s %16s %9s\n' "$n" "$per" "$(cell "$c mpi-bare")" "$(cell "$c mpi-rt")" \
      "$(minus "$c mpi-rt" "$c mpi-bare")"
  done
done

# --- 2. One node's reads of the shared file system, and rt's memory ---------------
# strace -f -y of one rank (and the image server it starts, which exits with
# the container: RT_SQUASHFS_LINGER=0), in a fresh node-local store for the
# first step, then again for a later one (facts kept; a directory image's
# node has nothing to keep). Operations: calls naming a path under $work;
# bytes: reads from descriptors of files there.
cat >"$work/io.sh" <<'IO'
set -euo pipefail
rt=$1 work=$2
store=/var/tmp/rt-bench-io.$$
rm -rf "$store"
trace() {  # WHAT IMAGE
  strace -f -y -qq -o "$work/trace" -e trace=%file,read,pread64,readv,preadv \
    env RT_SQUASHFS_LINGER=0 "$rt" exec "$2" /bin/true
  awk -v w="$work/" -v what="$1" '
    /^[0-9]+ +(read|pread64|readv|preadv)\(/ { if (index($0, "<" w)) { n = $NF; if (n > 0) bytes += n }; next }
    index($0, "\"" w) || index($0, "<" w) { ops++ }
    END { printf "%-34s %5d operations %9d bytes\n", what, ops, bytes }' "$work/trace"
}
export RT_STORAGE=$store
"$rt" stage -q "$work/staged.sqfs"
trace "directory image, first step" "$work/img"
trace "directory image, later step" "$work/img"
trace "SquashFS on shared FS, first step" "$work/img.sqfs"
trace "SquashFS on shared FS, later step" "$work/img.sqfs"
trace "staged SquashFS copy, first step" "$work/staged.sqfs"
trace "staged SquashFS copy, later step" "$work/staged.sqfs"
echo "peak RSS of a rank (rt exec, then /bin/true): $(command time -f %M "$rt" exec "$work/img.sqfs" /bin/true 2>&1 >/dev/null) KiB"
"$rt" exec "$work/img.sqfs" /bin/true  # leaves the image's server running (it lingers)
echo "RSS of the image's server: $(ps -o rss= -p "$(pgrep -n -u "$(id -u)" -f '^rt-sqfs ')") KiB"
"$rt" stage -q --clean
rm -rf "$store"
IO
chown rt-test "$work/io.sh"
echo
echo "One node's start, what it asks of the shared file system (strace):"
on head salloc -N 1 srun -N 1 -n 1 bash "$work/io.sh" "$rt" "$work"

model_part
