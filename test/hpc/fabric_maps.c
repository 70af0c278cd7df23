/* MPI test program for rt's --fabric tests: every rank checks the
 * communicator size it expects (argv[1]) and an allreduce of the ranks, then
 * reads /proc/self/maps for where its libraries came from, and prints one
 * line:
 *   rank R of N sum S ok libfabric=PATH libmpi=PATH rt-host=K on HOST
 * libfabric is the first mapping whose file name begins with "libfabric.so"
 * (the library, not a provider of its plugin directory), libmpi the first
 * of "libmpi.so" or "libmpich.so"; PATH is the file the kernel mapped
 * (symlinks resolved), "none" when there is no such mapping. K counts the
 * distinct files mapped from under /run/rt-host/ (what rt injected). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int starts(const char* s, const char* prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int want = argc > 1 ? atoi(argv[1]) : size;
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int ok = size == want && sum == size * (size - 1) / 2;

  static char fabric[4096] = "none", mpi[4096] = "none", host_files[64][4096];
  int nhost = 0;
  FILE* f = fopen("/proc/self/maps", "r");
  char line[4096 + 128];
  while (f && fgets(line, sizeof line, f)) {
    char* path = strchr(line, '/');  // address, perms, offset, device and inode hold none
    if (!path) continue;
    path[strcspn(path, "\n")] = 0;
    const char* base = strrchr(path, '/') + 1;
    if (starts(base, "libfabric.so") && strcmp(fabric, "none") == 0) snprintf(fabric, sizeof fabric, "%s", path);
    if ((starts(base, "libmpi.so") || starts(base, "libmpich.so")) && strcmp(mpi, "none") == 0)
      snprintf(mpi, sizeof mpi, "%s", path);
    if (starts(path, "/run/rt-host/")) {  // a file has several mappings: count it once
      int seen = 0;
      for (int i = 0; i < nhost && !seen; i++) seen = strcmp(host_files[i], path) == 0;
      if (!seen && nhost < 64) snprintf(host_files[nhost++], sizeof host_files[0], "%s", path);
    }
  }
  if (f) fclose(f);

  char host[MPI_MAX_PROCESSOR_NAME] = "";
  int len = 0;
  MPI_Get_processor_name(host, &len);
  printf("rank %d of %d sum %d %s libfabric=%s libmpi=%s rt-host=%d on %s\n", rank, size, sum, ok ? "ok" : "WRONG",
         fabric, mpi, nhost, host);
  MPI_Finalize();
  return ok ? 0 : 1;
}
