#!/bin/bash
# rt across a real Slurm cluster of four nodes (test/hpc/cluster.sh, started
# by test/run-all.sh): each node has its own network, mount and UTS
# namespaces, its own /tmp, /var/tmp (and so its own default store) and
# /dev/shm; this test's directory is the shared file system. As the
# unprivileged user, through `sudo $RT_CLUSTER/on head`, which runs srun
# as this user on the cluster's head.
#   - srun -N 4 rt exec of a directory, a SquashFS and a SIF image on the
#     shared file system: ranks on four host names, one container per node
#     (the ranks of a node share their user and mount namespaces, nodes do
#     not);
#   - Open MPI (srun --mpi=pmix) and MPICH (srun --mpi=pmi2) across the
#     nodes: 8 ranks on 4 hosts, communicator size 8, the allreduce right,
#     single-copy transfers within a node;
#   - rt exec --fabric: the image's Open MPI over libfabric across the
#     nodes, every rank mapping the host's libfabric (and the image's
#     without --fabric);
#   - exit statuses and --kill-on-bad-exit from any node; mpirun in
#     salloc; scancel --signal;
#   - images reaching every node once: a reference pulled by the step's
#     first node and sent to the others (the registry's log counted), a
#     failure named by node; rt stage, --clean and rt prune;
#   - --gpu looked for on each node.
. "$(dirname "$0")/lib.sh"
[ -n "${RT_CLUSTER:-}" ] || skip "RT_CLUSTER not set (test/run-all.sh starts a cluster with test/hpc/cluster.sh)"
[ -s "${RT_DEBIAN_MPI_ROOTFS:-}" ] || skip "RT_DEBIAN_MPI_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
for c in mpicc mpicc.mpich sudo; do command -v "$c" >/dev/null || skip "$c missing"; done
on_head() { sudo -n "$RT_CLUSTER/on" head "$@"; }
on_head true || skip "cannot run commands on the cluster (sudo $RT_CLUSTER/on)"
own_rt
cd "$T"  # on the shared file system: every node sees it at this path
export RT_STORAGE="$T/store"
"$RT_IMAGE" import -q "$RT_DEBIAN_MPI_ROOTFS" debmpi
"$RT_IMAGE" convert -q debmpi "$T/debmpi.sqfs"
"$RT_IMAGE" convert -q debmpi "$T/debmpi-dir/"
unset RT_STORAGE  # on the nodes: each node's own default store, in its own /var/tmp
mksquashfs "$IMG" "$T/img.sqfs" -quiet -no-progress -all-root >/dev/null
python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make "$T/img.sif" --squashfs "$T/img.sqfs"
mpicc -O2 -o "$T/hello-ompi" "$RT_SOURCE_DIR/test/hpc/mpi_hello.c"
mpicc.mpich -O2 -o "$T/hello-mpich" "$RT_SOURCE_DIR/test/hpc/mpi_hello.c"
srun_() { on_head timeout 120 srun -O "$@"; }

# --- Ranks and containers across the nodes ------------------------------------
for img in "$IMG" "$T/img.sqfs" "$T/img.sif"; do
  # Every rank waits a moment, so that all the containers exist together
  # (namespace numbers are reused once one is gone).
  out=$(srun_ -N 4 -n 8 "$RT" exec "$img" sh -c \
    'echo "$(hostname) $(readlink /proc/self/ns/user) $(readlink /proc/self/ns/mnt)"; sleep 1' 2>"$T/err") ||
    fail "srun -N 4 -n 8 rt exec $(basename "$img"): $(cat "$T/err")"
  what="srun -N 4 -n 8 rt exec $(basename "$img")"
  expect_eq "$(echo "$out" | awk '{print $1}' | sort | uniq -c | awk '{print $1 $2}' | tr '\n' ' ')" \
    "2node1 2node2 2node3 2node4 " "$what: two ranks on each of four nodes"
  expect_eq "$(echo "$out" | sort -u | wc -l)" 4 "$what: one container per node (user and mount namespace)"
  expect_eq "$(echo "$out" | awk '{print $2}' | sort -u | wc -l)" 4 "$what: no two nodes share one"
done

# --- MPI across the nodes ---------------------------------------------------------
# run_mpi WHAT -- COMMAND...: 8 ranks, size 8, allreduce right, two on each node.
run_mpi() {
  local what=$1 out
  shift 2
  out=$("$@" 2>"$T/err") || fail "$what: exit $?: $(cat "$T/err")"
  judge_mpi "$what" "$out"
}
# ompi_srun ARGS...: srun --mpi=pmix of Open MPI across the nodes, into $out.
ompi_srun() {
  ompi_run "Open MPI across nodes" on_head "${ompi[@]}" timeout 120 srun -O --mpi=pmix -N 4 -n 8 "$@"
}
for img in "$T/debmpi.sqfs" "$T/debmpi-dir"; do
  ompi_srun "$RT" exec "$img" "$T/hello-ompi" 8 cma
  judge_mpi "srun --mpi=pmix -N 4 -n 8, the image's Open MPI ($(basename "$img"))" "$out"
  expect_match "$out" "rank 1 of 8 sum 28 ok cma=ok on node1" "single-copy transfers between the ranks of a node"
done
# The host's Open MPI injected on every node, from that node's libraries.
ompi_srun "$RT" exec --mpi=openmpi "$T/debmpi.sqfs" "$T/hello-ompi" 8
judge_mpi "srun --mpi=pmix -N 4 -n 8 rt exec --mpi, the host's Open MPI injected" "$out"
# MPICH over UCX's TCP transport may hang in MPI_Finalize across emulated
# nodes, with or without a container: bounded, and judged by what it printed.
out=$(on_head env UCX_TLS=tcp,self,sm UCX_NET_DEVICES=eth0 timeout 30 srun -O --mpi=pmi2 -N 4 -n 8 \
  "$RT" exec "$T/debmpi.sqfs" "$T/hello-mpich" 8 2>"$T/err" || true)
judge_mpi "srun --mpi=pmi2 -N 4 -n 8, the image's MPICH" "$out"

# --- --fabric: the host's libfabric under the image's own MPI -------------------------
# Debian's MPICH (12's and 13's alike) is built ch4:ucx and never loads
# libfabric; Debian's Open MPI does, through its ofi MTL. Forced onto it
# (pml cm, mtl ofi, libfabric's tcp provider on eth0, which Open MPI's own
# list of providers would exclude), every message goes through libfabric.
# Each rank says, from /proc/self/maps, which libfabric and libmpi it
# mapped and how many files from under /run/rt-host; without --fabric,
# the control, the image's libfabric.
ofi=(env OMPI_MCA_pml=cm OMPI_MCA_mtl=ofi OMPI_MCA_mtl_ofi_provider_include=tcp FI_PROVIDER=tcp FI_TCP_IFACE=eth0
  OMPI_MCA_osc=^ucx OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 OMPI_MCA_oob_tcp_disable_ipv6_family=1)
for fabric in --fabric ""; do
  what="srun --mpi=pmix -N 4 -n 8 rt exec${fabric:+ $fabric}, the image's Open MPI over libfabric"
  ompi_run "$what" on_head "${ofi[@]}" timeout 120 srun -O --mpi=pmix -N 4 -n 8 \
    "$RT" exec ${fabric:+"$fabric"} "$T/debmpi.sqfs" "$T/hello-ompi" 8 maps
  judge_mpi "$what" "$out"
  lines=$(echo "$out" | grep ' of 8 sum 28 ok ')
  expect_eq "$(echo "$lines" | grep -c ' libmpi=/usr/lib/[^ ]*/libmpi\.so\.40[^ ]* ')" 8 "$what: every rank maps the image's libmpi"
  if [ -n "$fabric" ]; then
    expect_eq "$(echo "$lines" | grep -c ' libfabric=/run/rt-host/[^ ]*/libfabric\.so[^ ]* .* rt-host=1 ')" 8 \
      "$what: every rank maps the host's libfabric, and nothing else of the host's"
  else
    expect_eq "$(echo "$lines" | grep -c ' libfabric=/usr/lib/[^ ]*/libfabric\.so[^ ]* .* rt-host=0 ')" 8 \
      "$what: every rank maps the image's libfabric (the control)"
  fi
done

# --- Exit statuses from any node ------------------------------------------------------
expect_status 3 "a rank's exit status on node 3 is srun's" -- \
  on_head timeout 60 srun -O -N 4 -n 4 "$RT" exec "$IMG" sh -c '[ "$(hostname)" != node3 ] || exit 3'
# The others sleep 50 s: on two loaded cores Slurm's kill has taken over 30.
out=$(on_head timeout 60 srun -O -N 4 -n 4 --kill-on-bad-exit=1 "$RT" exec "$IMG" sh -c \
  'if [ "$(hostname)" = node2 ]; then exit 5; fi; sleep 50; echo survived' 2>&1) && fail "--kill-on-bad-exit: srun succeeded"
[[ "$out" != *survived* ]] && pass "--kill-on-bad-exit: a failing rank on node2 ends the ranks on every node" ||
  fail "ranks survived a bad exit: $out"

# --- mpirun inside an allocation of four nodes ---------------------------------------
ompi_run "salloc -N 4 mpirun" on_head "${ompi[@]}" timeout 120 salloc -O -N 4 -n 8 mpirun -np 8 --oversubscribe \
  "$RT" exec "$T/debmpi.sqfs" "$T/hello-ompi" 8 cma
judge_mpi "mpirun -np 8 inside salloc -N 4" "$out"
expect_match "$out" "cma=ok" "... with single-copy transfers within a node (one container per node under orted)"

# --- Signals from scancel reach every node's program -------------------------------
# (Each rank's trap is set before it says ready; all four say so before
# the signal is sent, however long a loaded machine takes to start them.)
on_head timeout 90 srun -O -N 4 -n 4 --job-name="rt-sig-$$" "$RT" exec "$IMG" sh -c \
  'trap "echo got USR1 on \$(hostname); exit 0" USR1; echo ready; while :; do sleep 1; done' \
  >"$T/sig.out" 2>"$T/sig.err" &
srun_pid=$!
for _ in $(seq 600); do [ "$(grep -c ready "$T/sig.out" 2>/dev/null)" = 4 ] && break; sleep 0.1; done
[ "$(grep -c ready "$T/sig.out")" = 4 ] || fail "the four ranks did not start within 60 s: $(cat "$T/sig.out" "$T/sig.err")"
on_head scancel --signal=USR1 --name="rt-sig-$$"
wait "$srun_pid" || true
expect_eq "$(grep -c '^got USR1 on node[1-4]$' "$T/sig.out")" 4 "scancel --signal=USR1 reaches the program of every node"

# --- Images reach every node once ------------------------------------------------------
# A registry on the cluster's network (on head). 4 nodes x 2 ranks running a
# reference none of them has: one pull for the job, on the step's first
# node, sent to the others (sbcast); each blob and the manifest asked once.
. "$RT_SOURCE_DIR/test/integration/registry.sh"
REG_ADDR=10.77.0.254 REG_ON=(on_head)
start_registry "$T/reg" open
OCI="python3 $RT_SOURCE_DIR/test/integration/ocitool.py"
tar -C "$IMG" -czf "$T/base.tar.gz" .
$OCI layout "$T/bb" --tag v1 --cmd /bin/rt-probe --cmd argv --cmd from-cmd "$T/base.tar.gz" >/dev/null
push "$T/bb:v1" "test/bb:v1"
: >"$T/reg/log"  # what the push asked is not counted
job() { on_head env RT_CA_FILE="$REG_CA" timeout 120 salloc -O -N 4 -n 8 "$@"; }
cat >"$T/steps.sh" <<STEPS
srun -O -N 4 -n 8 $RT run $REG/test/bb:v1 >$T/step1.out 2>$T/step1.err || exit 1
srun -N 4 -n 4 sh -c 'echo \$(hostname) \$(ls /var/tmp/\$(id -un).rt/staged/\$SLURM_JOB_ID/ | grep -c "\.sqfs\$")' >$T/staged.out
srun -O -N 4 -n 8 $RT run $REG/test/bb:v1 >$T/step2.out 2>$T/step2.err
STEPS
job bash "$T/steps.sh" 2>"$T/err" || fail "two steps running a reference: $(cat "$T/err" "$T/step1.err")"
expect_eq "$(grep -c '^\[from-cmd\]$' "$T/step1.out")" 8 "srun -N 4 -n 8 rt run REF: every rank ran the image"
expect_eq "$(grep -c '^\[from-cmd\]$' "$T/step2.out")" 8 "... and again in the job's next step"
expect_eq "$(sort "$T/staged.out" | tr '\n' ' ')" "node1 0 node2 1 node3 1 node4 1 " \
  "the first node pulled it into its store, the other three hold the copy it sent"
blobs=$(grep -ao 'GET /v2/test/bb/blobs/sha256:[0-9a-f]*' "$T/reg/log" | sort | uniq -c)
expect_eq "$(echo "$blobs" | wc -l)" 2 "the job fetched the layer and the config ($blobs)"
expect_eq "$(echo "$blobs" | awk '$1 != 1' | wc -l)" 0 "each once, for 8 ranks on 4 nodes"
expect_eq "$(grep -ac 'GET /v2/test/bb/manifests/' "$T/reg/log")" 1 "the manifest once"
# A reference no node can get: every rank fails, the other nodes' saying
# which node they are and why (the first node's reason).
job srun -O -N 4 -n 4 "$RT" exec "$REG/test/none:v1" true 2>"$T/err" >/dev/null && fail "a missing image ran"
for n in node2 node3 node4; do
  expect_match "$(grep "on $n" "$T/err")" "not staged here: node1: .*none" "$n says it has no image, and why"
done

# rt stage in the job script: a SquashFS file of the shared file system
# copied once to every node, each step's ranks reading their node's copy;
# rt stage --clean removes them, rt prune those of ended jobs.
cat >"$T/stage.sh" <<STAGE
$RT stage $T/img.sqfs || exit 1
srun -N 4 -n 4 $RT exec --dry-run $T/img.sqfs true >$T/plan.out || exit 1
srun -N 4 -n 4 $RT exec $T/img.sqfs cat /etc/os-release >$T/ran.out || exit 1
mv $T/img.sqfs $T/img.moved
srun -N 4 -n 4 $RT exec $T/img.sqfs true >$T/moved.out 2>&1; echo "moved \$?" >>$T/moved.out
mv $T/img.moved $T/img.sqfs
$RT stage --clean && srun -N 4 -n 4 sh -c 'ls /var/tmp/\$(id -un).rt/staged/\$SLURM_JOB_ID 2>&1 | wc -l' >$T/cleaned.out
STAGE
job bash "$T/stage.sh" >"$T/out" 2>"$T/err" || fail "rt stage in a job: $(cat "$T/err")"
expect_match "$(cat "$T/err")" "staged .*img.sqfs.* on every node of job" "rt stage says what it did"
expect_eq "$(grep -c "image root \`/var/tmp/[^/]*\.rt/staged/[0-9]*/[0-9a-f]*\.sqfs\`" "$T/plan.out")" 4 \
  "every node's rank runs its node's copy"
expect_eq "$(wc -l <"$T/ran.out")" "$((4 * $(wc -l <"$IMG/etc/os-release")))" "and reads it"
expect_eq "$(cat "$T/moved.out")" "moved 0" \
  "the copy is found by the path alone: the steps run with the file moved away on the shared file system"
expect_eq "$(sort -u "$T/cleaned.out")" 1 "rt stage --clean removes the job's copies on every node"
# A node the copy cannot reach: rt stage fails and says which; the steps
# read the shared file on every node, nothing half-copied.
cat >"$T/stage-bad.sh" <<STAGE
srun -w node3 -N 1 -n 1 sh -c 'mkdir -p /var/tmp/\$(id -un).rt/staged && chmod 0500 /var/tmp/\$(id -un).rt/staged'
$RT stage $T/img.sqfs && exit 9
srun -N 4 -n 4 $RT exec --dry-run $T/img.sqfs true >$T/plan.out || exit 1
srun -w node3 -N 1 -n 1 chmod 0700 /var/tmp/\$(id -un).rt/staged
STAGE
job bash "$T/stage-bad.sh" >"$T/out" 2>"$T/err" || fail "rt stage with a node that refuses the copy: $(cat "$T/err")"
expect_match "$(cat "$T/err")" "node3: tasks? [0-9-]+: Exited" "rt stage fails, srun naming the node that refused the copy"
expect_match "$(cat "$T/err")" "mkdir.*staged/[0-9]+.*Permission denied" "... and rt why"
expect_eq "$(grep -c "image root \`$T/img.sqfs\`" "$T/plan.out")" 4 "the steps read the shared file on every node"

store=/var/tmp/$(id -un).rt  # each node's default store
out=$(sudo -n "$RT_CLUSTER/on" node1 sh -c "ls $store/staged | wc -l; $RT prune; ls $store/staged | wc -l")
expect_match "$(echo "$out" | head -1)" "^[1-9]" "node1 keeps what the earlier jobs staged"
expect_match "$out" "removed .*[1-9] ended job.* staged images" "rt prune removes what ended jobs staged"
expect_eq "$(echo "$out" | tail -1)" 0 "... all of it"

# --- --gpu is planned on every node from its own libraries ------------------------------
# No node here has an NVIDIA driver: each says so, by name.
job srun -N 4 -n 4 "$RT" exec --gpu "$IMG" true 2>"$T/err" >/dev/null && fail "--gpu ran without a driver"
for n in node1 node2 node3 node4; do
  expect_match "$(cat "$T/err")" "no NVIDIA driver on this host \($n\)" "--gpu on $n: that node's own driver looked for"
done
