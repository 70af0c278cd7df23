#!/usr/bin/env python3
"""A tree as sorted lines 'PATH TYPE MODE DIGEST', to compare images built
by two builders: owners and times left out (a rootless tree has one owner),
file contents by SHA-256, symlinks by target, hard links as the files they
name. Paths matching any --exclude regular expression are left out.
With --shadow-days, the day-of-last-change field of etc/shadow and
etc/shadow- is blanked before hashing: useradd writes the build's date
there, and two builds of one Dockerfile may straddle midnight.

  tree_listing.py dir ROOT [--no-setid] [--shadow-days] [--exclude RE]...
  tree_listing.py tar FILE [--no-setid] [--shadow-days] [--exclude RE]...
"""
import argparse
import hashlib
import os
import re
import stat
import sys
import tarfile

SHADOW = {"etc/shadow", "etc/shadow-"}
MASK_SHADOW_DAYS = False


def digest(rel, data):
    if MASK_SHADOW_DAYS and rel in SHADOW:
        lines = []
        for line in data.split(b"\n"):
            f = line.split(b":")
            if len(f) > 2:
                f[2] = b""
            lines.append(b":".join(f))
        data = b"\n".join(lines)
    return hashlib.sha256(data).hexdigest()


def from_dir(root):
    out = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", 0o777, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", mode, "")
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    out[rel] = ("f", mode, digest(rel, f.read()))
            elif stat.S_ISFIFO(st.st_mode):
                out[rel] = ("p", mode, "")
    return out


def from_tar(file):
    out = {}
    with tarfile.open(file) as t:
        members = {}
        for m in t.getmembers():
            rel = os.path.normpath(m.name.lstrip("/"))
            if rel == ".":
                continue
            members[rel] = m
        for rel, m in members.items():
            if m.issym():
                out[rel] = ("l", 0o777, m.linkname)
            elif m.isdir():
                out[rel] = ("d", m.mode & 0o7777, "")
            elif m.isfile() or m.islnk():
                target = m
                if m.islnk():
                    target = members[os.path.normpath(m.linkname.lstrip("/"))]
                out[rel] = ("f", m.mode & 0o7777, digest(rel, t.extractfile(target).read()))
            elif m.isfifo():
                out[rel] = ("p", m.mode & 0o7777, "")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["dir", "tar"])
    p.add_argument("path")
    p.add_argument("--exclude", action="append", default=[])
    p.add_argument("--no-setid", action="store_true", help="leave set-user-id and set-group-id bits out")
    p.add_argument("--shadow-days", action="store_true", help="blank the day of last change in etc/shadow")
    a = p.parse_args()
    global MASK_SHADOW_DAYS
    MASK_SHADOW_DAYS = a.shadow_days
    entries = from_dir(a.path) if a.kind == "dir" else from_tar(a.path)
    skip = [re.compile(e) for e in a.exclude]
    for rel in sorted(entries):
        if any(s.search(rel) for s in skip):
            continue
        kind, mode, what = entries[rel]
        if a.no_setid:
            mode &= ~0o6000
        sys.stdout.write(f"{rel} {kind} {mode:04o} {what}\n")


if __name__ == "__main__":
    main()
