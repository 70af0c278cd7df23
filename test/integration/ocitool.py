#!/usr/bin/env python3
"""Builds OCI image layouts and hostile layers for rt's tests.

  ocitool.py layout OUT [--tag T] [--platform OS/ARCH] [--env K=V]... [--cmd ARG]... [--user U]
                        [--entrypoint ARG]... [--label K=V]...
                        [--bad-diff-id N] [--media-type N=TYPE] LAYER...
      LAYER: a .tar, .tar.gz or .tar.zst file (compressed as given)
  ocitool.py index OUT TAG LAYOUT1 LAYOUT2 ...   multi-platform index of single-image layouts
  ocitool.py tar OUT.tar ENTRY...                craft a layer; ENTRY is one of
      file:PATH[:MODE[:CONTENT]]  dir:PATH[:MODE]  symlink:PATH:TARGET
      hardlink:PATH:TARGET        chardev:PATH     fifo:PATH   big:PATH:BYTES
"""
import gzip, hashlib, io, json, os, shutil, subprocess, sys, tarfile


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def put_blob(out, data):
    d = sha(data)
    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(out, "blobs", "sha256", d[7:]), "wb") as f:
        f.write(data)
    return d


def uncompressed(path, data):
    if path.endswith(".gz"):
        return gzip.decompress(data), "application/vnd.oci.image.layer.v1.tar+gzip"
    if path.endswith(".zst"):
        raw = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
        return raw, "application/vnd.oci.image.layer.v1.tar+zstd"
    return data, "application/vnd.oci.image.layer.v1.tar"


def finish_layout(out, descriptor):
    """index.json listing one descriptor, and the oci-layout marker."""
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [descriptor]}, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


def layout(args):
    out, tag, plat, env, cmd, bad, mtypes, layers, user = args[0], None, "linux/amd64", [], [], -1, {}, [], None
    entrypoint, labels = [], {}
    i = 1
    while i < len(args):
        a = args[i]
        if a == "--tag": tag = args[i + 1]; i += 2
        elif a == "--platform": plat = args[i + 1]; i += 2
        elif a == "--env": env.append(args[i + 1]); i += 2
        elif a == "--cmd": cmd.append(args[i + 1]); i += 2
        elif a == "--user": user = args[i + 1]; i += 2
        elif a == "--entrypoint": entrypoint.append(args[i + 1]); i += 2
        elif a == "--label":
            k, v = args[i + 1].split("=", 1); labels[k] = v; i += 2
        elif a == "--bad-diff-id": bad = int(args[i + 1]); i += 2
        elif a == "--media-type":
            n, t = args[i + 1].split("=", 1); mtypes[int(n)] = t; i += 2
        else: layers.append(a); i += 1
    os.makedirs(out, exist_ok=True)
    descs, diff_ids = [], []
    for n, path in enumerate(layers):
        data = open(path, "rb").read()
        raw, mt = uncompressed(path, data)
        descs.append({"mediaType": mtypes.get(n, mt), "digest": put_blob(out, data), "size": len(data)})
        diff_ids.append(sha(raw) if n != bad else sha(b"not this layer"))
    os_, arch = plat.split("/")[:2]
    config = {"architecture": arch, "os": os_,
              "config": {"Env": env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                         "Cmd": cmd or None},
              "rootfs": {"type": "layers", "diff_ids": diff_ids},
              "history": [{"created": "2026-01-01T00:00:00Z", "created_by": "ocitool layer %d" % n}
                          for n in range(len(layers))]}
    if user:
        config["config"]["User"] = user
    if entrypoint:
        config["config"]["Entrypoint"] = entrypoint
    if labels:
        config["config"]["Labels"] = labels
    cdata = json.dumps(config).encode()
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": put_blob(out, cdata), "size": len(cdata)},
                "layers": descs}
    mdata = json.dumps(manifest).encode()
    desc = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": put_blob(out, mdata),
            "size": len(mdata), "platform": {"os": os_, "architecture": arch}}
    if tag:
        desc["annotations"] = {"org.opencontainers.image.ref.name": tag}
    finish_layout(out, desc)
    print(desc["digest"])


def index(args):
    out, tag, parts = args[0], args[1], args[2:]
    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
    manifests = []
    for p in parts:
        for b in os.listdir(os.path.join(p, "blobs", "sha256")):
            shutil.copy(os.path.join(p, "blobs", "sha256", b), os.path.join(out, "blobs", "sha256", b))
        d = json.load(open(os.path.join(p, "index.json")))["manifests"][0]
        d.pop("annotations", None)
        manifests.append(d)
    idx = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests}
    idata = json.dumps(idx).encode()
    top = {"mediaType": "application/vnd.oci.image.index.v1+json", "digest": put_blob(out, idata),
           "size": len(idata), "annotations": {"org.opencontainers.image.ref.name": tag}}
    finish_layout(out, top)
    print(top["digest"])


def craft(args):
    out, entries = args[0], args[1:]
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
        for spec in entries:
            kind, rest = spec.split(":", 1)
            parts = rest.split(":")
            ti = tarfile.TarInfo(parts[0])
            ti.mtime = 1700000000
            data = None
            if kind == "file":
                ti.type = tarfile.REGTYPE
                ti.mode = int(parts[1], 8) if len(parts) > 1 and parts[1] else 0o644
                data = (parts[2] if len(parts) > 2 else parts[0]).encode()
            elif kind == "big":
                ti.type = tarfile.REGTYPE
                ti.mode = 0o644
                data = b"\0" * int(parts[1])
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = int(parts[1], 8) if len(parts) > 1 else 0o755
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, parts[1]
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, parts[1]
            elif kind == "chardev":
                ti.type, ti.devmajor, ti.devminor, ti.mode = tarfile.CHRTYPE, 1, 3, 0o666
            elif kind == "fifo":
                ti.type, ti.mode = tarfile.FIFOTYPE, 0o644
            else:
                sys.exit("unknown entry kind " + kind)
            if data is not None:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)


if __name__ == "__main__":
    {"layout": layout, "index": index, "tar": craft}[sys.argv[1]](sys.argv[2:])
