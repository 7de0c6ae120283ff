/* A distributed tiled Cholesky factorization (lower, A = L L^T) on
 * tensorasync tensors and libtensorasync_mpi, shared by cholesky_mpi.c (the
 * real run) and cholesky_sim.c (one rank of a large grid, simulated).
 *
 * Tiles (NT x NT of b x b, lower triangle) are distributed 2-D block-cyclically
 * over a P x Q grid: tile (i, j) belongs to rank (i % P) * Q + j % Q. Each
 * rank submits only the tasks of the tiles it owns (owner computes) and the
 * sends and receives of the panel tiles it or its peers need; no rank builds
 * the global task graph. Every loop below runs over this rank's tiles (index
 * progressions of step P or Q), so the submission work of a rank is
 * proportional to its own tasks and messages.
 *
 * Step k: potrf(A_kk) on its owner, which sends L_kk to the owners of the
 * panel tiles (i, k), i > k; trsm on the panel; each panel tile L_ik goes to
 * the owners of (i, j), k < j <= i, and of (m, i), m >= i, which need it for
 * the trailing update (syrk on the diagonal, gemm below). Tasks and messages
 * are all submitted up front, up to `lookahead` steps ahead of the ones that
 * have completed here, and run as their data arrives: communication overlaps
 * computation through the epoch queues.
 */
#ifndef CHOLESKY_DIST_H
#define CHOLESKY_DIST_H
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tensorasync.h>
#include "tensorasync_mpi.h"

/* BLAS and LAPACK from OpenBLAS (column-major, Fortran calling convention). */
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);
void dtrsm_(const char *side, const char *uplo, const char *transa, const char *diag, const int *m,
            const int *n, const double *alpha, const double *a, const int *lda, double *b, const int *ldb);
void dsyrk_(const char *uplo, const char *trans, const int *n, const int *k, const double *alpha,
            const double *a, const int *lda, const double *beta, double *c, const int *ldc);
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k, const double *alpha,
            const double *a, const int *lda, const double *b, const int *ldb, const double *beta,
            double *c, const int *ldc);
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);

typedef struct chol {
  int NT, b, P, Q, p, q, me, size;
  int lookahead;   /* steps submitted ahead of the completed ones */
  int dry;         /* kernels do nothing (submission-cost simulation) */
  ta_mpi_comm *comm;
  ta_tensor **tile; /* NT x NT, this rank's tiles (NULL elsewhere) */
  /* counts */
  long tasks, sends, recvs, live_tmp, peak_tmp;
  double submit_seconds;
  /* busy intervals of the kernels (one worker per rank): pairs (t0, t1) */
  double *busy;
  atomic_long nbusy;
  long busy_cap;
} chol;

static double chol_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int owner(const chol *c, int i, int j) { return (i % c->P) * c->Q + j % c->Q; }
static int mine(const chol *c, int i, int j) { return i % c->P == c->p && j % c->Q == c->q; }

/* The element (r, s) of the global matrix: 0.9^|r-s| + delta_rs + 0.1 sin(r+s)/n,
 * symmetric positive definite (smallest eigenvalue above 0.9). */
static double chol_elem(int r, int s, int n) {
  int d = r > s ? r - s : s - r;
  return pow(0.9, d) + (r == s ? 1.0 : 0.0) + 0.1 * sin((double)(r + s)) / n;
}

/* ---- kernels ------------------------------------------------------------ */

typedef struct kargs { chol *c; int kind; } kargs; /* 0 potrf, 1 trsm, 2 syrk, 3 gemm */
static kargs KARGS[4];

static void record(chol *c, double t0, double t1) {
  long i = atomic_fetch_add(&c->nbusy, 1);
  if (i < c->busy_cap) { c->busy[2 * i] = t0; c->busy[2 * i + 1] = t1; }
}

static ta_status tile_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)n;
  kargs *a = ud;
  chol *c = a->c;
  if (c->dry) return TA_STATUS_OK;
  double t0 = chol_now();
  int b = (int)v[0].extents[0], ld = (int)v[0].strides[1], info = 0;
  const double one = 1, mone = -1;
  switch (a->kind) {
  case 0:
    dpotrf_("L", &b, v[0].data, &ld, &info);
    if (info != 0) {
      ta_kernel_set_error(ctx, "the matrix is not positive definite");
      return TA_STATUS_KERNEL_FAILED;
    }
    break;
  case 1: /* A_ik = A_ik L_kk^-T; views: A_ik (update), L_kk (read) */
    dtrsm_("R", "L", "T", "N", &b, &b, &one, v[1].data, &ld, v[0].data, &ld);
    break;
  case 2: /* A_jj -= L_jk L_jk^T */
    dsyrk_("L", "N", &b, &b, &mone, v[1].data, &ld, &one, v[0].data, &ld);
    break;
  default: /* A_ij -= L_ik L_jk^T */
    dgemm_("N", "T", &b, &b, &b, &mone, v[1].data, &ld, v[2].data, &ld, &one, v[0].data, &ld);
    break;
  }
  record(c, t0, chol_now());
  return TA_STATUS_OK;
}

static const char *const KNAME[4] = {"potrf", "trsm", "syrk", "gemm"};

static void submit_task(chol *c, int kind, ta_tensor *out, ta_tensor *in1, ta_tensor *in2) {
  ta_access acc[3] = {{out, TA_MODE_UPDATE}, {in1, TA_MODE_READ}, {in2, TA_MODE_READ}};
  size_t na = kind == 0 ? 1 : kind == 3 ? 3 : 2;
  ta_status st = ta_kernel_submit(tile_kernel, &KARGS[kind], KNAME[kind], acc, na, NULL, NULL, NULL);
  if (st != TA_STATUS_OK) {
    fprintf(stderr, "rank %d: submitting %s: %s\n", c->me, KNAME[kind], ta_status_name(st));
    exit(1);
  }
  c->tasks++;
}

/* ---- setup -------------------------------------------------------------- */

/* P x Q = size, P the largest divisor not above sqrt(size); CHOL_GRID_P
 * in the environment chooses another divisor. */
static void chol_grid(int size, int *P, int *Q) {
  int p = (int)sqrt((double)size);
  const char *e = getenv("CHOL_GRID_P");
  if (e && atoi(e) > 0 && size % atoi(e) == 0) p = atoi(e);
  while (size % p) p--;
  *P = p;
  *Q = size / p;
}

static ta_tensor *new_tile(int b) {
  size_t e[2] = {(size_t)b, (size_t)b};
  ta_tensor *t;
  if (ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, e, TA_ORDER_COL_MAJOR, &t, NULL) != TA_STATUS_OK) {
    fprintf(stderr, "out of memory for a tile\n");
    exit(1);
  }
  return t;
}

/* Allocate this rank's tiles; fill them with the matrix unless `dry`. */
static void chol_setup(chol *c, ta_mpi_comm *comm, int NT, int b, int lookahead, int dry) {
  memset(c, 0, sizeof *c);
  c->comm = comm;
  ta_mpi_comm_rank(comm, &c->me);
  ta_mpi_comm_size(comm, &c->size);
  chol_grid(c->size, &c->P, &c->Q);
  c->p = c->me / c->Q;
  c->q = c->me % c->Q;
  c->NT = NT;
  c->b = b;
  c->lookahead = lookahead < 1 ? 1 : lookahead;
  c->dry = dry;
  c->tile = calloc((size_t)NT * NT, sizeof *c->tile);
  c->busy_cap = dry ? 0 : 4L * NT * NT * NT / c->size + 64;
  c->busy = c->busy_cap ? malloc((size_t)c->busy_cap * 2 * sizeof(double)) : NULL;
  for (int k = 0; k < 4; k++) KARGS[k] = (kargs){c, k};
  int n = NT * b;
  double *buf = malloc((size_t)b * b * sizeof *buf);
  for (int j = c->q; j < NT; j += c->Q)
    for (int i = j + ((c->p - j) % c->P + c->P) % c->P; i < NT; i += c->P) {
      ta_tensor *t;
      size_t e[2] = {(size_t)b, (size_t)b};
      if (dry) {
        t = new_tile(b);
      } else {
        for (int s = 0; s < b; s++)
          for (int r = 0; r < b; r++) buf[(size_t)s * b + r] = chol_elem(i * b + r, j * b + s, n);
        if (ta_tensor_new_copy(TA_DTYPE_F64, 2, e, NULL, TA_ORDER_COL_MAJOR, buf, &t, NULL) != TA_STATUS_OK) exit(1);
      }
      c->tile[(size_t)i * NT + j] = t;
    }
  free(buf);
}

/* ---- the factorization -------------------------------------------------- */

static int tag_of(const chol *c, int i, int k) {
  return (int)(((long)k * c->NT + i) % ((long)ta_mpi_tag_max() + 1));
}

static void send_tile(chol *c, ta_tensor *t, int dest, int tag) {
  if (ta_mpi_send(t, dest, tag, c->comm, NULL, NULL, NULL) != TA_STATUS_OK) {
    fprintf(stderr, "rank %d: send: %s\n", c->me, ta_mpi_last_message());
    exit(1);
  }
  c->sends++;
}

static ta_tensor *recv_tile(chol *c, int src, int tag) {
  ta_tensor *t;
  size_t e[2] = {(size_t)c->b, (size_t)c->b};
  /* column-major tile, like the owner's: one dense message */
  if (ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, e, TA_ORDER_COL_MAJOR, &t, NULL) != TA_STATUS_OK ||
      ta_mpi_recv(t, src, tag, 0, NULL, c->comm, NULL, NULL, NULL) != TA_STATUS_OK) {
    fprintf(stderr, "rank %d: recv: %s\n", c->me, ta_mpi_last_message());
    exit(1);
  }
  c->recvs++;
  if (++c->live_tmp > c->peak_tmp) c->peak_tmp = c->live_tmp;
  return t;
}

/* The first index >= from with index % m == r. */
static int first_at(int from, int m, int r) { return from + ((r - from) % m + m) % m; }

/* Does rank (pp, qq) need panel tile L_ik (k < i) of step k? It does if it owns
 * a tile (i, j), k < j <= i, or a tile (m, i), m >= i. */
static int needs(const chol *c, int pp, int qq, int i, int k) {
  if (i % c->P == pp && first_at(k + 1, c->Q, qq) <= i) return 1;
  if (i % c->Q == qq && first_at(i, c->P, pp) < c->NT) return 1;
  return 0;
}

/* Temporary (received) tiles of one step, released when the step is done here. */
typedef struct step_tmp { ta_tensor **t; int n, cap; } step_tmp;
static void tmp_add(step_tmp *s, ta_tensor *t) {
  if (s->n == s->cap) { s->cap = s->cap ? 2 * s->cap : 16; s->t = realloc(s->t, (size_t)s->cap * sizeof *s->t); }
  s->t[s->n++] = t;
}
static void tmp_release(chol *c, step_tmp *s) {
  for (int i = 0; i < s->n; i++) {
    ta_tensor_wait(s->t[i], TA_WAIT_FOREVER, NULL); /* its uses in this step are done */
    ta_tensor_free(s->t[i]);
    c->live_tmp--;
  }
  s->n = 0;
}

static void chol_factor(chol *c) {
  int NT = c->NT, P = c->P, Q = c->Q, p = c->p, q = c->q;
  ta_tensor **panel = calloc((size_t)NT, sizeof *panel); /* L_ik of step k, here */
  step_tmp *ring = calloc((size_t)c->lookahead, sizeof *ring);
  double t0 = chol_now(), waited = 0;
  int *dests = malloc((size_t)(P + Q) * sizeof *dests);
  for (int k = 0; k < NT; k++) {
    step_tmp *st = &ring[k % c->lookahead];
    if (st->n) { double w = chol_now(); tmp_release(c, st); waited += chol_now() - w; }
    memset(panel, 0, (size_t)NT * sizeof *panel);
    /* 1. the diagonal tile */
    ta_tensor *Lkk = NULL;
    int okk = owner(c, k, k);
    if (mine(c, k, k)) {
      Lkk = c->tile[(size_t)k * NT + k];
      submit_task(c, 0, Lkk, NULL, NULL);
      /* to the owners of panel tiles (i, k), i > k: grid rows i % P, column k % Q */
      for (int i = k + 1; i < NT && i <= k + P; i++)
        if (owner(c, i, k) != c->me) send_tile(c, Lkk, owner(c, i, k), tag_of(c, k, k));
    } else if (k % Q == q && first_at(k + 1, P, p) < NT) {
      Lkk = recv_tile(c, okk, tag_of(c, k, k));
      tmp_add(st, Lkk);
    }
    /* 2. the panel: trsm on my tiles (i, k), then send each to who needs it */
    if (k % Q == q)
      for (int i = first_at(k + 1, P, p); i < NT; i += P) {
        ta_tensor *Aik = c->tile[(size_t)i * NT + k];
        submit_task(c, 1, Aik, Lkk, NULL);
        panel[i] = Aik;
        int nd = 0;
        /* row i of the grid: owners of (i, j), k < j <= i (at most Q columns) */
        for (int j = k + 1; j <= i && j <= k + Q; j++) dests[nd++] = owner(c, i, j);
        /* column i % Q: owners of (m, i), m >= i (at most P rows) */
        for (int m = i; m < NT && m < i + P; m++) dests[nd++] = owner(c, m, i);
        for (int a = 0; a < nd; a++) {
          int d = dests[a], dup = d == c->me;
          for (int b2 = 0; b2 < a && !dup; b2++) dup = dests[b2] == d;
          if (!dup) send_tile(c, Aik, d, tag_of(c, i, k));
        }
      }
    /* receive the panel tiles this rank needs, in increasing i as they were
     * sent: candidates are rows i = p (mod P) and columns i = q (mod Q) */
    for (int a = first_at(k + 1, P, p), bq = first_at(k + 1, Q, q); a < NT || bq < NT;) {
      int i = a < bq ? a : bq;
      if (a == i) a += P;
      if (bq == i) bq += Q;
      if (panel[i] || owner(c, i, k) == c->me || !needs(c, p, q, i, k)) continue;
      panel[i] = recv_tile(c, owner(c, i, k), tag_of(c, i, k));
      tmp_add(st, panel[i]);
    }
    /* 3. the trailing update of my tiles (i, j), k < j <= i */
    for (int j = first_at(k + 1, Q, q); j < NT; j += Q)
      for (int i = first_at(j, P, p); i < NT; i += P) {
        ta_tensor *Aij = c->tile[(size_t)i * NT + j];
        if (i == j) submit_task(c, 2, Aij, panel[j], NULL);
        else submit_task(c, 3, Aij, panel[i], panel[j]);
      }
  }
  c->submit_seconds = chol_now() - t0 - waited;
  for (int s = 0; s < c->lookahead; s++) { tmp_release(c, &ring[s]); free(ring[s].t); }
  free(ring);
  free(panel);
  free(dests);
}

/* Wait for every tile of this rank; returns the number of failed tiles. */
static int chol_wait(chol *c) {
  int bad = 0;
  for (int i = 0; i < c->NT; i++)
    for (int j = 0; j <= i; j++) {
      ta_tensor *t = c->tile[(size_t)i * c->NT + j];
      if (!t) continue;
      ta_error *e = NULL;
      ta_status st = ta_tensor_wait(t, TA_WAIT_FOREVER, &e);
      if (st != TA_STATUS_OK) {
        if (bad++ == 0 && !c->dry) {
          char msg[512] = "";
          if (e) ta_error_message(e, msg, sizeof msg, NULL);
          fprintf(stderr, "rank %d: tile (%d,%d): %s: %s\n", c->me, i, j, ta_status_name(st), msg);
        }
      }
      ta_error_free(e);
    }
  return bad;
}

static void chol_free(chol *c) {
  for (long i = 0; i < (long)c->NT * c->NT; i++) ta_tensor_free(c->tile[i]);
  free(c->tile);
  free(c->busy);
}
#endif
