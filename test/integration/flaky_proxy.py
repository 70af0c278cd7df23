#!/usr/bin/env python3
"""A misbehaving HTTP front for a TLS registry, for rt's retry tests.

flaky_proxy.py PORTFILE UPSTREAM CAFILE [MODE]
MODE flaky (the default):
- the first request of each manifest gets 503 (and then 429) before a real answer;
- the first request of each blob gets its headers and half its body, then the
  connection is cut; later requests pass Range through (answers 206).
MODE norange: as flaky, but later requests ignore Range (a full 200).
MODE long: blobs come with a megabyte more than they hold.
MODE trickle: blobs over 10 kB come at 1 kB/s.
Logs one line per request on stderr.
"""
import http.server, os, socketserver, ssl, sys, time, urllib.request

portfile, upstream, cafile = sys.argv[1:4]
mode = sys.argv[4] if len(sys.argv) > 4 else "flaky"
ctx = ssl.create_default_context(cafile=cafile)
seen = {}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        sys.stderr.write("proxy: " + (fmt % a) + "\n")

    def do_GET(self):
        n = seen.get(self.path, 0)
        seen[self.path] = n + 1
        blob = "/blobs/" in self.path
        if "/manifests/" in self.path and n < 2 and mode in ("flaky", "norange"):
            self.send_response(503 if n == 0 else 429)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        req = urllib.request.Request("https://" + upstream + self.path)
        for h in ("Accept", "Range", "Authorization"):
            if h == "Range" and mode == "norange":
                continue
            if self.headers.get(h):
                req.add_header(h, self.headers[h])
        try:
            resp = urllib.request.urlopen(req, context=ctx)
        except urllib.error.HTTPError as e:
            resp = e
        body = resp.read()
        if blob and mode == "long":
            body += b"x" * 1000000
        self.send_response(resp.status if hasattr(resp, "status") else resp.code)
        for h in ("Content-Type", "Docker-Content-Digest", "Content-Range", "WWW-Authenticate"):
            if resp.headers.get(h):
                self.send_header(h, resp.headers[h])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if blob and mode == "trickle" and len(body) > 10000:
            for i in range(0, len(body), 1000):
                self.wfile.write(body[i:i + 1000])
                self.wfile.flush()
                time.sleep(1)
            return
        if blob and mode in ("flaky", "norange") and n == 0 and len(body) > 1000:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)
            self.close_connection = True
            return
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True


with Server(("127.0.0.1", 0), Handler) as srv:
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()
