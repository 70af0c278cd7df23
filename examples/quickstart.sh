#!/bin/bash
# One command from a fresh Debian 12 machine (as root) to a running container:
# installs the packages, builds rt, makes a busybox image and runs it as an
# unprivileged user (SUDO_USER, else the user rt-test, made if needed).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" = 0 ]; then
  bash "$src/test/install-deps.sh"
  user=${SUDO_USER:-rt-test}
  id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
  work=/var/tmp/rt-quickstart
  rm -rf "$work"
  install -d -o "$user" "$work"
  (cd "$src" && tar --exclude=./build --exclude=./.git -cf - .) | runuser -u "$user" -- tar -xf - -C "$work"
  exec runuser -u "$user" -- bash "$work/examples/quickstart.sh"
fi
cd "$src"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRT_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
rm -rf build/example-image
bash examples/make-busybox-image.sh build/example-image
echo "+ build/rt exec build/example-image sh -c '...'"
build/rt exec build/example-image sh -c \
  'echo "hello from $(. /etc/os-release; echo $NAME) as $(id -un) (uid $(id -u)), root filesystem $(rt_ro=$(touch /x 2>&1) || echo read-only)"'
echo "rt is built: $src/build/rt (man pages in man/, bash completion in completions/)"
