/* A peer that dies must not hang the job. The last rank exits without
 * MPI_Finalize while the others wait for a receive from it and for an
 * allreduce it never joins. Run by scripts/test-mpi.sh, which expects mpirun
 * to exit with a non-zero status (Open MPI kills the job when a process
 * exits without finalizing) before its 60 s timeout. This program never
 * exits 0 by itself: if the waits returned, it fails. */
#include <unistd.h>
#include "common.h"

int main(int argc, char **argv) {
  ta_mpi_comm *c = test_init(&argc, &argv);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == g_size - 1) {
    fprintf(stderr, "rank %d: exiting without MPI_Finalize\n", g_rank);
    _exit(3);
  }
  size_t n = 1 << 16;
  ta_tensor *x, *y;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, NULL));
  OK(ta_mpi_recv(x, g_size - 1, 1, 0, NULL, c, NULL, NULL, NULL));
  OK(ta_mpi_allreduce(NULL, y, TA_MPI_SUM, c, NULL, NULL, NULL));
  char msg[512];
  ta_status a = state_of(x, msg, sizeof msg), b = state_of(y, msg, sizeof msg);
  fprintf(stderr, "rank %d: the waits returned (%s, %s): %s\n", g_rank, ta_status_name(a), ta_status_name(b), msg);
  return 1;
}
