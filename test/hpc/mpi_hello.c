/* MPI test program for rt's HPC tests: every rank checks the communicator
 * size it expects (argv[1]), an allreduce of the ranks, and prints one line.
 * With "cma" as argv[2], rank 1 reads a buffer of rank 0 with
 * process_vm_readv (single-copy transfer, needs ranks in one user
 * namespace), and every rank reports the result. With "maps", every rank
 * reports from /proc/self/maps where its libraries came from:
 * "libfabric=PATH libmpi=PATH rt-host=K", PATH the file the kernel mapped
 * (links resolved; "none" without one; libfabric the library, not a
 * provider of its plugin directory), K the number of distinct files mapped
 * from under /run/rt-host/ (what rt injected). Each line ends with the
 * rank's host name. */
#define _GNU_SOURCE
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static int starts(const char* s, const char* prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* " libfabric=PATH libmpi=PATH rt-host=K" into out. */
static void maps(char* out, size_t size) {
  static char fabric[4096] = "none", mpi[4096] = "none", host_files[64][4096];
  int nhost = 0;
  FILE* f = fopen("/proc/self/maps", "r");
  char line[4096 + 128];
  while (f && fgets(line, sizeof line, f)) {
    char* path = strchr(line, '/');  /* address, perms, offset, device and inode hold none */
    if (!path) continue;
    path[strcspn(path, "\n")] = 0;
    const char* base = strrchr(path, '/') + 1;
    if (starts(base, "libfabric.so") && strcmp(fabric, "none") == 0) snprintf(fabric, sizeof fabric, "%s", path);
    if ((starts(base, "libmpi.so") || starts(base, "libmpich.so")) && strcmp(mpi, "none") == 0)
      snprintf(mpi, sizeof mpi, "%s", path);
    if (starts(path, "/run/rt-host/")) { /* a file has several mappings: count it once */
      int seen = 0;
      for (int i = 0; i < nhost && !seen; i++) seen = strcmp(host_files[i], path) == 0;
      if (!seen && nhost < 64) snprintf(host_files[nhost++], sizeof host_files[0], "%s", path);
    }
  }
  if (f) fclose(f);
  snprintf(out, size, " libfabric=%s libmpi=%s rt-host=%d", fabric, mpi, nhost);
}

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
  static char libraries[8300] = "";
  if (argc > 2 && strcmp(argv[2], "maps") == 0) maps(libraries, sizeof libraries);
  char host[MPI_MAX_PROCESSOR_NAME] = "";
  int len = 0;
  MPI_Get_processor_name(host, &len);
  printf("rank %d of %d sum %d %s%s%s on %s\n", rank, size, sum, ok ? "ok" : "WRONG", cma, libraries, host);
  MPI_Finalize();
  return ok ? 0 : 1;
}
