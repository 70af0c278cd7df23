#!/usr/bin/env python3
"""A tree as sorted lines 'PATH TYPE MODE DIGEST', to compare images built
by two builders: owners and times left out (a rootless tree has one owner),
file contents by SHA-256, symlinks by target, hard links as the files they
name. Paths matching any --exclude regular expression are left out.
A tar (one tree) or a Docker archive (its layers applied in order, OCI
whiteouts honoured) lists each entry's extended attributes too.
With --shadow-days, the day-of-last-change field of etc/shadow and
etc/shadow- is blanked before hashing: useradd writes the build's date
there, and two builds of one Dockerfile may straddle midnight.

  tree_listing.py dir|tar|docker PATH [--no-setid] [--no-xattrs] [--shadow-days] [--exclude RE]...
"""
import argparse
import hashlib
import json
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


def xattrs(m):
    x = sorted((k[len("SCHILY.xattr."):], v) for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr."))
    return " xattrs=" + ",".join(f"{k}:{v.encode('utf-8', 'surrogateescape').hex()}" for k, v in x) if x else ""


def entry(t, rel, m, members):
    if m.issym():
        return ("l", 0o777, m.linkname)
    if m.isdir():
        return ("d", m.mode & 0o7777, xattrs(m))
    if m.isfile() or m.islnk():
        target = m
        if m.islnk():
            target = members[os.path.normpath(m.linkname.lstrip("/"))]
        return ("f", target.mode & 0o7777, digest(rel, t.extractfile(target).read()) + xattrs(target))
    if m.isfifo():
        return ("p", m.mode & 0o7777, "")
    return None


def members_of(t):
    members = {}
    for m in t.getmembers():
        rel = os.path.normpath(m.name.lstrip("/"))
        if rel != ".":
            members[rel] = m
    return members


def from_tar(file):
    out = {}
    with tarfile.open(file) as t:
        members = members_of(t)
        for rel, m in members.items():
            e = entry(t, rel, m, members)
            if e:
                out[rel] = e
    return out


def remove_under(out, key, keep=()):
    for k in [k for k in out if (k == key or k.startswith(key + "/")) and k not in keep]:
        del out[k]


def from_docker(file):
    out = {}
    with tarfile.open(file) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))[0]
        for layer in manifest["Layers"]:
            with tarfile.open(fileobj=archive.extractfile(layer)) as t:
                members = members_of(t)
                this = set()
                for rel, m in members.items():
                    parent, base = os.path.split(rel)
                    if base == ".wh..wh..opq":
                        for k in [k for k in out if k.startswith(parent + "/") and k not in this]:
                            del out[k]
                    elif base.startswith(".wh."):
                        remove_under(out, os.path.join(parent, base[4:]), this)
                    else:
                        e = entry(t, rel, m, members)
                        if e is None:
                            continue
                        if not (e[0] == "d" and out.get(rel, ("",))[0] == "d"):
                            remove_under(out, rel, this)
                        out[rel] = e
                        this.add(rel)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["dir", "tar", "docker"])
    p.add_argument("path")
    p.add_argument("--exclude", action="append", default=[])
    p.add_argument("--no-setid", action="store_true", help="leave set-user-id and set-group-id bits out")
    p.add_argument("--no-xattrs", action="store_true", help="leave extended attributes out")
    p.add_argument("--shadow-days", action="store_true", help="blank the day of last change in etc/shadow")
    a = p.parse_args()
    global MASK_SHADOW_DAYS
    MASK_SHADOW_DAYS = a.shadow_days
    entries = {"dir": from_dir, "tar": from_tar, "docker": from_docker}[a.kind](a.path)
    skip = [re.compile(e) for e in a.exclude]
    for rel in sorted(entries):
        if any(s.search(rel) for s in skip):
            continue
        kind, mode, what = entries[rel]
        if a.no_setid:
            mode &= ~0o6000
        if a.no_xattrs:
            what = what.split(" xattrs=")[0]
        sys.stdout.write(f"{rel} {kind} {mode:04o} {what}\n")


if __name__ == "__main__":
    main()
