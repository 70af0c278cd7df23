#!/bin/bash
# rt's Slurm plugin (slurm/rt_spank.c) on the four-node cluster that
# test/run-all.sh starts with it in plugstack.conf: srun --container-image
# and pyxis's other options, as the unprivileged user.
#   - ranks on four nodes, one container per node; Open MPI (--mpi=pmix) and
#     MPICH (--mpi=pmi2) across them;
#   - every option: mounts with flags, workdir, env, home, writable,
#     remap-root, entrypoint, a named container kept across steps, save;
#   - an #SBATCH --container-image job script, as pyxis documents it;
#   - errors: a refused option (or srun --multi-prog, whose programs Slurm
#     takes from its file after the plugin) fails srun before any task
#     starts, a missing image fails the step at once, naming the node;
#     nothing is left running.
. "$(dirname "$0")/lib.sh"
[ -n "${RT_CLUSTER:-}" ] || skip "RT_CLUSTER not set (test/run-all.sh starts a cluster with test/hpc/cluster.sh)"
[ -s "${RT_DEBIAN_MPI_ROOTFS:-}" ] || skip "RT_DEBIAN_MPI_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
for c in mpicc mpicc.mpich sudo mksquashfs; do command -v "$c" >/dev/null || skip "$c missing"; done
on_head() { sudo -n "$RT_CLUSTER/on" head "$@"; }
on_head true || skip "cannot run commands on the cluster (sudo $RT_CLUSTER/on)"
on_head srun --help | grep -q -- --container-image || skip "the cluster's plugstack.conf has no rt plugin"
cd "$T"  # on the shared file system: every node sees it at this path
echo "rt plugin test image" >"$IMG/etc/marker"
mksquashfs "$IMG" "$T/img.sqfs" -quiet -no-progress -all-root >/dev/null
export RT_STORAGE="$T/store"  # a store on the shared file system, for the stored images below
"$RT_IMAGE" import -q "$RT_DEBIAN_MPI_ROOTFS" debmpi
"$RT_IMAGE" convert -q debmpi "$T/debmpi.sqfs"
tar -C "$IMG" -cf "$T/img.tar" .
"$RT_IMAGE" import -q "$T/img.tar" base
mkdir -p ctx
printf 'FROM base\nENV FOO=image\nENTRYPOINT ["/bin/echo", "entrypoint:"]\n' >ctx/Dockerfile
"$RT" build -q -t envimg ctx >/dev/null || fail "rt build of the test image"
mpicc -O2 -o "$T/hello-ompi" "$RT_SOURCE_DIR/test/hpc/mpi_hello.c"
mpicc.mpich -O2 -o "$T/hello-mpich" "$RT_SOURCE_DIR/test/hpc/mpi_hello.c"
srun_() { on_head env RT_STORAGE="$RT_STORAGE" timeout 120 srun -O "$@"; }

# --- Ranks and containers ----------------------------------------------------
out=$(srun_ -N 4 -n 8 --container-image="$T/img.sqfs" /bin/sh -c \
  'echo "$(hostname) $(readlink /proc/self/ns/user) $(readlink /proc/self/ns/mnt) $(cat /etc/marker)"; sleep 1' \
  2>"$T/err") || fail "srun -N 4 -n 8 --container-image: $(cat "$T/err")"
expect_eq "$(echo "$out" | awk '{print $1}' | sort | uniq -c | awk '{print $1 $2}' | tr '\n' ' ')" \
  "2node1 2node2 2node3 2node4 " "--container-image=IMG.sqfs: two tasks on each of four nodes"
expect_eq "$(echo "$out" | grep -c 'rt plugin test image')" 8 "every task runs in the image"
expect_eq "$(echo "$out" | sort -u | wc -l)" 4 "one container per node"
expect_eq "$(echo "$out" | awk '{print $2}' | sort -u | wc -l)" 4 "no two nodes share one"

# --- MPI ---------------------------------------------------------------------
ompi_run "Open MPI with --container-image" on_head "${ompi[@]}" timeout 120 srun -O --mpi=pmix -N 4 -n 8 \
  --container-image="$T/debmpi.sqfs" "$T/hello-ompi" 8
judge_mpi "srun --mpi=pmix --container-image (Open MPI)" "$out"
# MPICH's finalize over TCP can hang on these nodes without rt too: judged
# by its output within a bound.
out=$(on_head env MPIR_CVAR_CH3_INTERFACE_HOSTNAME= timeout 30 srun -O --mpi=pmi2 -N 4 -n 8 \
  --container-image="$T/debmpi.sqfs" "$T/hello-mpich" 8 2>"$T/err") || true
judge_mpi "srun --mpi=pmi2 --container-image (MPICH)" "$out"

# --- Options -----------------------------------------------------------------
mkdir -p data && echo in-data >data/file
one() { srun_ -N 1 -n 1 "$@" 2>"$T/err"; }
# one_with VAR=VALUE ARGS...: the same with VAR set in srun's environment.
one_with() {
  local var=$1
  shift
  on_head env RT_STORAGE="$RT_STORAGE" "$var" timeout 120 srun -O -N 1 -n 1 "$@" 2>"$T/err"
}
expect_eq "$(one --container-image="$T/img.sqfs" --container-mounts="$T/data:/data:ro+rprivate" \
  /bin/sh -c 'cat /data/file; touch /data/new 2>/dev/null && echo wrote || echo read-only')" "in-data
read-only" "--container-mounts SRC:DST:ro+rprivate"
expect_eq "$(one --container-image="$T/img.sqfs" --container-mounts="$T/data:/data,$T/data:/data2" \
  /bin/sh -c 'touch /data/new && cat /data2/file')" "in-data" "two mounts, the first writable"
expect_eq "$(one --container-image="$T/img.sqfs" --container-workdir=/etc /bin/sh -c pwd)" /etc "--container-workdir"
expect_eq "$(one_with FOO=host --container-image=envimg /bin/sh -c 'echo $FOO')" image "the image's ENV wins by default"
expect_eq "$(one_with FOO=host --container-image=envimg --container-env=FOO /bin/sh -c 'echo $FOO')" host \
  "--container-env=FOO: the host's value"
home=$(getent passwd "$(id -un)" | cut -d: -f6)
expect_eq "$(one --container-image="$T/img.sqfs" /bin/sh -c "test -d '$home' && echo yes")" yes "home is bound (rt's default)"
expect_eq "$(one --container-image="$T/img.sqfs" --no-container-mount-home /bin/sh -c "test -d '$home' && echo yes || echo no")" no \
  "--no-container-mount-home"
expect_eq "$(one --container-image="$T/img.sqfs" /bin/sh -c 'touch /new 2>/dev/null && echo wrote || echo read-only')" read-only \
  "read-only by default"
expect_eq "$(one --container-image="$T/img.sqfs" --container-writable /bin/sh -c 'touch /new && echo wrote')" wrote \
  "--container-writable"
expect_eq "$(one --container-image="$T/img.sqfs" --container-remap-root /bin/sh -c 'id -u')" 0 "--container-remap-root"
expect_eq "$(one --container-image="$T/img.sqfs" /bin/sh -c 'id -u')" "$(id -u)" "your own uid by default"
expect_eq "$(one --container-image=envimg --container-entrypoint hello)" "entrypoint: hello" "--container-entrypoint"
expect_eq "$(one --container-image=envimg /bin/echo hello)" "hello" "no entrypoint by default"

# A named container, kept across the steps of one job (salloc), per node.
out=$(on_head env RT_STORAGE="$RT_STORAGE" timeout 120 salloc -N 2 /bin/sh -c "
  srun -N 2 -n 2 --container-image=$T/img.sqfs --container-name=work /bin/sh -c 'echo \$(hostname) >/made-by; echo made'
  srun -N 2 -n 2 --container-name=work /bin/sh -c 'cat /made-by'
  srun -N 2 -n 2 --container-name=work:exec /bin/sh -c 'echo exec-ok'
  srun -N 1 -n 1 --container-name=work:create --container-image=$T/img.sqfs /bin/true || echo create-refused
  srun -N 1 -n 1 --container-name=other:exec /bin/true || echo exec-refused
" 2>"$T/err")
expect_eq "$(echo "$out" | grep -c made)" 2 "--container-name: made on both nodes"
expect_eq "$(echo "$out" | grep -c '^node[12]$')" 2 "--container-name: a later step sees what the first wrote, on each node"
expect_eq "$(echo "$out" | grep -c exec-ok)" 2 "--container-name=NAME:exec uses it"
expect_match "$out" "create-refused" "NAME:create of an existing container is refused"
expect_match "$out" "exec-refused" "NAME:exec of a missing container is refused"
expect_match "$(cat "$T/err")" "node1: --container-name=other:exec: the job has no container .other. on node1" \
  "the refusal names the node and the container"

# --container-save: a file rt exec then runs.
one --container-image="$T/img.sqfs" --container-save="$T/saved.sqfs" /bin/sh -c 'echo saved >/saved-marker' ||
  fail "--container-save: $(cat "$T/err")"
expect_eq "$("$RT" exec "$T/saved.sqfs" cat /saved-marker /etc/marker)" "saved
rt plugin test image" "--container-save wrote a SquashFS image that rt exec runs"
one --container-image="$T/img.sqfs" --container-writable --container-save="$T/saved2.sqfs" \
  /bin/sh -c 'echo saved2 >/saved-marker' || fail "--container-writable --container-save: $(cat "$T/err")"
expect_eq "$("$RT" exec "$T/saved2.sqfs" cat /saved-marker)" saved2 "... with --container-writable too"
out=$(on_head env RT_STORAGE="$RT_STORAGE" timeout 120 salloc -N 1 -n 2 /bin/sh -c "
  srun -n 2 --container-image=$T/img.sqfs --container-name=wr --container-writable /bin/sh -c 'echo w >/w-\$SLURM_PROCID'
  srun -n 1 --container-name=wr --container-writable /bin/sh -c 'cat /w-0 /w-1'
" 2>"$T/err") || fail "--container-name with --container-writable: $(cat "$T/err")"
expect_eq "$out" "w
w" "--container-name with --container-writable: both ranks write, a later step reads"

# --- A job script from pyxis's documentation ------------------------------------
cat >job.sh <<EOF
#!/bin/sh
#SBATCH --container-image $T/img.sqfs
cat /etc/marker
EOF
on_head env RT_STORAGE="$RT_STORAGE" sbatch --wait -N 1 -o "$T/job.out" "$T/job.sh" >/dev/null 2>"$T/err" ||
  fail "sbatch of an #SBATCH --container-image script: $(cat "$T/err"; cat "$T/job.out" 2>/dev/null)"
expect_match "$(cat "$T/job.out")" "rt plugin test image" "#SBATCH --container-image: the batch script runs in the image"

# --- Errors ------------------------------------------------------------------
start=$(date +%s)
expect_status 1 "a flag rt cannot honour fails srun" -- srun_ -N 4 --container-image="$T/img.sqfs" \
  --container-mounts="$T/data:/data:noexec" /bin/true
expect_match "$ERR" "rt cannot honour the flag .noexec." "the message names the flag"
expect_status 1 "a user in the image name is refused" -- srun_ -N 1 --container-image=me@example.org#img /bin/true
expect_match "$ERR" "a user name in the image .USER@. is not supported" "the message says why"
printf '0 /bin/true\n* /bin/echo task %%t\n' >multi.conf
expect_status 1 "srun --multi-prog with a container is refused" -- srun_ -N 2 -n 2 -J rt-plugin-multi \
  --container-image="$T/img.sqfs" --multi-prog multi.conf
expect_match "$ERR" "srun --multi-prog cannot run its tasks in a container" "the message says why"
expect_eq "$(on_head squeue -h -n rt-plugin-multi | wc -l)" 0 "no step of it left running"
expect_eq "$(srun_ -N 2 -n 2 --multi-prog multi.conf | sort | tr '\n' ' ')" "task 1 " \
  "srun --multi-prog without a container still runs on the host"
out=$(srun_ -N 4 -n 4 -l -J rt-plugin-missing --container-image="$T/missing.sqfs" /bin/true 2>&1) &&
  fail "a missing image must fail the step"
for n in 1 2 3 4; do
  expect_match "$out" "node$n: image .*missing.sqfs" "a missing image: node$n says so"
done
[ $(($(date +%s) - start)) -lt 60 ] || fail "the failing steps took over a minute"
pass "the failing steps ended at once"
# (SquashFS servers of earlier steps linger a while by design, for the
# job's next step; nothing may be left of the failed one.)
left=$(pgrep -u "$(id -u)" -f "missing.sqfs" || true)
[ -z "$left" ] || fail "processes of the failed step left running: $(ps -o pid,args -p "${left//$'\n'/,}")"
expect_eq "$(on_head squeue -h -n rt-plugin-missing | wc -l)" 0 "no step of it left running"
