#!/bin/bash
# Run an MPI program in a container with the host's MPI injected:
#   bash examples/mpirun-host-mpi.sh IMAGE PROGRAM [NP]
# IMAGE needs glibc (any Debian/Ubuntu/RHEL image) but no MPI of its own;
# PROGRAM is built against the host MPI (mpicc) and lives in the working
# directory, which rt binds. Each rank is its own `rt exec`.
set -euo pipefail
img=${1:?IMAGE}; prog=${2:?PROGRAM}; np=${3:-4}
# Keep traffic on this node's loopback for a one-node try; drop these on a cluster.
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
exec mpirun -np "$np" --oversubscribe rt exec --mpi "$img" "$prog"
