#!/bin/bash
# A service next to your job, as an instance: a small web server (busybox
# httpd; python3 -m http.server or Jupyter where the image has them) serving
# a host directory on 127.0.0.1, reached from the host with curl, then
# stopped. Usage: examples/instance-web.sh [PORT] (default 8765).
set -euo pipefail
port=${1:-8765}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /var/tmp/rt-instance-web.XXXXXX)
trap 'rt instance stop web-$$ >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash "$here/make-busybox-image.sh" "$work/img" >/dev/null
mkdir "$work/site"
echo "hello from an rt instance" >"$work/site/index.html"

# Detached: it keeps running after this shell (or a job step) moves on.
rt instance start --bind "$work/site:/srv:ro" "$work/img" "web-$$" httpd -f -p "127.0.0.1:$port" -h /srv
rt instance list
for _ in $(seq 300); do curl -fsS "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
# Another program in the same container: it sees the server's processes.
rt exec "instance://web-$$" sh -c 'echo "inside, next to: $(ps -o pid,args | grep "[h]ttpd -f")"'
rt instance stop "web-$$"
