#!/bin/bash
# rt push beside skopeo copy: the Debian test image (one 280 MB layer,
# built by rt FROM the imported tree, so rt keeps it as a plain tar
# blob) pushed to Debian's docker-registry on 127.0.0.1 (TLS), as rt-test.
# skopeo copies the same image from a Docker archive of it (rt convert:
# the same plain tar), so both compress the layer with gzip on the way.
# One interleaved run; each round gives each tool a fresh registry and
# pushes twice: first (rt's remembered compression and skopeo's blob-info
# cache cleared) and again with nothing changed; then an image of five
# layers (the Debian one and four of 40 MB of random bytes each) once.
# Usage (as root, or as any user with the packages): bench/push.sh [ROUNDS]
# Target: first push <= skopeo's; the second push near-instant.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
. "$src/bench/common.sh"
debian_rootfs
as_rt_test push "$rounds"
command -v docker-registry >/dev/null && command -v skopeo >/dev/null ||
  { echo "bench/push.sh: needs docker-registry and skopeo" >&2; exit 1; }
debian_in_store push
mkdir -p "$T/ctx" "$T/home"
printf 'FROM debian\nENV BENCH=1\n' >"$T/ctx/Dockerfile"
"$RT" build -q -t debx "$T/ctx"
"$RT" convert -q debx "$T/debx.tar"
mkdir -p "$T/ctx5"
{ echo 'FROM debian'; for i in 1 2 3 4; do echo "RUN head -c 40000000 /dev/urandom > /random$i"; done; } >"$T/ctx5/Dockerfile"
"$RT" build -q -t deb5 "$T/ctx5"
"$RT" convert -q deb5 "$T/deb5.tar"
export HOME=$T/home
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 2>/dev/null
mkdir -p "$T/certs" && cp "$T/cert.pem" "$T/certs/ca.crt"
regpid=
stop_registry() { [ -z "$regpid" ] || { kill "$regpid"; wait "$regpid" 2>/dev/null || true; regpid=; }; }
trap 'stop_registry; chmod -R u+w "$T"; rm -rf "$T"' EXIT
# fresh_registry: a new registry with empty storage; sets REG.
fresh_registry() {
  stop_registry
  rm -rf "$T/reg" && mkdir -p "$T/reg"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: "127.0.0.1:%s", tls: {certificate: %s, key: %s}}\n' \
    "$T/reg" "$port" "$T/cert.pem" "$T/key.pem" >"$T/reg.yml"
  docker-registry serve "$T/reg.yml" >"$T/reg.log" 2>&1 &
  regpid=$!
  for _ in $(seq 100); do bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && break; sleep 0.05; done
  REG=127.0.0.1:$port
}
declare -A t
rt_round() {
  fresh_registry
  rm -rf "$RT_STORAGE/compressed"
  timeit "rt push" "$RT" push -q --ca-file "$T/cert.pem" debx "$REG/bench/debian:v1"
  timeit "rt push again" "$RT" push -q --ca-file "$T/cert.pem" debx "$REG/bench/debian:v1"
  fresh_registry
  rm -rf "$RT_STORAGE/compressed"
  timeit "rt push 5 layers" "$RT" push -q --ca-file "$T/cert.pem" deb5 "$REG/bench/five:v1"
}
skopeo_round() {
  fresh_registry
  rm -rf "$HOME/.local/share/containers"
  timeit "skopeo copy" skopeo copy -q --dest-cert-dir "$T/certs" "docker-archive:$T/debx.tar" "docker://$REG/bench/debian:v1"
  timeit "skopeo copy again" skopeo copy -q --dest-cert-dir "$T/certs" "docker-archive:$T/debx.tar" "docker://$REG/bench/debian:v1"
  fresh_registry
  rm -rf "$HOME/.local/share/containers"
  timeit "skopeo copy 5 layers" skopeo copy -q --dest-cert-dir "$T/certs" "docker-archive:$T/deb5.tar" "docker://$REG/bench/five:v1"
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then rt_round; skopeo_round; else skopeo_round; rt_round; fi
done
echo "Debian image, one layer of $(( $(stat -c %s "$T/debx.tar") / 1000000 )) MB, $(nproc) processors, $rounds rounds"
for l in "rt push" "skopeo copy" "rt push again" "skopeo copy again" "rt push 5 layers" "skopeo copy 5 layers"; do
  printf '%-20s median %6d ms  (%s)\n' "$l" "$(echo "${t[$l]}" | median)" "${t[$l]}"
done
awk -v a="$(echo "${t[rt push]}" | median)" -v b="$(echo "${t[skopeo copy]}" | median)" \
  'BEGIN {printf "rt push / skopeo copy             = %.2f\n", a / b}'
awk -v a="$(echo "${t[rt push again]}" | median)" -v b="$(echo "${t[skopeo copy again]}" | median)" \
  'BEGIN {printf "rt push again / skopeo copy again = %.2f\n", a / b}'
awk -v a="$(echo "${t[rt push 5 layers]}" | median)" -v b="$(echo "${t[skopeo copy 5 layers]}" | median)" \
  'BEGIN {printf "5 layers: rt push / skopeo copy   = %.2f\n", a / b}'
