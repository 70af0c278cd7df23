#!/usr/bin/env python3
"""The start model of doc/SCALE.md, from 1 to 10,000 nodes x 64 ranks.

Usage: bench/scale-model.py INPUTS   (INPUTS: key=value lines, as bench/scale.sh
part 3 writes them from measurements on one node; a missing key takes the
default below, which is the measurement doc/SCALE.md reports).

Every constant below says where it comes from; "assumed" ones say why.
"""
import math
import sys

# --- Measured on one node (bench/scale.sh part 3); defaults: doc/SCALE.md -----
MEASURED = {
    "t_rank_ms": 1.35,       # rt's own start per rank over the bare program (a rank joining the node's container)
    "t_attach_ms": 22.6,     # first container of a node: image server started, image facts kept
    "t_attach_cold_ms": 29.2,  # the same with the image read and checked (its first start on the node)
    # Shared-file-system operations per start, by form: the node's first rank
    # (o0: opens and execs, l0: lookups: stat, lstat, O_PATH opens, mount
    # sources; b0: bytes read) and each later rank of the node (o1, l1, b1).
    "dir.o0": 6, "dir.l0": 56, "dir.b0": 92, "dir.o1": 3, "dir.l1": 9, "dir.b1": 92,
    "pfs.o0": 3, "pfs.l0": 14, "pfs.b0": 991510, "pfs.o1": 1, "pfs.l1": 4, "pfs.b1": 4,
    "path.o0": 1, "path.l0": 8, "path.b0": 4, "path.o1": 1, "path.l1": 3, "path.b1": 4,
    "name.o0": 0, "name.l0": 4, "name.b0": 0, "name.o1": 0, "name.l1": 1, "name.b1": 0,
    # A real program's start (python3 -c 'import json', Debian image): the
    # files it opens and looks up (in a directory image: on the shared file
    # system), and what the SquashFS server reads of the image file for it
    # on a node's first start (with its read-ahead), in 1 MiB and 8 MiB ranges.
    "prog.o": 48, "prog.l": 222, "prog.sqfs_bytes": 7613734,
    "prog.ranges_1m": 24, "prog.ranges_8m": 7,
    "image_bytes": 103555072,  # that Debian + Python SquashFS image
}

# --- Sourced or assumed constants ----------------------------------------------
R = 64            # ranks per node (the brief: 64)
C = 64            # cores per node: assumed (Frontier: 64 cores per node, one socket)
NODES = (1, 100, 1000, 10000)
# Lustre MDS: stat 2 k ops/s single thread, >400 k ops/s with 240 threads;
# file create 15 k (Lustre 2.5) to 27-29 k (2.7) ops/s at 240 threads (Dell HPC
# Lustre Storage white papers, MDtest, 2015-2016). The many-clients-one-file
# pattern is "quite a bit" lower than N-to-N (Dell/Terascala, insideHPC 2010).
MDS_OPS_S = 20e3          # pessimistic: one file opened by every node (N-to-1)
MDS_OPS_S_HIGH = 400e3    # optimistic: stat-like, spread over the namespace
MDS_RTT_S = 0.2e-3        # assumed: one metadata round trip, unloaded (no published figure found)
# Aggregate read bandwidth a job gets from the parallel file system: assumed
# 10 GB/s (Orion, Frontier's Lustre, reads at 14 TB/s in all: greybeardsonstorage.com, 2023).
PFS_BW = 10e9
# sbcast (Slurm src/bcast/file_bcast.c, src/sbcast/opts.c): blocks of 8 MiB,
# each sent down a tree of width --fanout (default and maximum 8) and
# acknowledged by every node before the next block is read.
SBCAST_BLOCK = 8 * 2**20
SBCAST_FANOUT = 8
NODE_BW = 12.5e9          # assumed: 100 Gb/s per node for Slurm's traffic (HSN); 1.25e9 on a 10 GbE management net
SBCAST_RTT_S = 1e-3       # assumed: a Slurm RPC hop (message, authentication, write of the block)
# Registry: S3 serves >= 5,500 GET/HEAD per second per partitioned prefix
# (AWS, "Best practices design patterns: optimizing Amazon S3 performance");
# one layer blob is one key. Egress of a site registry: assumed 10 GB/s.
REG_GETS_S = 5500.0
REG_BW = 10e9
REG_RTT_S = 2e-3          # assumed: one HTTPS request inside the site


def get(m, key):
    return float(m.get(key, MEASURED[key]))


def sbcast_s(n, size):
    """Time of one sbcast of `size` bytes to n nodes."""
    if n <= 0 or size <= 0:
        return 0.0
    levels, reach = 0, 0
    while reach < n:  # nodes reached within `levels` levels of a tree of width 8
        levels += 1
        reach += SBCAST_FANOUT ** levels
    blocks = math.ceil(size / SBCAST_BLOCK)
    block = min(size, SBCAST_BLOCK)
    per_level = SBCAST_FANOUT * block / NODE_BW + SBCAST_RTT_S
    return blocks * levels * per_level


def fs_time(n, ops_node, bytes_node, ops_rank, rate=MDS_OPS_S):
    """Shared-file-system wait of a step whose n nodes all start at once:
    a rank's own round trips one after the other (the ranks of a node in
    parallel), or the metadata server's queue of every node's operations,
    whichever is longer; then the bytes."""
    if ops_node <= 0 and bytes_node <= 0:
        return 0.0
    latency = ops_rank * MDS_RTT_S
    queue = n * ops_node / rate
    bandwidth = n * bytes_node / PFS_BW
    return max(latency, queue) + bandwidth


def node_ops(m, form, ranks=R):
    """MDS operations of one node's start: the first rank's, each later
    rank's opens (each an MDS RPC), and its lookups once (client cache)."""
    o0, l0, o1 = (get(m, f"{form}.{k}") for k in ("o0", "l0", "o1"))
    return o0 + l0 + (ranks - 1) * o1


def rt_local_s(m, cold):
    """rt's own work on a node: its first container, then the ranks joining
    it (R/C rounds of a rank's CPU time)."""
    first = get(m, "t_attach_cold_ms" if cold else "t_attach_ms")
    return (first + math.ceil(R / C) * get(m, "t_rank_ms") + R * 0.1) / 1e3


def rows(m):
    prog_o, prog_l = get(m, "prog.o"), get(m, "prog.l")
    sq_bytes = get(m, "prog.sqfs_bytes")
    img = get(m, "image_bytes")
    out = []
    for n in NODES:
        r = {"N": n}
        # (a) every rank reads the image from the parallel file system: a
        # directory image there; each rank's program opens its files there
        # (an MDS RPC each), their lookups cached per node.
        ops = node_ops(m, "dir") + R * prog_o + prog_l
        first = get(m, "dir.o0") + get(m, "dir.l0") + prog_o + prog_l
        r["a"] = rt_local_s(m, False) + fs_time(n, ops, 0, first)
        r["a_ops"] = ops
        # (a') one SquashFS image on the PFS, one server per node (rt today
        # without staging): the image's metadata and the program's blocks
        # read once per node.
        ops = node_ops(m, "pfs")
        r["pfs"] = rt_local_s(m, True) + fs_time(n, ops, sq_bytes, get(m, "pfs.o0") + get(m, "pfs.l0"))
        r["pfs_ops"] = ops
        # (b) staged copy found by the image file's path (rt today) and by the
        # job's own key (a stored name: the goal).
        ops = node_ops(m, "path")
        r["b_path"] = rt_local_s(m, True) + fs_time(n, ops, get(m, "path.b0"), get(m, "path.o0") + get(m, "path.l0"))
        r["b_path_ops"] = ops
        r["b_name"] = rt_local_s(m, True) + fs_time(n, node_ops(m, "name"), 0, get(m, "name.o0") + get(m, "name.l0"))
        r["stage"] = sbcast_s(n, img)
        r["stage_1g"] = sbcast_s(n, 1e9)
        # (c) lazy from a registry: each node fetches the 1 MiB ranges its
        # program reads into its node cache, after the manifest and config.
        reqs = 2 + get(m, "prog.ranges_1m")
        byts = get(m, "prog.ranges_1m") * 2**20
        reg = max(n * reqs / REG_GETS_S, reqs * REG_RTT_S) + n * byts / REG_BW
        r["c"] = rt_local_s(m, True) + reg
        r["c_reqs"] = n * reqs
        # every node pulling the whole image (as a per-node pull does)
        r["pull_all"] = max(n * 3 / REG_GETS_S, 3 * REG_RTT_S) + n * img / REG_BW
        out.append(r)
    return out


def fmt_s(s):
    if s < 1:
        return f"{s * 1e3:.0f} ms"
    if s < 100:
        return f"{s:.1f} s"
    return f"{s / 60:.0f} min"


def main():
    m = {}
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    m[k] = v
    t = rows(m)
    print(f"Start of one step, N nodes x {R} ranks (C = {C} cores a node), slowest node; "
          f"MDS {MDS_OPS_S / 1e3:.0f} k ops/s, PFS {PFS_BW / 1e9:.0f} GB/s, "
          f"registry {REG_GETS_S:.0f} GET/s and {REG_BW / 1e9:.0f} GB/s")
    print(f"MDS operations per node: (a) {t[0]['a_ops']:.0f}, SquashFS on the PFS {t[0]['pfs_ops']:.0f}, "
          f"staged by path {t[0]['b_path_ops']:.0f}, staged by name {node_ops(m, 'name'):.0f}")
    hdr = ("N", "(a) dir on PFS", "sqfs on PFS", "(b) staged/path", "staged/name",
           "+stage %.0fMB" % (get(m, "image_bytes") / 1e6), "+stage 1GB", "(c) lazy reg.", "pull per node")
    print("%-6s %15s %12s %16s %12s %12s %11s %14s %14s" % hdr)
    for r in t:
        print("%-6d %15s %12s %16s %12s %12s %11s %14s %14s" % (
            r["N"], fmt_s(r["a"]), fmt_s(r["pfs"]), fmt_s(r["b_path"]), fmt_s(r["b_name"]),
            fmt_s(r["stage"]), fmt_s(r["stage_1g"]), fmt_s(r["c"]), fmt_s(r["pull_all"])))
    hi = [fs_time(n, node_ops(m, "path"), 0, 0, MDS_OPS_S_HIGH) for n in NODES]
    print("staged/path, the metadata server's queue alone at %.0f k ops/s instead: %s" % (
        MDS_OPS_S_HIGH / 1e3, ", ".join(fmt_s(x) for x in hi)))


if __name__ == "__main__":
    main()
