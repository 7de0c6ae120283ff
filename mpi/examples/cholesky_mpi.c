/* Distributed tiled Cholesky with libtensorasync_mpi (see cholesky_dist.h).
 *
 *   mpirun -np R cholesky_mpi [n] [b] [lookahead] [--check]
 *
 * Factors the n x n matrix of chol_elem in tiles of b x b over R ranks and
 * prints the time and GFLOP/s (n^3/3 flops), the messages, and how much of
 * the message time was hidden behind computation: for each rank, the time
 * in which a message was in flight (a send posted and not complete, or a
 * matched receive not complete) and its worker ran no task, against the
 * whole time in which a message was in flight. With --check, rank 0 gathers
 * L and compares it with LAPACK's dpotrf of the whole matrix. */
#include <mpi.h>
#include "cholesky_dist.h"

static int cmp_d(const void *a, const void *b) {
  const double *x = a, *y = b;
  return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Merge intervals (pairs) in place; returns the count. */
static size_t merge(double *iv, size_t n) {
  if (!n) return 0;
  qsort(iv, n, 2 * sizeof(double), cmp_d);
  size_t m = 0;
  for (size_t i = 1; i < n; i++) {
    if (iv[2 * i] <= iv[2 * m + 1]) {
      if (iv[2 * i + 1] > iv[2 * m + 1]) iv[2 * m + 1] = iv[2 * i + 1];
    } else {
      m++;
      iv[2 * m] = iv[2 * i];
      iv[2 * m + 1] = iv[2 * i + 1];
    }
  }
  return m + 1;
}

static double total(const double *iv, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += iv[2 * i + 1] - iv[2 * i];
  return s;
}

/* Measure of U \ B for merged interval sets U and B. */
static double minus(const double *u, size_t nu, const double *b, size_t nb) {
  double s = 0;
  size_t j = 0;
  for (size_t i = 0; i < nu; i++) {
    double lo = u[2 * i], hi = u[2 * i + 1], covered = 0;
    while (j < nb && b[2 * j + 1] <= lo) j++;
    for (size_t k = j; k < nb && b[2 * k] < hi; k++) {
      double a0 = b[2 * k] > lo ? b[2 * k] : lo, a1 = b[2 * k + 1] < hi ? b[2 * k + 1] : hi;
      if (a1 > a0) covered += a1 - a0;
    }
    s += (hi - lo) - covered;
  }
  return s;
}

int main(int argc, char **argv) {
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int n = 2048, b = 256, lookahead = 1 << 30, check = 0, pos = 0;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--check")) { check = 1; continue; }
    int v = atoi(argv[a]);
    if (pos == 0) n = v; else if (pos == 1) b = v; else lookahead = v;
    pos++;
  }
  if (n % b) { if (!rank) fprintf(stderr, "n must be a multiple of b\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
  openblas_set_num_threads(1);
  if (ta_mpi_init(0) != TA_STATUS_OK) { fprintf(stderr, "ta_mpi_init: %s\n", ta_mpi_last_message()); MPI_Abort(MPI_COMM_WORLD, 1); }
  ta_mpi_comm *comm;
  ta_mpi_comm_new(MPI_COMM_WORLD, &comm);
  int NT = n / b;
  if (lookahead > NT) lookahead = NT;
  chol c;
  chol_setup(&c, comm, NT, b, lookahead, 0);
  for (int i = 0; i < NT; i++)
    for (int j = 0; j <= i; j++)
      if (c.tile[(size_t)i * NT + j]) ta_tensor_wait(c.tile[(size_t)i * NT + j], TA_WAIT_FOREVER, NULL);
  if (!rank) {
    size_t thr = 0;
    ta_runtime *rt;
    ta_runtime_default(&rt);
    ta_runtime_threads(rt, &thr);
    printf("cholesky_mpi: n=%d b=%d tiles=%dx%d ranks=%d grid=%dx%d workers/rank=%zu openblas=%s\n", n, b, NT, NT,
           size, c.P, c.Q, thr, openblas_get_corename());
  }
  ta_mpi_comm_trace(comm, 1, NULL, 0, NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = chol_now();
  chol_factor(&c);
  int bad = chol_wait(&c);
  double t1 = chol_now();
  MPI_Barrier(MPI_COMM_WORLD);
  double t2 = chol_now();
  /* hidden communication */
  size_t nm = 0;
  ta_mpi_comm_trace(comm, 0, NULL, 0, &nm);
  double *msg = malloc((nm + 1) * 2 * sizeof *msg);
  ta_mpi_comm_trace(comm, 0, msg, nm, &nm);
  /* MPI_Wtime and CLOCK_MONOTONIC differ by an offset: the trace is in MPI_Wtime */
  double off = chol_now() - MPI_Wtime();
  for (size_t i = 0; i < 2 * nm; i++) msg[i] += off;
  size_t nb = (size_t)atomic_load(&c.nbusy);
  if ((long)nb > c.busy_cap) nb = (size_t)c.busy_cap;
  double busy_s = total(c.busy, nb);
  size_t nbm = merge(c.busy, nb), num = merge(msg, nm);
  double inflight = total(msg, num), exposed = minus(msg, num, c.busy, nbm);
  ta_mpi_stats s;
  ta_mpi_comm_stats(comm, &s);
  double loc[6] = {inflight, exposed, busy_s, (double)s.messages_sent, (double)s.bytes_sent, t1 - t0}, sum[6];
  MPI_Reduce(loc, sum, 6, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  int badsum = 0;
  MPI_Reduce(&bad, &badsum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (!rank) {
    double secs = t2 - t0;
    printf("factorization: %.3f s, %.2f GFLOP/s; busy %.1f%% of rank time; %.0f messages, %.1f MB\n", secs,
           (double)n * n * n / 3.0 / secs * 1e-9, 100 * sum[2] / (size * secs), sum[3], sum[4] / 1e6);
    printf("communication: in flight %.3f s (summed over ranks), exposed %.3f s: %.1f%% hidden\n", sum[0],
           sum[1], sum[0] > 0 ? 100 * (1 - sum[1] / sum[0]) : 100.0);
  }
  free(msg);
  int status = badsum ? 1 : 0;
  if (check && !badsum) {
    /* gather L on rank 0 and compare with LAPACK on the whole matrix */
    ta_tensor **got = calloc((size_t)NT * NT, sizeof *got);
    for (int i = 0; i < NT; i++)
      for (int j = 0; j <= i; j++) {
        int o = owner(&c, i, j), tag = i * NT + j;
        if (rank == o && rank != 0) ta_mpi_send(c.tile[(size_t)i * NT + j], 0, tag, comm, NULL, NULL, NULL);
        if (rank == 0) {
          if (o == 0) got[(size_t)i * NT + j] = c.tile[(size_t)i * NT + j];
          else got[(size_t)i * NT + j] = recv_tile(&c, o, tag);
        }
      }
    if (rank == 0) {
      double *A = malloc((size_t)n * n * sizeof *A), *T = malloc((size_t)b * b * sizeof *T);
      for (int s2 = 0; s2 < n; s2++)
        for (int r = 0; r < n; r++) A[(size_t)s2 * n + r] = chol_elem(r, s2, n);
      int info = 0;
      dpotrf_("L", &n, A, &n, &info);
      double maxerr = 0, maxl = 0;
      for (int i = 0; i < NT; i++)
        for (int j = 0; j <= i; j++) {
          ta_event *ev;
          ptrdiff_t cs[2] = {1, b};
          ta_copy_out(got[(size_t)i * NT + j], T, (size_t)b * b, cs, NULL, &ev, NULL);
          if (ta_event_wait(ev, TA_WAIT_FOREVER) != TA_STATUS_OK) maxerr = INFINITY;
          ta_event_free(ev);
          for (int s2 = 0; s2 < b; s2++)
            for (int r = 0; r < b; r++) {
              int gr = i * b + r, gc = j * b + s2;
              if (gr < gc) continue;
              double ref = A[(size_t)gc * n + gr], d = fabs(T[(size_t)s2 * b + r] - ref);
              if (d > maxerr) maxerr = d;
              if (fabs(ref) > maxl) maxl = fabs(ref);
            }
          if (owner(&c, i, j) != 0) ta_tensor_free(got[(size_t)i * NT + j]);
        }
      int ok = info == 0 && maxerr <= 1e-12 * maxl * n;
      printf("check against LAPACK dpotrf of the whole matrix: max |L - L_ref| = %.3g (max |L_ref| %.3g): %s\n",
             maxerr, maxl, ok ? "OK" : "FAILED");
      if (!ok) status = 1;
      free(A);
      free(T);
    }
    free(got);
    ta_mpi_comm_free(comm);
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  } else {
    ta_mpi_comm_free(comm);
  }
  chol_free(&c);
  ta_mpi_finalize();
  MPI_Finalize();
  return status;
}
