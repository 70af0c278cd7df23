#!/bin/bash
# rt exec oras://REF across a real Slurm cluster of four nodes (see
# hpc_cluster.sh), from one registry on the cluster's network (on head),
# as the unprivileged user:
#   - a step of 8 ranks on 4 nodes starts lazily: each node reads the file
#     by range into its own cache (its own /var/tmp), and only what its
#     ranks read: the registry's log, by client address, shows four nodes,
#     each fetching a fraction of the file, none of the padding no program
#     reads; no node waits for another (nothing is staged);
#   - the job's next step fetches nothing.
. "$(dirname "$0")/lib.sh"
[ -n "${RT_CLUSTER:-}" ] || skip "RT_CLUSTER not set (test/run-all.sh starts a cluster with test/hpc/cluster.sh)"
command -v sudo >/dev/null || skip "sudo missing"
on_head() { sudo -n "$RT_CLUSTER/on" head "$@"; }
on_head true || skip "cannot run commands on the cluster (sudo $RT_CLUSTER/on)"
own_rt
cd "$T"  # on the shared file system: every node sees it at this path

. "$RT_SOURCE_DIR/test/integration/registry.sh"
REG_ADDR=10.77.0.254 REG_ON=(on_head)
start_registry "$T/reg" open

# The image: the test's busybox image, a small file the ranks read and
# 8 MB of random bytes none of them does.
cp -a "$IMG" "$T/lz" && mkdir -p "$T/lz/opt"
head -c 300000 /dev/urandom >"$T/lz/opt/small"
head -c 8000000 /dev/urandom >"$T/lz/opt/padding"
mksquashfs "$T/lz" "$T/lz.sqfs" -quiet -no-progress -all-root >/dev/null
python3 "$RT_SOURCE_DIR/test/integration/siftool.py" make "$T/lz.sif" --squashfs "$T/lz.sqfs"
size=$(stat -c %s "$T/lz.sif")
hex=$(sha256sum "$T/lz.sif" | cut -d' ' -f1)
want=$(md5sum <"$T/lz/opt/small" | cut -d' ' -f1)
REF="oras://$REG/test/lazy:1"
on_head env RT_CA_FILE="$REG_CA" RT_STORAGE="$T/pusher" "$RT" push -q "$T/lz.sif" "$REF" 2>"$T/err" ||
  fail "rt push of the SIF file: $(cat "$T/err")"
: >"$T/reg/log"  # what the push asked is not counted

# per_node LOG: bytes of the file the registry sent, per client address,
# from its access log (a line a request: ADDR - - [DATE] "GET PATH
# HTTP/1.1" STATUS BYTES).
per_node() {
  awk -v blob="/blobs/sha256:$hex" '$6 == "\"GET" && index($7, blob) && ($9 == 200 || $9 == 206) { n[$1] += $10 }
    END { for (a in n) print a, n[a] }' "$1" | sort
}

cat >"$T/steps.sh" <<STEPS
export RT_LAZY_BACKGROUND=0
srun -O -N 4 -n 8 sh -c 'echo \$(hostname) \$($RT exec $REF md5sum /opt/small)' >$T/step1.out 2>$T/step1.err || exit 1
cp $T/reg/log $T/log1
srun -O -N 4 -n 8 sh -c 'echo \$(hostname) \$($RT exec $REF md5sum /opt/small)' >$T/step2.out 2>$T/step2.err || exit 1
STEPS
on_head env RT_CA_FILE="$REG_CA" timeout 180 salloc -O -N 4 -n 8 bash "$T/steps.sh" 2>"$T/err" ||
  fail "two steps running $REF lazily: $(cat "$T/err" "$T/step1.err" "$T/step2.err" 2>/dev/null)"
for s in 1 2; do
  expect_eq "$(awk '{print $1, $2}' "$T/step$s.out" | sort | uniq -c | awk '{print $1 $2, $3}' | tr '\n' ' ')" \
    "2node1 $want 2node2 $want 2node3 $want 2node4 $want " "step $s: two ranks on each of four nodes read the file"
done

first=$(per_node "$T/log1")
expect_eq "$(echo "$first" | wc -l)" 4 "the first step: four clients fetched from the file ($(echo "$first" | tr '\n' ' '))"
echo "$first" | grep -q "^$REG_ADDR " && fail "head fetched from the file: $first"
echo "$first" | while read -r addr bytes; do
  [ "$bytes" -gt 300000 ] && [ "$bytes" -lt $((size / 2)) ] ||
    fail "node $addr fetched $bytes bytes of a $size-byte file (expected the small file and the tables, not the padding)"
done
pass "each node fetched only what its ranks read: $(echo "$first" | awk '{print $2}' | tr '\n' ' ')of $size bytes"
expect_eq "$(per_node "$T/reg/log")" "$first" "the job's next step fetched nothing more"
