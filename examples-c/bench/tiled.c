/*
 * tiled.c: tiled dense linear algebra, tensorasync block arrays vs StarPU 1.3
 * vs OpenBLAS / LAPACK, on 2 cores.
 *
 *   (G) dgemm C = A*B, n = 2048, 256 x 256 tiles (8 x 8 grid, 512 tile tasks)
 *       - tensorasync: three block arrays (ta_blocks_new_tiled, column-major),
 *         ta_runtime_new(2), one ta_gemm per tile update C_ij (+)= A_ik B_kj,
 *         submitted in program order (k, i, j), then ta_runtime_wait_idle;
 *       - StarPU 1.3: the same matrices registered with
 *         starpu_matrix_data_register and partitioned 8 x 8 with
 *         starpu_data_map_filters (starpu_matrix_filter_block along rows,
 *         starpu_matrix_filter_vertical_block along columns), the same 512
 *         tasks in the same order, codelet = cblas_dgemm (OpenBLAS, 1 thread),
 *         STARPU_NCPU=2, scheduler `eager` (see --sp-sched-gemm);
 *       - OpenBLAS: ONE cblas_dgemm call with 2 threads;
 *       - tensorasync_blas: the tensorasync run with its tile gemms restricted
 *         to the BLAS backend (ta_submit.backends): OpenBLAS, 1 thread per
 *         tile, the StarPU codelets' kernel. By default the library runs its
 *         native (faer) kernels first; this row separates runtime from kernel.
 *   (C) Cholesky (lower, right-looking) of an SPD matrix, n = 4096, 256 tiles
 *       (16 x 16 grid: 16 POTRF, 120 TRSM, 120 SYRK, 560 GEMM = 816 tasks)
 *       - tensorasync: one block array, ta_potrf / ta_trsm / ta_syrk / ta_gemm
 *         per tile, transposed operands as ta_tensor_transpose views, with
 *         critical-path priorities (ta_submit_ex.priority), the bounded ones
 *         of StarPU's Cholesky examples and of the StarPU row below;
 *         tensorasync_noprio: the same without priorities;
 *         tensorasync_unbounded (not run by default: --impl=taunbound):
 *         with StarPU's unbounded priorities instead (`unbound_prio`);
 *       - StarPU 1.3: the same algorithm and tiling, codelets dpotrf_ /
 *         cblas_dtrsm / cblas_dsyrk / cblas_dgemm (OpenBLAS, 1 thread), with
 *         StarPU's usual critical-path priorities, scheduler `prio`;
 *       - LAPACK: ONE dpotrf_ ("L") call from OpenBLAS with 2 threads.
 *       Efficiency: each Cholesky's GF/s over the GF/s of ONE 2-thread
 *       OpenBLAS dgemm call (n = 2048), measured once in every Cholesky
 *       round after the contenders (medians of the timed rounds).
 *
 * Rates: gemm 2 n^3 flops, Cholesky n^3 / 3 flops, per second of wall time
 * from the first submission (or the call) to completion. Data setup (filling
 * the inputs, StarPU registration and partitioning, creating the block
 * arrays and the runtime) is outside the timing, and so is verification.
 *
 * Rounds: 1 warm-up + NREP (3, --reps=N) timed rounds. In each round every
 * implementation runs once, in an order that rotates from round to round (a
 * slow spell of the shared machine then hits all alike); each starts only
 * when no thread of the previous one is still running (OpenBLAS's threads
 * spin for a while after a call). Best and median of the timed rounds.
 *
 * Verification (every run, warm-up included): before each run the output is
 * filled with a sentinel (gemm) or the input is copied in afresh (Cholesky),
 * and after it 64 random entries (plus corners) are compared with a reference:
 * a dot product of the inputs for gemm, (L L^T)_ij against A_ij for Cholesky.
 * A wrong or skipped computation stops the benchmark (exit status 3).
 *
 * Other load: the share of the machine used by other processes during each
 * implementation's runs (/proc/stat). Above 10%, verdicts say "(noisy)".
 *
 * Workers busy (tensorasync rows): the share of each timed run that the
 * runtime's workers spent running tasks (ta_stats.busy_ns). Near
 * 100%, no core waited for the scheduler, and what separates the row from
 * its peers is the tile kernels' speed.
 *
 * OpenBLAS threads: openblas_set_num_threads is process-wide. tensorasync
 * sets it to 1 when it loads the system BLAS; the 2-thread reference runs set
 * it to 2. So this program sets it to 1 before each tensorasync and StarPU run
 * (StarPU codelets also set it, as the StarPU examples do) and to 2 before
 * each reference run.
 *
 * Usage: tiled [--only=gemm,chol] [--impl=ta,sp,ref,tablas,tanoprio,taunbound] [--reps=N]
 *              [--gemm-n=N] [--chol-n=N] [--tile=T]
 *              [--sp-sched-gemm=S] [--sp-sched-chol=S] [--no-blas-reset]
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <dirent.h>
#include <math.h>
#include <starpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tensorasync.h"
#include "harness.h"
#include "openblas_best.h"

#define NTHREADS 2
#define MAXREP 20
#define NSAMPLE 64

/* LAPACK from OpenBLAS (Fortran interface; no lapacke.h needed). */
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t uplo_len);

static int NREP = 3;
static size_t GEMM_N = 2048, CHOL_N = 4096, TILE = 256;
static const char *SP_SCHED_GEMM = "eager", *SP_SCHED_CHOL = "prio";
/* --no-blas-reset: leave OpenBLAS at 2 threads after the reference runs and do
 * not set 1 before the tensorasync runs (shows what a user who sets the
 * process-wide OpenBLAS thread count for their own calls does to the library). */
static int BLAS_RESET = 1;
static void blas_threads_for_tiles(void) {
    if (BLAS_RESET) openblas_set_num_threads(1);
}

/* ------------------------------------------------------------------ util */

static void die(const char *what) {
    fprintf(stderr, "tiled: FATAL: %s\n", what);
    exit(2);
}

static void ta_check(ta_status s, const char *what, int line) {
    if (s == TA_STATUS_OK) return;
    char msg[512] = "";
    ta_error *e = NULL;
    if (ta_last_error(&e) == TA_STATUS_OK && e) {
        ta_error_message(e, msg, sizeof msg, NULL);
        ta_error_free(e);
    }
    fprintf(stderr, "tiled: FATAL: line %d: %s -> %s (%s)\n", line, what, ta_status_name(s), msg);
    exit(2);
}
#define TA(expr) ta_check((expr), #expr, __LINE__)

static void *xmalloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0) die("out of memory");
    return p;
}

static unsigned long long rng_state = 0x2545F4914F6CDD1DULL;
static unsigned long long rnd_u64(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double rnd(void) { return (double)(rnd_u64() >> 11) / 9007199254740992.0 * 2.0 - 1.0; }

static ta_scalar real(double x) {
    ta_scalar s = {x, 0.0};
    return s;
}

/* Waits (up to 2 s) until no other thread of this process has been running
 * for 3 polls in a row; says so if it gave up. */
static void settle_threads(const char *before) {
    char names[512];
    int total = 0, running = 0;
    if (!settle(1000, 1, &total, &running, names, sizeof names))
        printf("  (before %s: %d other thread(s) still running:%s)\n", before, running, names);
}

/* ----------------------------------------------------------- the problems */

static size_t ntiles(size_t n) { return (n + TILE - 1) / TILE; }

/* gemm: column-major n x n inputs in [-1, 1). */
static double *g_a, *g_b, *g_c; /* host buffers shared by StarPU and the reference */
#define SENTINEL 12345.678

/* Cholesky: A0 (column-major, full symmetric), and a work copy. */
static double *c_a0, *c_w, *c_wp;
/* Leading dimension of the peers' Cholesky matrix (CHOL_N + PEER_PAD). */
static size_t PEER_PAD = 0;

/* c_a0 into the peers' padded buffer, and back into c_w for the check. */
static double *peer_in(size_t n) {
    size_t ld = n + PEER_PAD;
    for (size_t j = 0; j < n; j++) memcpy(c_wp + j * ld, c_a0 + j * n, sizeof(double) * n);
    return c_wp;
}
static void peer_out(size_t n) {
    size_t ld = n + PEER_PAD;
    for (size_t j = 0; j < n; j++) memcpy(c_w + j * n, c_wp + j * ld, sizeof(double) * n);
}

/* Sample points: (i, j) pairs, the corners first. */
static size_t samp_i[NSAMPLE], samp_j[NSAMPLE];
static void make_samples(size_t n, int lower) {
    size_t fixed[4][2] = {{0, 0}, {n - 1, 0}, {n - 1, n - 1}, {n / 2, n / 3}};
    for (int s = 0; s < NSAMPLE; s++) {
        size_t i, j;
        if (s < 4) {
            i = fixed[s][0];
            j = fixed[s][1];
        } else {
            i = (size_t)(rnd_u64() % n);
            j = (size_t)(rnd_u64() % n);
        }
        if (lower && j > i) {
            size_t t = i;
            i = j;
            j = t;
        }
        samp_i[s] = i;
        samp_j[s] = j;
    }
}

static double verify_gemm(const double *c, size_t ldc, const char *who) {
    size_t n = GEMM_N;
    double maxerr = 0;
    for (int s = 0; s < NSAMPLE; s++) {
        size_t i = samp_i[s], j = samp_j[s];
        double ref = 0;
        for (size_t p = 0; p < n; p++) ref += g_a[i + p * n] * g_b[p + j * n];
        double got = c[i + j * ldc], e = fabs(got - ref);
        if (!(e <= 1e-10)) {
            fprintf(stderr, "tiled: FATAL: wrong gemm result (%s): C[%zu,%zu] = %.17g, expected %.17g\n", who, i, j,
                    got, ref);
            exit(3);
        }
        if (e > maxerr) maxerr = e;
    }
    return maxerr;
}

/* l: column-major factor with leading dimension ld (lower triangle read). */
static double verify_chol(const double *l, size_t ld, const char *who) {
    size_t n = CHOL_N;
    double maxerr = 0, scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(c_a0[i + i * n]));
    double tol = 1e-14 * (double)n * scale;
    for (int s = 0; s < NSAMPLE; s++) {
        size_t i = samp_i[s], j = samp_j[s]; /* i >= j */
        double v = 0;
        for (size_t p = 0; p <= j; p++) v += l[i + p * ld] * l[j + p * ld];
        double want = c_a0[i + j * n], e = fabs(v - want);
        if (!(e <= tol)) {
            fprintf(stderr,
                    "tiled: FATAL: wrong Cholesky factor (%s): (L L^T)[%zu,%zu] = %.17g, A = %.17g (tol %.3g)\n", who,
                    i, j, v, want, tol);
            exit(3);
        }
        if (e > maxerr) maxerr = e;
    }
    return maxerr / scale;
}

/* ============================================================ tensorasync */

static ta_runtime *g_rt;
static ta_submit g_opts;

static void ta_start(void) {
    TA(ta_runtime_new(NTHREADS, &g_rt, NULL));
    size_t nth = 0;
    TA(ta_runtime_threads(g_rt, &nth));
    if (nth != NTHREADS) die("tensorasync runtime has the wrong thread count");
    memset(&g_opts, 0, sizeof g_opts);
    g_opts.runtime = g_rt;
}
static void ta_stop(void) {
    TA(ta_runtime_free(g_rt));
    g_rt = NULL;
}

/* The workers' busy time so far, summed over them (ta_stats.busy_ns). */
static double ta_busy_ns(void) {
    ta_stats st = {.struct_size = sizeof st};
    TA(ta_runtime_stats(g_rt, &st));
    return (double)st.busy_ns;
}

/* The share of the timed region that the tensorasync workers spent running
 * tasks, set by each tensorasync run (-1 for the others): near 1 means the
 * scheduling leaves no core idle, and what is missing is the tasks' own speed. */
static double g_busy_share = -1;
static void ta_note_busy(double busy0, double t0, double t1) {
    g_busy_share = (ta_busy_ns() - busy0) / ((t1 - t0) * NTHREADS);
}

static ta_blocks *ta_square_blocks(size_t n) {
    size_t ext[2] = {n, n}, tile[2] = {TILE, TILE}, grid[2] = {0, 0};
    ta_blocks *b = NULL;
    TA(ta_blocks_new_tiled(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ext, tile, TA_ORDER_COL_MAJOR, &b, NULL));
    TA(ta_blocks_grid(b, grid, 2));
    if (grid[0] != ntiles(n) || grid[1] != ntiles(n)) die("unexpected block grid");
    return b;
}

static ta_tensor **ta_tiles(ta_blocks *b, size_t nt) {
    ta_tensor **t = xmalloc(sizeof *t * nt * nt);
    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; j < nt; j++) {
            size_t idx[2] = {i, j};
            TA(ta_blocks_tile(b, 2, idx, &t[i * nt + j], NULL));
        }
    return t;
}

static void ta_wait_event(ta_event *ev) {
    TA(ta_event_wait(ev, TA_WAIT_FOREVER));
    TA(ta_event_free(ev));
}

/* Copies a column-major n x n host matrix into a whole block array. */
static void ta_fill_from(ta_tensor *all, const double *src, size_t n) {
    size_t ext[2] = {n, n};
    ptrdiff_t strides[2] = {1, (ptrdiff_t)n};
    ta_event *ev = NULL;
    TA(ta_copy_in(all, src, 2, ext, strides, &g_opts, &ev, NULL));
    ta_wait_event(ev);
}
static void ta_read_to(ta_tensor *all, double *dst, size_t n) {
    ptrdiff_t strides[2] = {1, (ptrdiff_t)n};
    ta_event *ev = NULL;
    TA(ta_copy_out(all, dst, n * n, strides, &g_opts, &ev, NULL));
    ta_wait_event(ev);
}

/* blas_only: the tile gemms may use only the system-BLAS backend (OpenBLAS,
 * 1 thread per call: the same kernel as the StarPU codelets), to separate
 * the runtime's cost from the tile kernel's speed. By default the library
 * picks its backend (its native faer kernels come first). */
static double ta_gemm_run_with(double *maxerr, int blas_only) {
    size_t n = GEMM_N, nt = ntiles(n);
    ta_start();
    ta_submit tile_opts = g_opts;
    if (blas_only) tile_opts.backends = 1u << TA_BACKEND_BLAS;
    ta_blocks *ba = ta_square_blocks(n), *bb = ta_square_blocks(n), *bc = ta_square_blocks(n);
    ta_tensor *all_a = NULL, *all_b = NULL, *all_c = NULL;
    TA(ta_blocks_all(ba, &all_a, NULL));
    TA(ta_blocks_all(bb, &all_b, NULL));
    TA(ta_blocks_all(bc, &all_c, NULL));
    ta_fill_from(all_a, g_a, n);
    ta_fill_from(all_b, g_b, n);
    ta_event *ev = NULL;
    TA(ta_fill(all_c, real(SENTINEL), &g_opts, &ev, NULL));
    ta_wait_event(ev);
    ta_tensor **ta = ta_tiles(ba, nt), **tb = ta_tiles(bb, nt), **tc = ta_tiles(bc, nt);
    blas_threads_for_tiles();

    double busy0 = ta_busy_ns();
    double t0 = now_ns();
    for (size_t k = 0; k < nt; k++)
        for (size_t i = 0; i < nt; i++)
            for (size_t j = 0; j < nt; j++) {
                ta_status s = ta_gemm(tc[i * nt + j], real(1.0), ta[i * nt + k], tb[k * nt + j], real(k ? 1.0 : 0.0),
                                      &tile_opts, NULL, NULL);
                if (s != TA_STATUS_OK) ta_check(s, "ta_gemm", __LINE__);
            }
    TA(ta_runtime_wait_idle(g_rt, TA_WAIT_FOREVER, NULL));
    double t1 = now_ns();
    ta_note_busy(busy0, t0, t1);

    TA(ta_tensor_wait(all_c, TA_WAIT_FOREVER, NULL)); /* any poison shows here */
    double *c = xmalloc(sizeof *c * n * n);
    ta_read_to(all_c, c, n);
    *maxerr = verify_gemm(c, n, blas_only ? "tensorasync, BLAS backend" : "tensorasync");
    free(c);
    for (size_t x = 0; x < nt * nt; x++) {
        TA(ta_tensor_free(ta[x]));
        TA(ta_tensor_free(tb[x]));
        TA(ta_tensor_free(tc[x]));
    }
    free(ta);
    free(tb);
    free(tc);
    TA(ta_tensor_free(all_a));
    TA(ta_tensor_free(all_b));
    TA(ta_tensor_free(all_c));
    TA(ta_blocks_free(ba));
    TA(ta_blocks_free(bb));
    TA(ta_blocks_free(bc));
    ta_stop();
    return t1 - t0;
}

static double ta_gemm_run(double *maxerr) { return ta_gemm_run_with(maxerr, 0); }
static double ta_gemm_blas_run(double *maxerr) { return ta_gemm_run_with(maxerr, 1); }

/* Whether the task of step k that writes tile (r, c) is on the critical
 * path, as StarPU's Cholesky examples rank it by default: each POTRF, and
 * the TRSM, SYRK and GEMM that lead to the next POTRF and to the next
 * panel's first TRSM, i.e. those writing tiles (k, k), (k+1, k), (k+1, k+1)
 * and (k+2, k+1). Both the tensorasync and the StarPU run use it. */
static int critical_tile(size_t k, size_t r, size_t c) {
    return (r == k && c == k) || (r == k + 1 && (c == k || c == k + 1)) || (r == k + 2 && c == k + 1);
}

/* Which critical-path priorities a Cholesky run gives its tasks:
 * - PRIO_BOUNDED: 1 on the critical path (critical_tile), 0 (FIFO) for the
 *   rest, as the StarPU run below;
 * - PRIO_UNBOUNDED, StarPU's `unbound_prio`: 2 nt - 2 k for POTRF k, less
 *   the tile's row and column for the TRSM, SYRK and GEMM of step k.
 * docs/perf-notes/runtime.md ("Priorities") compares them. */
enum { PRIO_NONE, PRIO_BOUNDED, PRIO_UNBOUNDED };
static ta_submit_ex g_prio;
static const ta_submit *prio_opts(int mode, int critical, int unbounded) {
    if (mode == PRIO_NONE) return &g_opts;
    g_prio.priority = mode == PRIO_BOUNDED ? critical : unbounded;
    return &g_prio.submit;
}

/* prio: which priorities (above). */
static double ta_chol_run_with(double *maxerr, int prio) {
    size_t n = CHOL_N, nt = ntiles(n);
    const int nti = (int)nt;
    ta_start();
    memset(&g_prio, 0, sizeof g_prio);
    g_prio.struct_size = sizeof g_prio;
    g_prio.submit = g_opts;
    g_prio.submit.flags |= TA_SUBMIT_EXTENDED;
    ta_blocks *blk = ta_square_blocks(n);
    ta_tensor *all = NULL;
    TA(ta_blocks_all(blk, &all, NULL));
    ta_fill_from(all, c_a0, n);
    ta_tensor **t = ta_tiles(blk, nt);
#define T(i, j) t[(i) * nt + (j)]
    blas_threads_for_tiles();

    double busy0 = ta_busy_ns();
    double t0 = now_ns();
    ta_status s;
    for (size_t k = 0; k < nt; k++) {
        const int ki = (int)k;
        if ((s = ta_potrf(T(k, k), TA_UPLO_LOWER, prio_opts(prio, critical_tile(k, k, k), 2 * nti - 2 * ki), NULL, NULL)))
            ta_check(s, "ta_potrf", __LINE__);
        ta_tensor *lkk_t = NULL;
        if ((s = ta_tensor_transpose(T(k, k), &lkk_t, NULL))) ta_check(s, "ta_tensor_transpose", __LINE__);
        for (size_t i = k + 1; i < nt; i++)
            if ((s = ta_trsm(T(i, k), TA_SIDE_RIGHT, TA_UPLO_UPPER, TA_DIAG_NON_UNIT, real(1.0), lkk_t,
                             prio_opts(prio, critical_tile(k, i, k), 2 * nti - 2 * ki - (int)i), NULL, NULL)))
                ta_check(s, "ta_trsm", __LINE__);
        ta_tensor_free(lkk_t);
        for (size_t i = k + 1; i < nt; i++) {
            if ((s = ta_syrk(T(i, i), TA_UPLO_LOWER, real(-1.0), T(i, k), real(1.0),
                             prio_opts(prio, critical_tile(k, i, i), 2 * nti - 2 * ki - 2 * (int)i), NULL, NULL)))
                ta_check(s, "ta_syrk", __LINE__);
            for (size_t j = k + 1; j < i; j++) {
                ta_tensor *ljk_t = NULL;
                if ((s = ta_tensor_transpose(T(j, k), &ljk_t, NULL))) ta_check(s, "ta_tensor_transpose", __LINE__);
                if ((s = ta_gemm(T(i, j), real(-1.0), T(i, k), ljk_t, real(1.0),
                                 prio_opts(prio, critical_tile(k, i, j), 2 * nti - 2 * ki - (int)i - (int)j),
                                 NULL, NULL)))
                    ta_check(s, "ta_gemm", __LINE__);
                ta_tensor_free(ljk_t);
            }
        }
    }
    TA(ta_runtime_wait_idle(g_rt, TA_WAIT_FOREVER, NULL));
    double t1 = now_ns();
    ta_note_busy(busy0, t0, t1);
#undef T

    TA(ta_tensor_wait(all, TA_WAIT_FOREVER, NULL));
    ta_read_to(all, c_w, n);
    *maxerr = verify_chol(c_w, n, "tensorasync");
    for (size_t x = 0; x < nt * nt; x++) TA(ta_tensor_free(t[x]));
    free(t);
    TA(ta_tensor_free(all));
    TA(ta_blocks_free(blk));
    ta_stop();
    return t1 - t0;
}

static double ta_chol_run(double *maxerr) { return ta_chol_run_with(maxerr, PRIO_BOUNDED); }
static double ta_chol_noprio_run(double *maxerr) { return ta_chol_run_with(maxerr, PRIO_NONE); }
static double ta_chol_unbounded_run(double *maxerr) { return ta_chol_run_with(maxerr, PRIO_UNBOUNDED); }

/* ================================================================ StarPU */

static void sp_init(const char *sched) {
    starpu_env(sched);
    int rc = starpu_init(NULL);
    if (rc != 0) die("starpu_init failed");
    if (starpu_cpu_worker_get_count() != NTHREADS) die("StarPU has the wrong number of CPU workers");
}

static const double ZERO = 0.0, ONE = 1.0;

/* C = A*B + beta*C on one tile; cl_arg points to beta. */
static void sp_gemm_nn(void *buffers[], void *arg) {
    double beta = *(const double *)arg;
    const double *a = (const double *)STARPU_MATRIX_GET_PTR(buffers[0]);
    const double *b = (const double *)STARPU_MATRIX_GET_PTR(buffers[1]);
    double *c = (double *)STARPU_MATRIX_GET_PTR(buffers[2]);
    int m = (int)STARPU_MATRIX_GET_NX(buffers[2]), n = (int)STARPU_MATRIX_GET_NY(buffers[2]);
    int k = (int)STARPU_MATRIX_GET_NY(buffers[0]);
    openblas_set_num_threads(1);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, (int)STARPU_MATRIX_GET_LD(buffers[0]), b,
                (int)STARPU_MATRIX_GET_LD(buffers[1]), beta, c, (int)STARPU_MATRIX_GET_LD(buffers[2]));
}
static struct starpu_codelet cl_gemm_nn = {.where = STARPU_CPU,
                                           .cpu_funcs = {sp_gemm_nn},
                                           .nbuffers = 3,
                                           .modes = {STARPU_R, STARPU_R, STARPU_RW},
                                           .name = "dgemm"};

/* Cholesky codelets, column-major tiles (NX = rows). */
static void sp_potrf(void *buffers[], void *arg) {
    (void)arg;
    double *a = (double *)STARPU_MATRIX_GET_PTR(buffers[0]);
    int n = (int)STARPU_MATRIX_GET_NX(buffers[0]), ld = (int)STARPU_MATRIX_GET_LD(buffers[0]), info = 0;
    openblas_set_num_threads(1);
    dpotrf_("L", &n, a, &ld, &info, 1);
    if (info != 0) die("StarPU codelet: dpotrf_ failed");
}
/* A_ik = A_ik L_kk^-T: buffers {L_kk (R), A_ik (RW)} */
static void sp_trsm(void *buffers[], void *arg) {
    (void)arg;
    const double *l = (const double *)STARPU_MATRIX_GET_PTR(buffers[0]);
    double *b = (double *)STARPU_MATRIX_GET_PTR(buffers[1]);
    openblas_set_num_threads(1);
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)STARPU_MATRIX_GET_NX(buffers[1]),
                (int)STARPU_MATRIX_GET_NY(buffers[1]), 1.0, l, (int)STARPU_MATRIX_GET_LD(buffers[0]), b,
                (int)STARPU_MATRIX_GET_LD(buffers[1]));
}
/* A_ii -= A_ik A_ik^T (lower): buffers {A_ik (R), A_ii (RW)} */
static void sp_syrk(void *buffers[], void *arg) {
    (void)arg;
    const double *a = (const double *)STARPU_MATRIX_GET_PTR(buffers[0]);
    double *c = (double *)STARPU_MATRIX_GET_PTR(buffers[1]);
    openblas_set_num_threads(1);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)STARPU_MATRIX_GET_NX(buffers[1]),
                (int)STARPU_MATRIX_GET_NY(buffers[0]), -1.0, a, (int)STARPU_MATRIX_GET_LD(buffers[0]), 1.0, c,
                (int)STARPU_MATRIX_GET_LD(buffers[1]));
}
/* A_ij -= A_ik A_jk^T: buffers {A_ik (R), A_jk (R), A_ij (RW)} */
static void sp_gemm_nt(void *buffers[], void *arg) {
    (void)arg;
    const double *a = (const double *)STARPU_MATRIX_GET_PTR(buffers[0]);
    const double *b = (const double *)STARPU_MATRIX_GET_PTR(buffers[1]);
    double *c = (double *)STARPU_MATRIX_GET_PTR(buffers[2]);
    openblas_set_num_threads(1);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)STARPU_MATRIX_GET_NX(buffers[2]),
                (int)STARPU_MATRIX_GET_NY(buffers[2]), (int)STARPU_MATRIX_GET_NY(buffers[0]), -1.0, a,
                (int)STARPU_MATRIX_GET_LD(buffers[0]), b, (int)STARPU_MATRIX_GET_LD(buffers[1]), 1.0, c,
                (int)STARPU_MATRIX_GET_LD(buffers[2]));
}
static struct starpu_codelet cl_potrf = {
    .where = STARPU_CPU, .cpu_funcs = {sp_potrf}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "dpotrf"};
static struct starpu_codelet cl_trsm = {
    .where = STARPU_CPU, .cpu_funcs = {sp_trsm}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .name = "dtrsm"};
static struct starpu_codelet cl_syrk = {
    .where = STARPU_CPU, .cpu_funcs = {sp_syrk}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .name = "dsyrk"};
static struct starpu_codelet cl_gemm_nt = {.where = STARPU_CPU,
                                           .cpu_funcs = {sp_gemm_nt},
                                           .nbuffers = 3,
                                           .modes = {STARPU_R, STARPU_R, STARPU_RW},
                                           .name = "dgemm_nt"};

/* Registers a column-major n x n matrix and partitions it nt x nt. */
static starpu_data_handle_t sp_register_ld(double *m, size_t n, size_t ld) {
    starpu_data_handle_t h;
    starpu_matrix_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)m, (uint32_t)ld, (uint32_t)n, (uint32_t)n,
                                sizeof(double));
    struct starpu_data_filter rows = {.filter_func = starpu_matrix_filter_block, .nchildren = (unsigned)ntiles(n)};
    struct starpu_data_filter cols = {.filter_func = starpu_matrix_filter_vertical_block,
                                      .nchildren = (unsigned)ntiles(n)};
    starpu_data_map_filters(h, 2, &rows, &cols);
    return h;
}

static starpu_data_handle_t sp_register(double *m, size_t n) { return sp_register_ld(m, n, n);
}
static void sp_unregister(starpu_data_handle_t h) {
    starpu_data_unpartition(h, STARPU_MAIN_RAM);
    starpu_data_unregister(h);
}
/* Tile (i, j): row block i, column block j. */
#define SP_TILE(h, i, j) starpu_data_get_sub_data((h), 2, (unsigned)(i), (unsigned)(j))

static void sp_submit(struct starpu_codelet *cl, void *arg, int prio, int nb, starpu_data_handle_t h0,
                      starpu_data_handle_t h1, starpu_data_handle_t h2) {
    struct starpu_task *t = starpu_task_create();
    t->cl = cl;
    t->cl_arg = arg;
    t->priority = prio;
    t->handles[0] = h0;
    if (nb > 1) t->handles[1] = h1;
    if (nb > 2) t->handles[2] = h2;
    int rc = starpu_task_submit(t);
    if (rc != 0) die("starpu_task_submit failed");
}

static double sp_gemm_run(double *maxerr) {
    size_t n = GEMM_N, nt = ntiles(n);
    for (size_t x = 0; x < n * n; x++) g_c[x] = SENTINEL;
    sp_init(SP_SCHED_GEMM);
    starpu_data_handle_t ha = sp_register(g_a, n), hb = sp_register(g_b, n), hc = sp_register(g_c, n);
    openblas_set_num_threads(1);

    double t0 = now_ns();
    for (size_t k = 0; k < nt; k++)
        for (size_t i = 0; i < nt; i++)
            for (size_t j = 0; j < nt; j++)
                sp_submit(&cl_gemm_nn, (void *)(k ? &ONE : &ZERO), STARPU_DEFAULT_PRIO, 3, SP_TILE(ha, i, k),
                          SP_TILE(hb, k, j), SP_TILE(hc, i, j));
    if (starpu_task_wait_for_all() != 0) die("starpu_task_wait_for_all");
    double t1 = now_ns();

    sp_unregister(ha);
    sp_unregister(hb);
    sp_unregister(hc);
    starpu_shutdown();
    *maxerr = verify_gemm(g_c, n, "StarPU");
    return t1 - t0;
}

static double sp_chol_run(double *maxerr) {
    size_t n = CHOL_N, nt = ntiles(n);
    sp_init(SP_SCHED_CHOL);
    starpu_data_handle_t h = sp_register_ld(peer_in(n), n, n + PEER_PAD);
    openblas_set_num_threads(1);

    /* Priorities as in StarPU's own Cholesky examples (bounded priorities):
     * the tasks on the critical path (critical_tile) go first. */
#define SP_PRIO(r, c) (critical_tile(k, r, c) ? STARPU_MAX_PRIO : STARPU_DEFAULT_PRIO)
    double t0 = now_ns();
    for (size_t k = 0; k < nt; k++) {
        sp_submit(&cl_potrf, NULL, SP_PRIO(k, k), 1, SP_TILE(h, k, k), NULL, NULL);
        for (size_t i = k + 1; i < nt; i++)
            sp_submit(&cl_trsm, NULL, SP_PRIO(i, k), 2, SP_TILE(h, k, k), SP_TILE(h, i, k), NULL);
        for (size_t i = k + 1; i < nt; i++) {
            sp_submit(&cl_syrk, NULL, SP_PRIO(i, i), 2, SP_TILE(h, i, k), SP_TILE(h, i, i), NULL);
            for (size_t j = k + 1; j < i; j++)
                sp_submit(&cl_gemm_nt, NULL, SP_PRIO(i, j), 3,
                          SP_TILE(h, i, k), SP_TILE(h, j, k), SP_TILE(h, i, j));
        }
    }
#undef SP_PRIO
    if (starpu_task_wait_for_all() != 0) die("starpu_task_wait_for_all");
    double t1 = now_ns();

    sp_unregister(h);
    starpu_shutdown();
    peer_out(n);
    *maxerr = verify_chol(c_w, n, "StarPU");
    return t1 - t0;
}

/* ================================================ OpenBLAS / LAPACK (2 threads) */

static double ref_gemm_run(double *maxerr) {
    size_t n = GEMM_N;
    for (size_t x = 0; x < n * n; x++) g_c[x] = SENTINEL;
    openblas_set_num_threads(NTHREADS);
    double t0 = now_ns();
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, g_a, (int)n, g_b, (int)n, 0.0,
                g_c, (int)n);
    double t1 = now_ns();
    blas_threads_for_tiles();
    *maxerr = verify_gemm(g_c, n, "OpenBLAS");
    return t1 - t0;
}

static double ref_chol_run(double *maxerr) {
    size_t n = CHOL_N;
    int ni = (int)n, ld = (int)(n + PEER_PAD), info = 0;
    double *a = peer_in(n);
    openblas_set_num_threads(NTHREADS);
    double t0 = now_ns();
    dpotrf_("L", &ni, a, &ld, &info, 1);
    double t1 = now_ns();
    blas_threads_for_tiles();
    peer_out(n);
    if (info != 0) die("dpotrf_ failed");
    *maxerr = verify_chol(c_w, n, "LAPACK");
    return t1 - t0;
}

/* ================================================================ driver */

enum { B_GEMM, B_CHOL, NBENCH };
enum { I_TA, I_SP, I_REF, I_TAB, I_TANP, I_TAUB, NIMPL };
static const char *bench_key[NBENCH] = {"gemm", "cholesky"};
static const char *impl_key[NIMPL] = {"tensorasync", "starpu", "openblas", "tensorasync_blas",
                                     "tensorasync_noprio", "tensorasync_unbounded"};
/* The reference is OpenBLAS's dgemm for gemm and its LAPACK dpotrf for Cholesky. */
static const char *impl_label(int b, int i) { return b == B_CHOL && i == I_REF ? "lapack" : impl_key[i]; }
typedef double (*run_fn)(double *maxerr);
/* tensorasync_blas is for gemm only (the BLAS backend offers no potrf/trsm/syrk);
 * tensorasync_noprio and _unbounded (other priorities) for Cholesky only. */
static const run_fn runs[NBENCH][NIMPL] = {
    {ta_gemm_run, sp_gemm_run, ref_gemm_run, ta_gemm_blas_run, NULL, NULL},
    {ta_chol_run, sp_chol_run, ref_chol_run, NULL, ta_chol_noprio_run, ta_chol_unbounded_run}};

typedef struct {
    double warm_s, secs[MAXREP], maxerr;
    double busy[MAXREP]; /* workers' busy share of each timed run; -1: not tensorasync */
    int n;
    double wall_ns, sys_ns, self_ns;
} series_t;

static double flops_of(int b) {
    double n = (double)(b == B_GEMM ? GEMM_N : CHOL_N);
    return b == B_GEMM ? 2.0 * n * n * n : n * n * n / 3.0;
}

/* best and median GF/s of a series */
static void rates(int b, const series_t *s, double *best, double *med) {
    double v[MAXREP];
    for (int r = 0; r < s->n; r++) v[r] = flops_of(b) / s->secs[r] / 1e9;
    qsort(v, (size_t)s->n, sizeof v[0], cmp_double);
    *best = s->n ? v[s->n - 1] : 0;
    *med = s->n == 0 ? 0 : s->n % 2 ? v[s->n / 2] : 0.5 * (v[s->n / 2 - 1] + v[s->n / 2]);
}

static void setup_gemm(void) {
    size_t n = GEMM_N;
    g_a = xmalloc(sizeof(double) * n * n);
    g_b = xmalloc(sizeof(double) * n * n);
    g_c = xmalloc(sizeof(double) * n * n);
    for (size_t x = 0; x < n * n; x++) g_a[x] = rnd();
    for (size_t x = 0; x < n * n; x++) g_b[x] = rnd();
    make_samples(n, 0);
}

/* A0 = M M^T + n I (column-major, both triangles), with OpenBLAS dsyrk. */
static void setup_chol(void) {
    size_t n = CHOL_N;
    double *m = xmalloc(sizeof(double) * n * n);
    c_a0 = xmalloc(sizeof(double) * n * n);
    c_w = xmalloc(sizeof(double) * n * n);
    c_wp = xmalloc(sizeof(double) * n * (n + PEER_PAD));
    for (size_t x = 0; x < n * n; x++) m[x] = rnd();
    openblas_set_num_threads(NTHREADS);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)n, (int)n, 1.0, m, (int)n, 0.0, c_a0, (int)n);
    blas_threads_for_tiles();
    for (size_t j = 0; j < n; j++) {
        c_a0[j + j * n] += (double)n;
        for (size_t i = j + 1; i < n; i++) c_a0[j + i * n] = c_a0[i + j * n];
    }
    free(m);
    make_samples(n, 1);
}

/* GF/s of one 2-thread OpenBLAS dgemm call, n = 2048 (the efficiency's
 * denominator, measured in every Cholesky round beside the contenders). */
static double dgemm_2thread_gflops(void) {
    size_t n = 2048;
    double *a = xmalloc(sizeof(double) * n * n), *b = xmalloc(sizeof(double) * n * n),
           *c = xmalloc(sizeof(double) * n * n);
    for (size_t x = 0; x < n * n; x++) a[x] = b[x] = rnd();
    settle_threads("dgemm");
    openblas_set_num_threads(NTHREADS);
    double t0 = now_ns();
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, a, (int)n, b, (int)n, 0.0, c,
                (int)n);
    double v = 2.0 * (double)n * (double)n * (double)n / (now_ns() - t0);
    blas_threads_for_tiles();
    free(a);
    free(b);
    free(c);
    return v;
}

/* Whether the comma-separated list holds tok. */
static int has_token(const char *list, const char *tok) {
    size_t len = strlen(tok);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && !strncmp(p, tok, len)) return 1;
        p += n + (end ? 1 : 0);
    }
    return 0;
}

int main(int argc, char **argv) {
    openblas_best_init(argv);
    const char *only = "gemm,chol", *impls = "ta,sp,ref,tablas,tanoprio";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--only=", 7))
            only = a + 7;
        else if (!strncmp(a, "--impl=", 7))
            impls = a + 7;
        else if (!strncmp(a, "--reps=", 7))
            NREP = atoi(a + 7);
        else if (!strncmp(a, "--gemm-n=", 9))
            GEMM_N = (size_t)atol(a + 9);
        else if (!strncmp(a, "--chol-n=", 9))
            CHOL_N = (size_t)atol(a + 9);
        else if (!strncmp(a, "--peer-pad=", 11))
            PEER_PAD = (size_t)atol(a + 11);
        else if (!strncmp(a, "--tile=", 7))
            TILE = (size_t)atol(a + 7);
        else if (!strncmp(a, "--sp-sched-gemm=", 16))
            SP_SCHED_GEMM = a + 16;
        else if (!strncmp(a, "--sp-sched-chol=", 16))
            SP_SCHED_CHOL = a + 16;
        else if (!strcmp(a, "--no-blas-reset"))
            BLAS_RESET = 0;
        else {
            fprintf(stderr,
                    "usage: %s [--only=gemm,chol] [--impl=ta,sp,ref,tablas,tanoprio,taunbound] [--reps=N] [--gemm-n=N] [--chol-n=N] "
                    "[--tile=T] [--sp-sched-gemm=S] [--sp-sched-chol=S] [--no-blas-reset]\n",
                    argv[0]);
            return 2;
        }
    }
    if (NREP < 1 || NREP > MAXREP || GEMM_N < 1 || CHOL_N < 1 || TILE < 1) die("bad arguments");
    int do_bench[NBENCH] = {has_token(only, "gemm"), has_token(only, "chol")};
    int enabled[NIMPL] = {has_token(impls, "ta"), has_token(impls, "sp"), has_token(impls, "ref"),
                          has_token(impls, "tablas"), has_token(impls, "tanoprio"), has_token(impls, "taunbound")};

    int spv[3];
    starpu_get_version(&spv[0], &spv[1], &spv[2]);
    char *cfg = openblas_get_config();
    printf("tiled benchmark: tensorasync %s | StarPU %d.%d.%d (2 CPU workers; gemm: %s, cholesky: %s) | OpenBLAS "
           "(%s)\n",
           ta_version(), spv[0], spv[1], spv[2], SP_SCHED_GEMM, SP_SCHED_CHOL, cfg ? cfg : "?");
    printf("%s (also StarPU's codelet kernel)\n", openblas_kernel_line());
    const int blas_fallback = openblas_fallback();
    printf("host: %ld online CPUs; 2 workers per runtime, 2 threads for the single-call references; 1 warm-up + %d "
           "timed rounds, implementations interleaved\n",
           sysconf(_SC_NPROCESSORS_ONLN), NREP);
    printf("gemm: n=%zu, tiles %zu (%zux%zu grid, %zu tile tasks); cholesky: n=%zu, tiles %zu (%zux%zu grid, %zu "
           "tasks)\n",
           GEMM_N, TILE, ntiles(GEMM_N), ntiles(GEMM_N), ntiles(GEMM_N) * ntiles(GEMM_N) * ntiles(GEMM_N), CHOL_N,
           TILE, ntiles(CHOL_N), ntiles(CHOL_N),
           ntiles(CHOL_N) + ntiles(CHOL_N) * (ntiles(CHOL_N) - 1) +
               ntiles(CHOL_N) * (ntiles(CHOL_N) - 1) * (ntiles(CHOL_N) - 2) / 6);
    fflush(stdout);

    double t_start = now_ns();
    static series_t ser[NBENCH][NIMPL];
    double dgemm_gf[MAXREP];
    int n_dgemm = 0;
    double max_other = 0;
    for (int b = 0; b < NBENCH; b++) {
        if (!do_bench[b]) continue;
        double ts = now_ns();
        if (b == B_GEMM)
            setup_gemm();
        else
            setup_chol();
        printf("\n== %s (input setup %.1f s) ==\n", bench_key[b], (now_ns() - ts) / 1e9);
        fflush(stdout);
        for (int round = 0; round <= NREP; round++) {
            for (int k = 0; k < NIMPL; k++) {
                int i = (round + k) % NIMPL;
                if (!enabled[i] || !runs[b][i]) continue;
                settle_threads(impl_label(b, i));
                series_t *s = &ser[b][i];
                double w0 = now_ns(), sys0 = system_busy_ns(), self0 = self_cpu_ns();
                double err = 0;
                g_busy_share = -1;
                double ns = runs[b][i](&err);
                double w1 = now_ns(), sys1 = system_busy_ns(), self1 = self_cpu_ns();
                if (err > s->maxerr) s->maxerr = err;
                if (round == 0) {
                    s->warm_s = ns / 1e9;
                } else {
                    s->busy[s->n] = g_busy_share;
                    s->secs[s->n++] = ns / 1e9;
                    /* shares over the whole run call (setup included): a coarse check */
                    s->wall_ns += w1 - w0;
                    s->sys_ns += sys1 - sys0;
                    s->self_ns += self1 - self0;
                }
                printf("  round %d %-16s %8.3f s  %6.1f GF/s%s\n", round, impl_label(b, i), ns / 1e9,
                       flops_of(b) / ns, round == 0 ? "  (warm-up)" : "");
                fflush(stdout);
            }
            if (b == B_CHOL) {
                double gf = dgemm_2thread_gflops();
                if (round > 0) dgemm_gf[n_dgemm++] = gf;
                printf("  round %d %-16s %6.1f GF/s (2-thread dgemm n=2048, the efficiency's reference)\n", round,
                       "dgemm", gf);
            }
        }
        if (b == B_GEMM) {
            free(g_a);
            free(g_b);
            free(g_c);
        } else {
            free(c_a0);
            free(c_w);
        }
    }

    /* Per-implementation lines and the table. */
    double best[NBENCH][NIMPL] = {{0}}, med[NBENCH][NIMPL] = {{0}};
    printf("\n");
    for (int b = 0; b < NBENCH; b++) {
        if (!do_bench[b]) continue;
        for (int i = 0; i < NIMPL; i++) {
            if (!enabled[i] || !runs[b][i]) continue;
            series_t *s = &ser[b][i];
            rates(b, s, &best[b][i], &med[b][i]);
            double other = s->wall_ns > 0 ? (s->sys_ns - s->self_ns) /
                                                (s->wall_ns * (double)sysconf(_SC_NPROCESSORS_ONLN))
                                          : 0;
            if (other < 0) other = 0;
            if (other > max_other) max_other = other;
            printf("  %-9s %-16s warm-up %.3f s, runs", bench_key[b], impl_label(b, i), s->warm_s);
            for (int r = 0; r < s->n; r++) printf(" %.3f", s->secs[r]);
            printf(" s -> median %.1f GF/s, best %.1f GF/s | sampled max error %.2g%s | other load %.0f%%",
                   med[b][i], best[b][i], s->maxerr, b == B_CHOL ? " (relative)" : "", 100 * other);
            if (s->n > 0 && s->busy[0] >= 0) {
                printf(" | workers busy");
                for (int r = 0; r < s->n; r++) printf(" %.1f%%", 100 * s->busy[r]);
            }
            printf("\n");
        }
    }

    const double tgt_sp[NBENCH] = {1.15, 1.2}, tgt_ref[NBENCH] = {0.95, 1.0};
    printf("\n== results (GF/s: median of %d runs, best in parentheses; higher is better) ==\n\n", NREP);
    printf("| benchmark | tensorasync | StarPU 1.3 | OpenBLAS/LAPACK (1 call, 2 threads) | ours/StarPU | "
           "ours/OpenBLAS | targets | verdict |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    char verdicts[NBENCH][2][8];
    for (int b = 0; b < NBENCH; b++) {
        if (!do_bench[b]) continue;
        char cell[NIMPL][48], r_sp[16] = "n/a", r_ref[16] = "n/a", tg[64] = "", vd[64] = "";
        for (int i = 0; i < NIMPL; i++) {
            if (enabled[i])
                snprintf(cell[i], sizeof cell[i], "%.1f (%.1f)", med[b][i], best[b][i]);
            else
                snprintf(cell[i], sizeof cell[i], "n/a");
        }
        int have_ta = enabled[I_TA], have_sp = enabled[I_SP] && have_ta, have_ref = enabled[I_REF] && have_ta;
        if (have_sp) snprintf(r_sp, sizeof r_sp, "%.2fx", med[b][I_TA] / med[b][I_SP]);
        if (have_ref) snprintf(r_ref, sizeof r_ref, "%.2fx", med[b][I_TA] / med[b][I_REF]);
        strcpy(verdicts[b][0], "n/a");
        strcpy(verdicts[b][1], "n/a");
        if (tgt_sp[b] > 0) {
            snprintf(tg + strlen(tg), sizeof tg - strlen(tg), ">= %.2fx StarPU", tgt_sp[b]);
            if (have_sp) strcpy(verdicts[b][0], med[b][I_TA] >= tgt_sp[b] * med[b][I_SP] ? "PASS" : "MISS");
            if (blas_fallback) strcpy(verdicts[b][0], "none");
            snprintf(vd + strlen(vd), sizeof vd - strlen(vd), "%s", verdicts[b][0]);
        }
        snprintf(tg + strlen(tg), sizeof tg - strlen(tg), "%s>= %.2fx %s", tg[0] ? ", " : "", tgt_ref[b],
                 b == B_GEMM ? "OpenBLAS" : "LAPACK");
        if (have_ref) strcpy(verdicts[b][1], med[b][I_TA] >= tgt_ref[b] * med[b][I_REF] ? "PASS" : "MISS");
        if (blas_fallback) strcpy(verdicts[b][1], "none");
        snprintf(vd + strlen(vd), sizeof vd - strlen(vd), "%s%s", vd[0] ? ", " : "", verdicts[b][1]);
        char desc[96];
        snprintf(desc, sizeof desc, "%s n=%zu, %zu-tiles", b == B_GEMM ? "dgemm" : "Cholesky",
                 b == B_GEMM ? GEMM_N : CHOL_N, TILE);
        if (blas_fallback) /* both peers run OpenBLAS's kernels: a crippled peer gives no verdict */
            snprintf(vd, sizeof vd, "none: fallback OpenBLAS kernel");
        else if (max_other > 0.10) /* a verdict from a busy machine is not one */
            snprintf(vd + strlen(vd), sizeof vd - strlen(vd), " (noisy)");
        printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", desc, cell[I_TA], cell[I_SP], cell[I_REF], r_sp, r_ref,
               tg, vd);
    }
    if (do_bench[B_CHOL]) {
        qsort(dgemm_gf, (size_t)n_dgemm, sizeof dgemm_gf[0], cmp_double);
        double peak = n_dgemm % 2 ? dgemm_gf[n_dgemm / 2] : 0.5 * (dgemm_gf[n_dgemm / 2 - 1] + dgemm_gf[n_dgemm / 2]);
        printf("\nCholesky efficiency (median GF/s over the median GF/s of one 2-thread OpenBLAS dgemm call, n=2048,\n"
               "measured in each round beside them: %.1f GF/s):", peak);
        for (int i = 0; i < NIMPL; i++)
            if (enabled[i] && runs[B_CHOL][i]) printf(" %s %.2f", impl_label(B_CHOL, i), med[B_CHOL][i] / peak);
        printf("\n");
        for (int i = 0; i < NIMPL; i++)
            if (enabled[i] && runs[B_CHOL][i])
                printf("RESULT bench=cholesky efficiency impl=%s value=%.3f dgemm_2t_gflops=%.1f\n",
                       impl_label(B_CHOL, i), med[B_CHOL][i] / peak, peak);
        if (enabled[I_TA] && enabled[I_TANP])
            printf("tensorasync Cholesky with/without priorities: %.1f / %.1f GF/s (%.2fx)\n", med[B_CHOL][I_TA],
                   med[B_CHOL][I_TANP], med[B_CHOL][I_TA] / med[B_CHOL][I_TANP]);
        if (enabled[I_TA] && enabled[I_TAUB])
            printf("tensorasync Cholesky with bounded/unbounded priorities: %.1f / %.1f GF/s (%.2fx)\n", med[B_CHOL][I_TA],
                   med[B_CHOL][I_TAUB], med[B_CHOL][I_TA] / med[B_CHOL][I_TAUB]);
    }
    if (do_bench[B_GEMM] && enabled[I_TAB]) {
        printf("\ntensorasync gemm restricted to the BLAS backend (ta_submit.backends = 1u << TA_BACKEND_BLAS: OpenBLAS,\n"
               "1 thread per tile, the same kernel as the StarPU codelets): %.1f (%.1f) GF/s",
               med[B_GEMM][I_TAB], best[B_GEMM][I_TAB]);
        if (enabled[I_SP]) printf(", %.2fx StarPU", med[B_GEMM][I_TAB] / med[B_GEMM][I_SP]);
        if (enabled[I_REF]) printf(", %.2fx OpenBLAS", med[B_GEMM][I_TAB] / med[B_GEMM][I_REF]);
        printf(".\nThe tensorasync column uses the library's default backend order (its native faer kernels first).\n");
    }
    printf("\nStarPU: STARPU_NCPU=2, gemm scheduler %s, cholesky scheduler %s (with critical-path priorities);\n"
           "codelets call OpenBLAS with openblas_set_num_threads(1). Reference: one OpenBLAS call with 2 threads.\n"
           "Ratios compare medians. Every run was checked on %d sampled entries against a reference.\n\n",
           SP_SCHED_GEMM, SP_SCHED_CHOL, NSAMPLE);

    for (int b = 0; b < NBENCH; b++) {
        if (!do_bench[b]) continue;
        size_t n = b == B_GEMM ? GEMM_N : CHOL_N;
        for (int i = 0; i < NIMPL; i++) {
            if (!enabled[i] || !runs[b][i]) continue;
            const char *sched = i != I_SP ? "" : b == B_GEMM ? SP_SCHED_GEMM : SP_SCHED_CHOL;
            printf("RESULT bench=%s n=%zu tile=%zu impl=%s%s%s unit=gflops median=%.1f best=%.1f runs=%d\n",
                   bench_key[b], n, TILE, impl_label(b, i), i == I_SP ? " sched=" : "",
                   sched, med[b][i], best[b][i], ser[b][i].n);
        }
        if (enabled[I_TA] && enabled[I_SP])
            printf("RESULT bench=%s ratio=ours_over_starpu value=%.3f target=%.2f verdict=%s\n", bench_key[b],
                   med[b][I_TA] / med[b][I_SP], tgt_sp[b], verdicts[b][0]);
        if (enabled[I_TA] && enabled[I_REF])
            printf("RESULT bench=%s ratio=ours_over_%s value=%.3f target=%.2f verdict=%s\n", bench_key[b],
                   b == B_GEMM ? "openblas" : "lapack", med[b][I_TA] / med[b][I_REF], tgt_ref[b], verdicts[b][1]);
        if (runs[b][I_TAB] && enabled[I_TAB] && enabled[I_SP])
            printf("RESULT bench=%s ratio=ours_blas_backend_over_starpu value=%.3f (same tile kernel; no target)\n",
                   bench_key[b], med[b][I_TAB] / med[b][I_SP]);
    }
    printf("RESULT meta other_load_max_pct=%.0f host_cpus=%ld workers=%d runs=%d\n", 100 * max_other,
           sysconf(_SC_NPROCESSORS_ONLN), NTHREADS, NREP);
    printf("\nhighest CPU share used by other processes during an implementation's runs: %.0f%%%s\n", 100 * max_other,
           max_other > 0.10 ? " (the machine was not quiet: expect noise)" : "");
    printf("total bench time: %.1f s\n", (now_ns() - t_start) / 1e9);
    return 0;
}
