#!/bin/bash
# Run nvidia-smi and a CUDA program in a container with the host's NVIDIA
# driver injected:  bash examples/gpu.sh IMAGE [PROGRAM]
# Images that set NVIDIA_VISIBLE_DEVICES (the CUDA images do) get the driver
# without --gpu; CDI users can say --device nvidia.com/gpu=all instead.
set -euo pipefail
img=${1:?IMAGE}
rt exec --gpu "$img" nvidia-smi
[ $# -lt 2 ] || rt exec --gpu "$img" "$2"
