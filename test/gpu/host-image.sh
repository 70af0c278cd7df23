#!/bin/bash
# Make an NGC-style image from this GPU host's own userland, without its
# NVIDIA driver: the CUDA and PyTorch libraries an image ships stay, the
# driver's user-space files (which rt exec --gpu must inject) go. Run it
# as root on the GPU host, which needs no download:
#
#   test/gpu/host-image.sh IMG
#
# IMG must be on the file system that holds /usr and /opt: the trees are
# hard-linked (seconds, no space), and what lies on another file system
# (a driver mounted at /usr/local/nvidia) fails to link and stays out,
# which is what is wanted. Removing a link in IMG leaves the host's file.
set -u
img=$1
if [ -e "$img" ]; then
  echo "host-image.sh: $img exists" >&2
  exit 1
fi
mkdir -p "$img"
if [ "$(stat -c %d "$img")" != "$(stat -c %d /usr)" ]; then
  echo "host-image.sh: $img is not on the file system of /usr" >&2
  exit 1
fi
for d in usr opt; do
  [ -d /$d ] && cp -al /$d "$img/" 2>/dev/null
done
cp -a /etc "$img/"
for l in bin sbin lib lib32 lib64 libx32; do
  [ -L /$l ] && cp -P /$l "$img/$l"
done
mkdir -p "$img"/{proc,sys,dev,tmp,run,home,root,var/tmp}
chmod 1777 "$img/tmp" "$img/var/tmp"
# The driver's files, wherever the host's packages put copies of them.
find "$img" -xdev \( -name 'libcuda.so*' -o -name 'libnvidia-*.so*' -o -name 'libcudadebugger.so*' \
  -o -name 'libnvcuvid.so*' -o -name 'libnvoptix.so*' -o -name 'nvidia-smi' -o -name 'nvidia-debugdump' \
  -o -name 'nvidia-cuda-mps-*' \) ! -path "$img/usr/local/cuda*" -print -delete | wc -l |
  sed 's/^/driver files removed: /'
# The CUDA toolkit's stub libcuda (for linking) stays; say what is left.
find "$img" -xdev -name 'libcuda.so*' | sed 's/^/kept (toolkit stub): /'
du -sh --apparent-size "$img" 2>/dev/null | sed 's/^/image size (apparent): /'
