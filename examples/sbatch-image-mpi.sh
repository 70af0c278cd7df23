#!/bin/bash
#SBATCH --job-name=rt-image-mpi
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
# Submit with: sbatch examples/sbatch-image-mpi.sh IMAGE.sqfs PROGRAM [ARGS...]
# The program brings its own MPI inside the image (Open MPI: srun --mpi=pmix;
# MPICH: --mpi=pmi2). On each node the 8 ranks share one container and one
# mount of the image (--join is the default under srun), so shared memory
# and single-copy (CMA) transfers work between them. `-v` on one rank shows
# what rt saw: the launcher, the local rank count and the mounts.
# rt stage copies the image once to each node's local disk (sbcast), so the
# parallel file system serves it once, not once per node and step.
set -euo pipefail
img=${1:?IMAGE}; shift
rt stage "$img"
srun --mpi=pmix rt exec "$img" "$@"
rt stage --clean
