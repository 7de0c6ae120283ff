/* MPI_THREAD_FUNNELED: no progress thread (TA_MPI_MANUAL_PROGRESS); the main
 * thread drives the engine with ta_mpi_wait and ta_mpi_progress, and is the
 * only thread that calls MPI. */
#include "common.h"

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  CHECK(provided >= MPI_THREAD_FUNNELED);
  if (provided < MPI_THREAD_MULTIPLE) {
    /* the progress thread needs MULTIPLE */
    CHECK(ta_mpi_init(0) == TA_STATUS_UNSUPPORTED);
    CHECK(strstr(ta_mpi_last_message(), "the progress thread needs MPI_THREAD_MULTIPLE") != NULL);
  }
  OK(ta_mpi_init(TA_MPI_MANUAL_PROGRESS));
  ta_mpi_comm *c;
  OK(ta_mpi_comm_new(MPI_COMM_WORLD, &c));
  size_t n = 100;
  double d[100], got[100];
  for (int i = 0; i < 100; i++) d[i] = g_rank + i;
  ta_tensor *x = new_f64(1, &n, d), *y, *s;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, NULL));
  OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &s, NULL));
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  ta_event *er, *es, *ea;
  OK(ta_mpi_recv(y, prev, 1, 0, NULL, c, NULL, &er, NULL));
  OK(ta_mpi_send(x, next, 1, c, NULL, &es, NULL));
  OK(ta_mpi_allreduce(s, x, TA_MPI_SUM, c, NULL, &ea, NULL));
  size_t pending = 0;
  OK(ta_mpi_progress(&pending));
  CHECK(pending <= 3);
  CHECK(ta_mpi_wait(er) == TA_STATUS_OK);
  CHECK(ta_mpi_wait(es) == TA_STATUS_OK);
  CHECK(ta_mpi_wait(ea) == TA_STATUS_OK);
  read_f64(y, got, 100);
  for (int i = 0; i < 100; i++) CHECK(got[i] == prev + i);
  read_f64(s, got, 100);
  for (int i = 0; i < 100; i++) CHECK(got[i] == g_size * (g_size - 1) / 2.0 + g_size * (double)i);
  OK(ta_mpi_progress(&pending));
  CHECK(pending == 0);
  ta_event_free(er); ta_event_free(es); ta_event_free(ea);
  ta_tensor_free(x); ta_tensor_free(y); ta_tensor_free(s);
  OK(ta_mpi_comm_free(c));
  test_done("test_manual");
  return 0;
}
