#!/bin/bash
# rt exec --gpu on a real NVIDIA GPU. Not part of ctest (CI has no GPU):
# run it by hand, as an unprivileged user, on a host with a GPU, its
# driver and CUDA's nvcc:
#
#   test/gpu/check.sh RT IMAGE...
#
# RT is the rt program, each IMAGE a directory, SquashFS file or stored
# name of a glibc image (any distribution). It builds vecadd.cu with the
# host's nvcc, then in each image runs nvidia-smi and vecadd with --gpu,
# vecadd with --no-gpu (which must fail: the image has no driver), and
# checks that nvidia-smi inside is the driver's program and that no
# InfiniBand stack is injected without a verbs device, runs a PyTorch
# matmul (bare, --gpu, apptainer exec --nv) where the image has PyTorch,
# and times interleaved blocks of 50 starts with and without --gpu. The
# GPU path also goes through rt's Apptainer command line (`apptainer exec
# --nv`, a link to RT). test/gpu/host-image.sh makes a faithful image.
# Exit status: the number of checks that went wrong.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rt=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$(cd "$(dirname "$rt")" && pwd)/$(basename "$rt")" "$work/apptainer"
# Static C++ and gcc runtimes: the image's may be older than the host's.
nvcc ${NVCC_FLAGS:--O2 -arch=native} -Xcompiler=-static-libstdc++ -Xcompiler=-static-libgcc \
  -o "$work/vecadd" "$here/vecadd.cu" || exit 1

failed=0
py=${RT_GPU_PYTHON:-python3}
matmul='
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(3): a @ b
torch.cuda.synchronize(); t = time.time()
for _ in range(20): a @ b
torch.cuda.synchronize(); print("bf16 8192^3 matmul: %.0f TFLOP/s" % (20 * 2 * 8192**3 / (time.time() - t) / 1e12))
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libstdc++" in l or "libgcc_s" in l})
print("\n".join(maps))
raise SystemExit(any(m.startswith("/run/rt-host") for m in maps))'
# check ok|fail CMD...: run CMD, count it as wrong unless it ended as told.
check() {
  local want=$1 rc
  shift
  echo "+ $*"
  "$@"
  rc=$?
  if { [ "$want" = ok ] && [ $rc -ne 0 ]; } || { [ "$want" = fail ] && [ $rc -eq 0 ]; }; then
    echo "WRONG: expected $want, exit status $rc"
    failed=$((failed + 1))
  fi
}

# Milliseconds per start, over N starts of rt exec ARGS... true.
starts() {
  local n=$1 t0 t1
  shift
  t0=$(date +%s%N)
  for ((i = 0; i < n; i++)); do "$rt" exec "$@" true || return 1; done
  t1=$(date +%s%N)
  echo "$(((t1 - t0) / n / 1000)) us per start: rt exec $*" | tee -a "$work/starts"
}

echo "host: $(uname -n) $(uname -r), user $(id -un) (uid $(id -u)), user namespace $(readlink /proc/self/ns/user)"
for img in "$@"; do
  echo "== image $img"
  check ok "$rt" exec --gpu "$img" -- nvidia-smi
  check ok "$rt" exec --gpu "$img" -- sh -c 'id; readlink /proc/self/ns/user; ls -l /dev/nvidia*; nvidia-smi -L'
  # vecadd is built for the host's glibc: an older image's cannot run it.
  if "$rt" exec --no-gpu -b "$work" "$img" -- "$work/vecadd" 2>&1 | grep -q "version .GLIBC_"; then
    echo "SKIPPED: vecadd needs a newer glibc than the image has"
  else
    check ok "$rt" exec --gpu -b "$work" "$img" -- "$work/vecadd"
    check ok "$work/apptainer" exec --nv -C -B "$work" "$img" "$work/vecadd"
  fi
  check fail "$rt" exec --no-gpu -b "$work" "$img" -- "$work/vecadd"
  # -v says what is injected and why (a /dev/infiniband holding only
  # rdma_cm injects no verbs stack).
  check ok "$rt" exec -v --gpu "$img" -- true
  if ! compgen -G '/dev/infiniband/uverbs*' >/dev/null && ! compgen -G '/sys/class/infiniband/*' >/dev/null; then
    echo "+ no verbs device here: rt exec -v must inject no InfiniBand stack"
    v=$("$rt" exec -v "$img" true 2>&1)
    grep -i infiniband <<<"$v"
    if ! grep -q 'InfiniBand: not injected' <<<"$v" || grep -q 'InfiniBand: verbs from' <<<"$v"; then
      echo "WRONG: an InfiniBand stack without a verbs device"
      failed=$((failed + 1))
    fi
  fi
  check ok "$work/apptainer" exec --nv "$img" nvidia-smi -L
  # Inside, nvidia-smi is the driver's program, not a script that runs it.
  check ok "$rt" exec --gpu "$img" -- sh -c 'p=$(command -v nvidia-smi) && echo "nvidia-smi: $p" &&
    ! head -c 2 "$p" | grep -q "#!"'
  # An NGC-style image with PyTorch ($RT_GPU_PYTHON, python3 by default):
  # the matmul rate, bare and in the container, and the C++ runtime it runs
  # on is the image's (nothing of libstdc++/libgcc_s from the host).
  if "$rt" exec --no-gpu "$img" "$py" -c 'import torch' 2>/dev/null; then
    [ -x "$py" ] && check ok "$py" -c "$matmul"
    check ok "$rt" exec --gpu "$img" "$py" -c "$matmul"
    check ok "$work/apptainer" exec --nv "$img" "$py" -c "$matmul"
  else
    echo "SKIPPED: no PyTorch in $img ($py)"
  fi
  # Interleaved blocks of 50 starts; the ratios the start targets name.
  for _ in 1 2 3 4; do
    starts 50 --no-gpu --no-ib "$img" || failed=$((failed + 1))
    starts 50 "$img" || failed=$((failed + 1))
    starts 50 --gpu "$img" || failed=$((failed + 1))
  done
  awk '/us per start/ { k = $0; sub(/.*start: /, "", k); sum[k] += $1; n[k]++ }
    END { for (k in sum) printf "mean %.0f us per start: %s\n", sum[k] / n[k], k }' "$work/starts"
  awk '/us per start/ { if ($0 ~ /--no-gpu --no-ib/) b += $1; else if ($0 ~ /--gpu/) g += $1; else d += $1 }
    END { if (b) printf "--gpu / --no-gpu --no-ib: %.2fx; default / --no-gpu --no-ib: %.2fx\n", g / b, d / b }' "$work/starts"
  : >"$work/starts"
done
echo "checks wrong: $failed"
exit $failed
