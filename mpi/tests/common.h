/* Shared helpers of the MPI tests: checks that report the rank and abort the job. */
#ifndef TA_MPI_TEST_COMMON_H
#define TA_MPI_TEST_COMMON_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tensorasync.h>
#include "tensorasync_mpi.h"

static int g_rank = -1, g_size = 0;
static int g_checks = 0;

#define CHECK(cond)                                                                        \
  do {                                                                                     \
    g_checks++;                                                                            \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", g_rank, __FILE__, __LINE__, #cond); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
    }                                                                                      \
  } while (0)

#define OK(call)                                                                           \
  do {                                                                                     \
    ta_status st_ = (call);                                                                \
    g_checks++;                                                                            \
    if (st_ != TA_STATUS_OK) {                                                             \
      fprintf(stderr, "rank %d: %s:%d: %s -> %s (%s)\n", g_rank, __FILE__, __LINE__, #call, \
              ta_status_name(st_), ta_mpi_last_message());                                 \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
    }                                                                                      \
  } while (0)

/* Start MPI (MULTIPLE) and the library; returns the library communicator of MPI_COMM_WORLD. */
static inline ta_mpi_comm *test_init(int *argc, char ***argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (provided != MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "rank %d: MPI does not provide MPI_THREAD_MULTIPLE\n", g_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  OK(ta_mpi_init(0));
  ta_mpi_comm *c = NULL;
  OK(ta_mpi_comm_new(MPI_COMM_WORLD, &c));
  return c;
}

static inline void test_done(const char *name) {
  int total = 0;
  OK(ta_mpi_finalize());
  MPI_Reduce(&g_checks, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%s: %d ranks, %d checks passed\n", name, g_size, total);
  MPI_Finalize();
}

/* The state of `t` after everything enrolled so far; the error message into msg. */
static inline ta_status state_of(const ta_tensor *t, char *msg, size_t cap) {
  ta_error *e = NULL;
  ta_status st = ta_tensor_wait(t, TA_WAIT_FOREVER, &e);
  msg[0] = 0;
  if (e) {
    ta_error_message(e, msg, cap, NULL);
    ta_error_free(e);
  }
  return st;
}

static inline void read_f64(const ta_tensor *t, double *out, size_t n) {
  ta_event *ev = NULL;
  OK(ta_copy_out(t, out, n, NULL, NULL, &ev, NULL));
  OK(ta_event_wait(ev, TA_WAIT_FOREVER));
  ta_event_free(ev);
}

static inline ta_tensor *new_f64(size_t rank, const size_t *ext, const double *data) {
  ta_tensor *t = NULL;
  OK(ta_tensor_new_copy(TA_DTYPE_F64, rank, ext, NULL, TA_ORDER_ROW_MAJOR, data, &t, NULL));
  return t;
}
#endif
