/* MPI test program for rt's HPC tests: every rank checks the communicator
 * size it expects (argv[1]), an allreduce of the ranks, and prints one line.
 * With "cma" as argv[2], rank 1 reads a buffer of rank 0 with
 * process_vm_readv (single-copy transfer, needs ranks in one user
 * namespace), and every rank reports the result. Each line ends with the
 * rank's host name. */
#define _GNU_SOURCE
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int want = argc > 1 ? atoi(argv[1]) : size;
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int ok = size == want && sum == size * (size - 1) / 2;
  const char* cma = "";
  if (argc > 2 && strcmp(argv[2], "cma") == 0 && size >= 2) {
    static char secret[64];
    long addr = 0;
    int pid = getpid();
    if (rank == 0) {
      snprintf(secret, sizeof secret, "from-rank-0-%d", pid);
      addr = (long)secret;
      MPI_Send(&pid, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
      MPI_Send(&addr, 1, MPI_LONG, 1, 1, MPI_COMM_WORLD);
    } else if (rank == 1) {
      int peer;
      MPI_Recv(&peer, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Recv(&addr, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      char got[64] = {0};
      struct iovec local = {got, sizeof got}, remote = {(void*)addr, sizeof got};
      ssize_t n = process_vm_readv(peer, &local, 1, &remote, 1, 0);
      char expect[64];
      snprintf(expect, sizeof expect, "from-rank-0-%d", peer);
      cma = n > 0 && strcmp(got, expect) == 0 ? " cma=ok" : " cma=failed";
      if (n < 0) fprintf(stderr, "rank 1: process_vm_readv: %s\n", strerror(errno));
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  char host[MPI_MAX_PROCESSOR_NAME] = "";
  int len = 0;
  MPI_Get_processor_name(host, &len);
  printf("rank %d of %d sum %d %s%s on %s\n", rank, size, sum, ok ? "ok" : "WRONG", cma, host);
  MPI_Finalize();
  return ok ? 0 : 1;
}
