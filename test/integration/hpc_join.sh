#!/bin/bash
# One container per node (--join): ranks of one launch share a user + mount
# namespace (and one SquashFS mount), so single-copy transfers work between
# them; short and crashing ranks leave nothing behind.
. "$(dirname "$0")/lib.sh"
[ -s "${RT_DEBIAN_ROOTFS:-}" ] || skip "RT_DEBIAN_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
for c in mpicc mpirun mpicc.mpich mpiexec.mpich; do
  command -v "$c" >/dev/null || skip "$c missing (openmpi-bin libopenmpi-dev mpich libmpich-dev)"
done
export RT_STORAGE="$T/store"
own_rt
cd "$T"  # the working directory is bound: the test programs live here
"$RT_IMAGE" import -q "$RT_DEBIAN_ROOTFS" deb
"$RT_IMAGE" convert -q deb "$T/deb.sqfs"
mpi_programs

# rt's processes of this user that are still there (holders, servers).
leftovers() { rt_processes; }
# Holders wait up to a second for late ranks when the count is unknown.
no_leftovers() { [ -z "$(leftovers)" ]; }
settle() { wait_until 20 no_leftovers || true; }

# --- Two --join processes of one launch share namespaces; --no-join does not ---
for img in deb "$T/deb.sqfs"; do
  # The first stays until the second has run (or 30 s).
  rm -f "$T/a" "$T/second-ran"
  "$RT" exec --join "$img" sh -c 'readlink /proc/self/ns/user /proc/self/ns/mnt >'"$T"'/a
    i=0; while [ ! -e '"$T"'/second-ran ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done' &
  wait_until 30 test -s "$T/a" || true
  "$RT" exec --join "$img" sh -c 'readlink /proc/self/ns/user /proc/self/ns/mnt' >"$T/b"
  touch "$T/second-ran"
  wait
  [ -s "$T/a" ] || fail "first --join process ran"
  expect_eq "$(cat "$T/b")" "$(cat "$T/a")" "--join ($img): the second process entered the first one's user and mount namespaces"
  "$RT" exec --no-join "$img" sh -c 'readlink /proc/self/ns/mnt' >"$T/c"
  [ "$(cat "$T/c")" != "$(tail -1 "$T/a")" ] || fail "--no-join got a mount namespace of its own"
  settle
done
expect_eq "$(leftovers)" "" "no holder outlives its ranks"

# A joined rank starts where it was asked to, with the image's files.
out=$("$RT" exec --join --cd /etc deb sh -c 'pwd; cat debian_version')
expect_match "$out" "^/etc.*[0-9]+\.[0-9]+" "a joined rank is in the image, in its working directory"

# --- Open MPI: mpirun -np 4 joins by default; CMA works only when joined ---
for img in deb "$T/deb.sqfs"; do
  out=$(timeout 120 mpirun -np 4 --oversubscribe "$RT" exec --mpi "$img" "$T/hello-ompi" 4 cma 2>"$T/err") ||
    fail "mpirun -np 4 rt exec --mpi $img: $(cat "$T/err")"
  expect_eq "$(echo "$out" | grep -c ' of 4 sum 6 ok')" 4 "Open MPI ($img): 4 ranks, size and allreduce right"
  expect_match "$out" "rank 1 of 4 sum 6 ok cma=ok" "Open MPI ($img): process_vm_readv between joined ranks works"
  [[ $(cat "$T/err") == *"different user namespaces"* ]] && fail "Open MPI warned about user namespaces when joined"
done
out=$(timeout 120 mpirun -np 2 --oversubscribe "$RT" exec --no-join --mpi deb "$T/hello-ompi" 2 cma 2>"$T/err") ||
  fail "mpirun --no-join: $(cat "$T/err")"
expect_match "$out" "cma=failed" "with --no-join each rank has its own user namespace and CMA is refused"
# Containers of one SquashFS image share its server's user namespace, so
# CMA works between them even with --no-join.
out=$(timeout 120 mpirun -np 2 --oversubscribe "$RT" exec --no-join --mpi "$T/deb.sqfs" "$T/hello-ompi" 2 cma 2>"$T/err") ||
  fail "mpirun --no-join sqfs: $(cat "$T/err")"
expect_match "$out" "cma=ok" "with --no-join, ranks of one SquashFS image share its server's user namespace: CMA works"

# --- MPICH/UCX under Hydra: shared memory needs the shared namespace ---------
for img in deb "$T/deb.sqfs"; do
  out=$(timeout 120 mpiexec.mpich -iface lo -n 2 "$RT" exec --mpi=mpich "$img" "$T/hello-mpich" 2 cma 2>"$T/err") ||
    fail "mpiexec.mpich -n 2 rt exec ($img): $(cat "$T/err")"
  expect_eq "$(echo "$out" | grep -c ' of 2 sum 1 ok')" 2 "MPICH ($img): 2 ranks, size and allreduce right"
  expect_match "$out" "cma=ok" "MPICH ($img): process_vm_readv between joined ranks works"
done

# --- Ranks started through a wrapper shell join all the same ----------------
# (Open MPI names its job; Hydra does not, and the ranks' parents differ:
# the launch is the hydra_pmi_proxy above them.)
ns='readlink /proc/self/ns/mnt; sleep 0.5'
out=$(timeout 60 mpirun -np 2 --oversubscribe sh -c "$RT exec deb sh -c '$ns'" 2>"$T/err") ||
  fail "mpirun sh -c 'rt exec': $(cat "$T/err")"
expect_eq "$(echo "$out" | sort -u | wc -l) $(echo "$out" | wc -l)" "1 2" "Open MPI: two ranks behind wrapper shells share one container"
out=$(timeout 60 mpiexec.mpich -iface lo -n 2 sh -c "$RT exec deb sh -c '$ns'" 2>"$T/err") ||
  fail "mpiexec.mpich sh -c 'rt exec': $(cat "$T/err")"
expect_eq "$(echo "$out" | sort -u | wc -l) $(echo "$out" | wc -l)" "1 2" "Hydra: two ranks behind wrapper shells share one container"
# Two Hydra launches at once stay apart.
timeout 60 mpiexec.mpich -iface lo -n 2 sh -c "$RT exec deb sh -c '$ns'" >"$T/l1" 2>"$T/e1" &
timeout 60 mpiexec.mpich -iface lo -n 2 sh -c "$RT exec deb sh -c '$ns'" >"$T/l2" 2>"$T/e2"
wait
expect_eq "$(sort -u "$T/l1" | wc -l) $(sort -u "$T/l2" | wc -l) $(sort -u "$T/l1" "$T/l2" | wc -l)" "1 1 2" \
  "Hydra: two launches side by side get a container each"
settle

# --- Short programs, any rank first: no race, nothing left -------------------
for i in $(seq 10); do
  timeout 60 mpirun -np 8 --oversubscribe "$RT" exec "$T/deb.sqfs" /bin/true 2>"$T/err" ||
    fail "mpirun -np 8 rt exec deb.sqfs /bin/true, round $i: $(cat "$T/err")"
done
pass "10 rounds of 8 joined /bin/true ranks"
settle
expect_eq "$(leftovers)" "" "no holder or server left after short ranks"

# --- A daemon outlives the rank that started it: the mount stays ------------
"$RT" exec --join "$T/deb.sqfs" sh -c \
  "(sleep 1; md5sum /usr/bin/python3.11 >$T/daemon.out 2>&1) >/dev/null 2>&1 & echo started" >/dev/null
wait_until 30 test -s "$T/daemon.out" || true
"$RT" exec deb md5sum /usr/bin/python3.11 >"$T/direct.out"
expect_eq "$(cat "$T/daemon.out")" "$(cat "$T/direct.out")" "a daemon reads the SquashFS image after its rank exited"
settle
expect_eq "$(leftovers)" "" "the holder left once the daemon was gone"

# --- A rank killed with SIGKILL: the others go on, nothing leaks -------------
ls /dev/shm >"$T/shm.before"
"$RT" exec --join "$T/deb.sqfs" sleep 30 &
victim=$!
sleep 0.3
"$RT" exec --join "$T/deb.sqfs" sh -c 'sleep 1; md5sum /usr/bin/python3.11' >"$T/survivor" &
survivor=$!
sleep 0.3
kill -9 $victim
wait $victim 2>/dev/null || true
wait $survivor || fail "the surviving rank failed after its peer was killed"
expect_eq "$(cat "$T/survivor")" "$(cat "$T/direct.out")" "a rank keeps reading the image after a peer was killed"
settle
expect_eq "$(leftovers)" "" "nothing of rt left after a killed rank"
ls /dev/shm >"$T/shm.after"
expect_eq "$(diff "$T/shm.before" "$T/shm.after")" "" "no /dev/shm files left behind"
"$RT" exec --join deb true || fail "a new join after a killed rank works"

# --- The holder's build error reaches the rank, with its message -------------
expect_status 125 "a mount that cannot be built is reported by the joining rank" -- \
  "$RT" exec --join --bind "$T:/etc/hostname" deb true
expect_match "$ERR" "mount.*$T.*hostname" "the error names the mount"
settle
expect_eq "$(leftovers)" "" "a failed holder leaves nothing"
