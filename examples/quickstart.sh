#!/bin/bash
# One command from a fresh Debian 12 machine (as root) to a running container:
# installs what rt needs (not what its tests need), builds it, installs it
# into /usr/local (rt on PATH, man pages, bash completion), makes a busybox
# image and runs it as an unprivileged user (SUDO_USER, else rt-test, made
# if needed).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "quickstart: run it as root (it installs packages and rt)" >&2; exit 1; }
start=$SECONDS
step() { echo "[$1/4 $((SECONDS - start)) s] $2"; }

step 1 "installing the Debian packages rt needs (test/install-deps.sh --runtime)"
bash "$src/test/install-deps.sh" --runtime

step 2 "building rt (Release) in /var/tmp/rt-quickstart/build"
work=/var/tmp/rt-quickstart
rm -rf "$work"
mkdir -p "$work"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DRT_TESTS=OFF >/dev/null
# Each progress line is shown as the build writes it, and a line every 20 s
# while a batch of sources compiles in silence. The static rt links glibc's
# dlopen (libfuse's module loader, which rt never uses): ld's warning about
# it says nothing about rt, so it is left out.
cmake --build "$work/build" -j"$(nproc)" 2>&1 | while :; do
  if IFS= read -r -t 20 line; then
    case $line in
      *"Using 'dlopen' in statically linked"*) ;;
      "["*"%]"* | *error* | *warning*) echo "$line" ;;
    esac
  elif [ $? -gt 128 ]; then
    echo "      ... compiling ($((SECONDS - start)) s)"
  else
    break
  fi
done
[ -x "$work/build/rt" ] || { echo "quickstart: the build failed" >&2; exit 1; }

step 3 "installing rt into /usr/local (cmake --install)"
cmake --install "$work/build" --prefix /usr/local | grep -v "^-- Up-to-date" || true

user=${SUDO_USER:-rt-test}
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
step 4 "making a busybox image and running it as $user"
install -d -o "$user" "$work/image"
install -m 0755 "$src/examples/make-busybox-image.sh" "$work/image/"  # the checkout may be root's only
runuser -u "$user" -- bash "$work/image/make-busybox-image.sh" "$work/image/busybox" >/dev/null
echo "+ rt exec $work/image/busybox sh -c '...'"
(cd / && runuser -u "$user" -- rt exec "$work/image/busybox" sh -c \
  'echo "hello from $(. /etc/os-release; echo $NAME) as $(id -un) (uid $(id -u)), root filesystem $(rt_ro=$(touch /x 2>&1) || echo read-only)"')
echo "done in $((SECONDS - start)) s: rt is $(command -v rt); try rt doctor, man rt, and rt --help"
