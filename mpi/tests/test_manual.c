/* MPI_THREAD_FUNNELED: no progress thread (TA_MPI_MANUAL_PROGRESS); the main
 * thread drives the engine with ta_mpi_wait and ta_mpi_progress, and is the
 * only thread that calls MPI. A simulated communicator created first (before
 * MPI_Init) changes none of that: ta_mpi_init still makes its checks. */
#include "common.h"

/* Before MPI_Init: no MPI_Abort. */
#define PRECHECK(cond)                                                                     \
  do {                                                                                     \
    g_checks++;                                                                            \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);            \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

int main(int argc, char **argv) {
  /* a simulated communicator needs no MPI; its progress thread makes no MPI call */
  ta_mpi_comm *sim;
  PRECHECK(ta_mpi_comm_new_simulated(4, 1, &sim) == TA_STATUS_OK);
  size_t one = 1;
  ta_tensor *q;
  PRECHECK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &one, TA_ORDER_ROW_MAJOR, &q, NULL) == TA_STATUS_OK);
  ta_event *eq;
  PRECHECK(ta_mpi_send(q, 2, 5, sim, NULL, &eq, NULL) == TA_STATUS_OK);
  PRECHECK(ta_event_wait(eq, TA_WAIT_FOREVER) == TA_STATUS_OK); /* by that thread */
  ta_event_free(eq);
  /* and it does not make MPI initialised */
  PRECHECK(ta_mpi_init(TA_MPI_MANUAL_PROGRESS) == TA_STATUS_UNSUPPORTED);
  PRECHECK(strcmp(ta_mpi_last_message(), "ta_mpi_init: MPI is not initialised") == 0);
  PRECHECK(ta_mpi_init(0) == TA_STATUS_UNSUPPORTED);

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  CHECK(provided >= MPI_THREAD_FUNNELED);
  if (provided < MPI_THREAD_MULTIPLE) {
    /* the progress thread needs MULTIPLE (a simulated communicator exists) */
    CHECK(ta_mpi_init(0) == TA_STATUS_UNSUPPORTED);
    CHECK(strstr(ta_mpi_last_message(), "the progress thread needs MPI_THREAD_MULTIPLE") != NULL);
  }
  OK(ta_mpi_init(TA_MPI_MANUAL_PROGRESS));
  /* the tag limit is this MPI's */
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  CHECK(flag && ub && ta_mpi_tag_max() == (*ub >> 6) - 1);
  ta_mpi_comm *c;
  OK(ta_mpi_comm_new(MPI_COMM_WORLD, &c));
  {
    /* no library thread calls MPI (the simulated communicator's stopped):
     * without progress calls from here, a receive cannot complete */
    int tmax = ta_mpi_tag_max(), to = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
    double v = 10 + g_rank, got0 = 0;
    ta_tensor *a = new_f64(1, &one, &v), *b;
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &one, TA_ORDER_ROW_MAJOR, &b, NULL));
    ta_event *ea, *eb;
    OK(ta_mpi_send(a, to, tmax, c, NULL, &ea, NULL)); /* the largest tag: MPI takes it */
    OK(ta_mpi_recv(b, from, tmax, 0, NULL, c, NULL, &eb, NULL));
    CHECK(ta_event_wait(eb, 300 * 1000 * 1000) == TA_STATUS_TIMEOUT);
    CHECK(ta_mpi_wait(ea) == TA_STATUS_OK);
    CHECK(ta_mpi_wait(eb) == TA_STATUS_OK);
    read_f64(b, &got0, 1);
    CHECK(got0 == 10 + from);
    ta_event_free(ea); ta_event_free(eb);
    ta_tensor_free(a); ta_tensor_free(b);
    /* the simulated communicator's operations progress through ta_mpi_wait too */
    OK(ta_mpi_send(q, 3, 6, sim, NULL, &eq, NULL));
    CHECK(ta_mpi_wait(eq) == TA_STATUS_OK);
    ta_event_free(eq);
    ta_mpi_stats st;
    OK(ta_mpi_comm_stats(sim, &st));
    CHECK(st.messages_sent == 2);
    OK(ta_mpi_comm_free(sim));
    ta_tensor_free(q);
  }
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
