#!/usr/bin/env python3
"""A registry's manifests read and written by hand, for tests that tamper
with what a registry holds (basic auth over TLS, docker-registry's htpasswd).

  regtool.py get  URL-BASE CA USER:PASS REPO REF          manifest to stdout
  regtool.py put  URL-BASE CA USER:PASS REPO REF FILE     FILE as manifest REF
  regtool.py blob URL-BASE CA USER:PASS REPO FILE         FILE as a blob; prints its digest
"""
import base64
import hashlib
import json
import ssl
import sys
import urllib.request

OCI = "application/vnd.oci.image.manifest.v1+json"
ACCEPT = ", ".join([OCI, "application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"])


def request(base, ca, creds, method, path, data=None, headers=None):
    ctx = ssl.create_default_context(cafile=ca)
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers or {})
    req.add_header("Authorization", "Basic " + base64.b64encode(creds.encode()).decode())
    with urllib.request.urlopen(req, context=ctx) as r:
        return r.read(), r.headers


def main():
    cmd, base, ca, creds, repo = sys.argv[1:6]
    base = "https://" + base
    if cmd == "get":
        body, _ = request(base, ca, creds, "GET", f"/v2/{repo}/manifests/{sys.argv[6]}", headers={"Accept": ACCEPT})
        sys.stdout.write(body.decode())
    elif cmd == "put":
        data = open(sys.argv[7], "rb").read()
        media = json.loads(data).get("mediaType", OCI)
        request(base, ca, creds, "PUT", f"/v2/{repo}/manifests/{sys.argv[6]}", data=data,
                headers={"Content-Type": media})
    elif cmd == "blob":
        data = open(sys.argv[6], "rb").read()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        _, headers = request(base, ca, creds, "POST", f"/v2/{repo}/blobs/uploads/")
        loc = headers["Location"]
        loc = loc if loc.startswith("http") else base + loc
        sep = "&" if "?" in loc else "?"
        request("", ca, creds, "PUT", loc + sep + "digest=" + digest, data=data,
                headers={"Content-Type": "application/octet-stream"})
        print(digest)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
