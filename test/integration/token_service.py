#!/usr/bin/env python3
"""A small registry token service for rt's tests (loopback only).

token_service.py PORTFILE KEY CERT USER:PASSWORD
Serves GET /token?service=S&scope=repository:NAME:ACTIONS: with the right
basic credentials, returns {"token": JWT} signed RS256 with KEY (x5c = CERT),
as Docker's distribution expects from an auth.token realm.
"""
import ssl, base64, http.server, json, os, secrets, socketserver, subprocess, sys, time, urllib.parse

portfile, key, cert, creds = sys.argv[1:5]
tls = sys.argv[5:7]  # optional: the certificate and key to serve HTTPS with
der = subprocess.run(["openssl", "x509", "-in", cert, "-outform", "DER"], check=True, capture_output=True).stdout


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(payload):
    return subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=payload, check=True,
                          capture_output=True).stdout


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        auth = self.headers.get("Authorization", "")
        if url.path != "/token" or auth != "Basic " + base64.b64encode(creds.encode()).decode():
            self.send_response(401)
            self.end_headers()
            return
        access = []
        for scope in q.get("scope", []):
            parts = scope.split(":")
            if len(parts) == 3 and parts[0] == "repository":
                access.append({"type": "repository", "name": parts[1], "actions": parts[2].split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(der).decode()]}
        claims = {"iss": "rt-test-issuer", "sub": creds.split(":")[0], "aud": q.get("service", [""])[0],
                  "exp": now + 600, "nbf": now - 60, "iat": now, "jti": secrets.token_hex(8), "access": access}
        signing_input = (b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())).encode()
        token = signing_input.decode() + "." + b64(sign(signing_input))
        body = json.dumps({"token": token, "expires_in": 600}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


with socketserver.TCPServer(("127.0.0.1", 0), Handler) as srv:
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls[0], tls[1])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()
