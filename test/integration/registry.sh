# Starts Debian's docker-registry on 127.0.0.1 for the pull tests; sourced.
# start_registry DIR MODE: MODE is basic (TLS + htpasswd), token (TLS +
# bearer tokens from token_service.py) or open (TLS, no auth). Sets
# REG (host:port) and REG_CA (the certificate to trust), and for token
# REG_TOKEN_PORT (the token service's port). Stopped on exit. Elsewhere
# (open only): REG_ADDR, an address of the machine REG_ON (a command
# prefix) runs it on, such as a test cluster's head. Requests are logged
# in DIR/log (REG_LOG_LEVEL=info: one line per request).
REG_USER=rtuser
REG_PASS=rt-secret-pw
REG_PIDS=()
REG_ON=()
stop_registries() {
  local p
  for p in "${REG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() {
  local i addr=${REG_ADDR:-127.0.0.1}
  for i in $(seq 100); do
    "${REG_ON[@]}" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$addr" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "nothing listens on $addr:$1"
}

start_registry() {
  local dir=$1 mode=$2 port auth="" addr=${REG_ADDR:-127.0.0.1}
  command -v docker-registry >/dev/null || skip "docker-registry missing (Debian package docker-registry)"
  mkdir -p "$dir/data"
  port=$(free_port)
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/key.pem" -out "$dir/cert.pem" -days 2 \
    -subj "/CN=$addr" -addext "subjectAltName=IP:$addr" 2>/dev/null
  case $mode in
    basic)
      htpasswd -Bbn "$REG_USER" "$REG_PASS" >"$dir/htpasswd" 2>/dev/null
      auth="auth: {htpasswd: {realm: rt-test, path: $dir/htpasswd}}"
      ;;
    token)
      openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/tkey.pem" -out "$dir/tcert.pem" -days 2 \
        -subj /CN=rt-token 2>/dev/null
      # The token service speaks HTTPS with the registry's certificate:
      # rt sends credentials only to a realm as safe as the registry.
      python3 "$RT_SOURCE_DIR/test/integration/token_service.py" "$dir/tport" "$dir/tkey.pem" "$dir/tcert.pem" \
        "$REG_USER:$REG_PASS" "$dir/cert.pem" "$dir/key.pem" &
      REG_PIDS+=($!)
      local i
      for i in $(seq 100); do [ -s "$dir/tport" ] && break; sleep 0.05; done
      REG_TOKEN_PORT=$(cat "$dir/tport")
      auth="auth: {token: {realm: \"https://127.0.0.1:$REG_TOKEN_PORT/token\", service: rt-test-registry, issuer: rt-test-issuer, rootcertbundle: $dir/tcert.pem}}"
      ;;
    open) ;;
  esac
  cat >"$dir/config.yml" <<YML
version: 0.1
log: {level: ${REG_LOG_LEVEL:-error}}
storage: {filesystem: {rootdirectory: $dir/data}, delete: {enabled: true}}
http: {addr: "$addr:$port", tls: {certificate: $dir/cert.pem, key: $dir/key.pem}}
$auth
YML
  # Its own pid, whatever REG_ON puts in between.
  "${REG_ON[@]}" sh -c 'echo $$ >"$0"; exec "$@"' "$dir/pid" docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
  local i
  for i in $(seq 100); do [ -s "$dir/pid" ] && break; sleep 0.05; done
  REG_PIDS+=("$(cat "$dir/pid")")
  trap 'stop_registries; cleanup' EXIT
  wait_port "$port"
  REG=$addr:$port
  REG_CA=$dir/cert.pem
  mkdir -p "$dir/certs.d" && cp "$dir/cert.pem" "$dir/certs.d/ca.crt"  # skopeo's layout
  REG_CERTS=$dir/certs.d
}

# push LAYOUT:TAG REPO:TAG [creds]
push() {
  "${REG_ON[@]}" skopeo copy -q --all --dest-cert-dir "$REG_CERTS" ${3:+--dest-creds "$3"} \
    "oci:$1" "docker://$REG/$2" 2>"$T/push.err" || fail "skopeo push of $2 failed: $(cat "$T/push.err")"
}

# blob_bytes_sent LOG HEX [requests]: the bytes a registry started with
# REG_LOG_LEVEL=info sent of blob sha256:HEX in answers to GETs (its log has
# one line a request); with `requests`, how many answers those were.
blob_bytes_sent() {
  python3 - "$1" "$2" "${3:-bytes}" <<'PY'
import re, sys
n = answers = 0
for line in open(sys.argv[1], errors="replace"):
    if "response completed" in line and "/blobs/sha256:" + sys.argv[2] in line and "method=GET" in line:
        m = re.search(r"http\.response\.written=(\d+)", line)
        n += int(m.group(1)) if m else 0
        answers += 1
print(answers if sys.argv[3] == "requests" else n)
PY
}
