#!/usr/bin/env python3
"""A tree as sorted lines 'PATH TYPE MODE DIGEST', to compare images built
by two builders: owners and times left out (a rootless tree has one owner),
file contents by SHA-256, symlinks by target, hard links as the files they
name. Paths matching any --exclude regular expression are left out.

  tree_listing.py dir ROOT [--no-setid] [--exclude RE]...
  tree_listing.py tar FILE [--no-setid] [--exclude RE]...
"""
import argparse
import hashlib
import os
import re
import stat
import sys
import tarfile


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
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                out[rel] = ("f", mode, h.hexdigest())
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
                h = hashlib.sha256(t.extractfile(target).read())
                out[rel] = ("f", m.mode & 0o7777, h.hexdigest())
            elif m.isfifo():
                out[rel] = ("p", m.mode & 0o7777, "")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["dir", "tar"])
    p.add_argument("path")
    p.add_argument("--exclude", action="append", default=[])
    p.add_argument("--no-setid", action="store_true", help="leave set-user-id and set-group-id bits out")
    a = p.parse_args()
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
