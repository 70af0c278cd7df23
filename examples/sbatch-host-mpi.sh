#!/bin/bash
#SBATCH --job-name=rt-mpi
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
# Submit with: sbatch examples/sbatch-host-mpi.sh IMAGE.sqfs PROGRAM
# Open MPI ranks need srun's PMIx plugin (MPICH: --mpi=pmi2). The image is
# one SquashFS file on the parallel filesystem; every rank is an `rt exec`.
set -euo pipefail
img=${1:?IMAGE}; prog=${2:?PROGRAM}
srun --mpi=pmix rt exec --mpi "$img" "$prog"
