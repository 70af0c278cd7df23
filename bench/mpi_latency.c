/* Ping-pong and allreduce latency between ranks, for bench/mpi-start.sh:
 * prints "pingpong_us X allreduce_us Y" from rank 0 (best of `reps`
 * repetitions of `iters` round trips each). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = argc > 1 ? atoi(argv[1]) : 20000, reps = argc > 2 ? atoi(argv[2]) : 5;
  char buf[8] = {0};
  double best_pp = 1e9, best_ar = 1e9;
  for (int r = 0; r < reps + 1; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
      if (rank == 0) {
        MPI_Send(buf, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
      }
    }
    double pp = (MPI_Wtime() - t0) / iters / 2 * 1e6;
    MPI_Barrier(MPI_COMM_WORLD);
    double v = rank, sum;
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double ar = (MPI_Wtime() - t0) / iters * 1e6;
    if (r > 0) { /* the first repetition warms up */
      if (pp < best_pp) best_pp = pp;
      if (ar < best_ar) best_ar = ar;
    }
  }
  if (rank == 0) printf("pingpong_us %.4f allreduce_us %.4f\n", best_pp, best_ar);
  MPI_Finalize();
  return 0;
}
