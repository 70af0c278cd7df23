#!/usr/bin/env python3
"""Writes SIF files (Apptainer's image format) from the published layout,
for rt's tests: a header, a descriptor table and the data objects.

  siftool.py make OUT --squashfs FILE [--deffile FILE] [--labels FILE]
                      [--signatures N] [--root-fs squashfs|ext3|encrypted]
                      [--overlay] [--no-root] [--primaries N] [--empty-root]
                      [--version V] [--root-name NAME]
"""
import argparse
import os
import struct
import time
import uuid

HEADER = 128
DESCRIPTOR = 4 + 1 + 3 * 4 + 7 * 8 + 128 + 384  # 585, packed
SLOTS = 48
ALIGN = 4096
DEFFILE, LABELS, PARTITION, SIGNATURE = 0x4001, 0x4003, 0x4004, 0x4005
FS = {"squashfs": 1, "ext3": 2, "encrypted": 5}
PRIMARY, OVERLAY = 2, 4
GROUP = 0xF0000000


def descriptor(kind, ident, group, link, offset, size, padded, name, extra):
    now = int(time.time())
    d = struct.pack("<iBIIIqqqqqqq", kind, 1, ident, group, link, offset, size, padded, now, now, 0, 0)
    d += os.fsencode(name)[:128].ljust(128, b"\0") + extra.ljust(384, b"\0")
    assert len(d) == DESCRIPTOR
    return d


def make(a):
    objects = []  # (kind, group, link, data, name, extra)
    if a.deffile:
        objects.append((DEFFILE, GROUP | 1, 0, open(a.deffile, "rb").read(), "", b""))
    if a.labels:
        objects.append((LABELS, GROUP | 1, 0, open(a.labels, "rb").read(), "", b""))
    root_id = None
    if not a.no_root:
        root = b"" if a.empty_root else open(a.squashfs, "rb").read()
        for _ in range(a.primaries):
            objects.append((PARTITION, GROUP | 1, 0, root, a.root_name, struct.pack("<ii3s", FS[a.root_fs], PRIMARY, b"02\0")))
        root_id = len(objects)
    if a.overlay:
        objects.append((PARTITION, GROUP | 1, 0, b"\0" * 65536, "", struct.pack("<ii3s", FS["ext3"], OVERLAY, b"02\0")))
    for _ in range(a.signatures):
        entity = bytes(range(1, 21))  # a made-up key fingerprint
        sig = b"-----BEGIN PGP SIGNED MESSAGE-----\nnot a real signature\n"
        objects.append((SIGNATURE, GROUP, GROUP | 1, sig, "", struct.pack("<i", 1) + entity))

    table_at = ALIGN
    data_at = table_at + SLOTS * DESCRIPTOR
    at = (data_at + ALIGN - 1) // ALIGN * ALIGN
    table, body, placed = b"", b"", []
    for i, (kind, group, link, data, name, extra) in enumerate(objects, 1):
        start = (at + ALIGN - 1) // ALIGN * ALIGN if kind == PARTITION else at
        placed.append((start, data))
        table += descriptor(kind, i, group, link, start, len(data), start + len(data) - at, name, extra)
        at = start + len(data)
    table = table.ljust(SLOTS * DESCRIPTOR, b"\0")
    now = int(time.time())
    header = b"#!/usr/bin/env run-singularity\n".ljust(32, b"\0") + b"SIF_MAGIC\0" + a.version.encode()[:2].ljust(3, b"\0") + b"02\0"
    header += uuid.uuid4().bytes
    header += struct.pack("<8q", now, now, SLOTS - len(objects), SLOTS, table_at, SLOTS * DESCRIPTOR, data_at, at - data_at)
    assert len(header) == HEADER
    out = bytearray(at)
    out[0:HEADER] = header
    out[table_at:table_at + len(table)] = table
    for start, data in placed:
        out[start:start + len(data)] = data
    with open(a.out, "wb") as f:
        f.write(out)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--squashfs")
    m.add_argument("--deffile")
    m.add_argument("--labels")
    m.add_argument("--signatures", type=int, default=0)
    m.add_argument("--root-fs", choices=FS, default="squashfs")
    m.add_argument("--overlay", action="store_true")
    m.add_argument("--no-root", action="store_true")
    m.add_argument("--primaries", type=int, default=1)
    m.add_argument("--empty-root", action="store_true")
    m.add_argument("--version", default="01")
    m.add_argument("--root-name", default="", help="the partition's name (bytes through the file system encoding)")
    a = p.parse_args()
    make(a)


if __name__ == "__main__":
    main()
