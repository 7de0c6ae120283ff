/*
 * tiled_cholesky.c: tiled Cholesky factorisation (lower, right-looking) on a
 * block array.
 *
 * Build and run:  make -C examples-c tiled_cholesky   (also run by `make check`)
 *
 * A is an n x n symmetric positive definite matrix held in a block array: one
 * dense allocation cut into nt x nt tiles, one epoch queue per tile. The
 * program submits the classic algorithm in plain program order and never
 * waits in between:
 *
 *     for k = 0 .. nt-1:
 *         POTRF  A_kk = L_kk L_kk^T                      ta_potrf(A_kk, lower)
 *         for i > k:
 *             TRSM   A_ik = A_ik L_kk^-T                   ta_trsm(A_ik, right, transpose(A_kk): upper)
 *         for i > k:
 *             SYRK   A_ii = A_ii - A_ik A_ik^T  (lower)    ta_syrk(A_ii, lower, -1, A_ik, 1)
 *             for k < j < i:
 *                 GEMM   A_ij = A_ij - A_ik A_jk^T         ta_gemm(A_ij, -1, A_ik, transpose(A_jk), 1)
 *
 * Each tile's epoch queue orders the tasks that touch it; tasks on different
 * tiles run concurrently as soon as their inputs are final. That is the whole
 * DAG of a tiled Cholesky, found from program order alone.
 *
 * Priorities (ta_submit_ex.priority) only decide which ready task a free
 * worker takes first: the critical path goes ahead of the trailing updates,
 * with the critical-path priorities of StarPU's Cholesky examples. Each
 * POTRF, and the TRSM, SYRK and GEMM of step k that lead to POTRF k+1 and
 * to the next panel's first TRSM (row k+1, and the GEMM on tile (k+2, k+1)),
 * get priority 1; the trailing updates keep the default 0, so they run in
 * the order they become ready. (StarPU's unbounded variant, which ranks
 * every task, measured slower: docs/perf-notes/runtime.md, "Priorities".)
 *
 * Each case is checked against a plain-C Cholesky of the same matrix (entry
 * by entry on the lower triangle) and by the residual max|A - L L^T|, with
 * ragged tiles (n not a multiple of the tile size), several tile sizes and
 * both storage orders. The tiles strictly above the diagonal are never
 * written by the algorithm, and that is checked too. The input is
 * A = M M^T + n I with M random. A last case factors a matrix that is not
 * positive definite: the failing POTRF's error poisons exactly the tiles
 * downstream of it. The program prints one "verified" line per case and
 * exits non-zero on any mismatch. `tiled_cholesky N TILE` runs only the
 * case N, TILE (row-major).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorasync.h>

#define EXAMPLE_RNG_SEED 0x9E3779B97F4A7C15ULL
#include "example_util.h"

static ta_runtime *rt;
static ta_submit opts; /* {.runtime = rt} */
static ta_submit_ex prio; /* {.submit = opts + TA_SUBMIT_EXTENDED} */
static int failures;

/* A = M M^T + n I, row-major (and symmetric, so any order). */
static void make_spd(double *a, size_t n) {
    double *m = malloc(sizeof *m * n * n);
    if (!m) exit(2);
    for (size_t x = 0; x < n * n; x++) m[x] = rnd();
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0.0;
            for (size_t p = 0; p < n; p++) s += m[i * n + p] * m[j * n + p];
            if (i == j) s += (double)n;
            a[i * n + j] = a[j * n + i] = s;
        }
    free(m);
}

/* Plain-C lower Cholesky of a row-major matrix, in place (lower triangle). */
static int ref_cholesky(double *l, size_t n) {
    for (size_t j = 0; j < n; j++) {
        double d = l[j * n + j];
        for (size_t p = 0; p < j; p++) d -= l[j * n + p] * l[j * n + p];
        if (!(d > 0.0)) return -1;
        d = sqrt(d);
        l[j * n + j] = d;
        for (size_t i = j + 1; i < n; i++) {
            double s = l[i * n + j];
            for (size_t p = 0; p < j; p++) s -= l[i * n + p] * l[j * n + p];
            l[i * n + j] = s / d;
        }
    }
    return 0;
}

/* Handles to the nt x nt tiles of `blocks`, row by row. */
static ta_tensor **tiles_of(ta_blocks *blocks, size_t nt) {
    ta_tensor **t = malloc(sizeof *t * nt * nt);
    if (!t) exit(2);
    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; j < nt; j++) {
            size_t idx[2] = {i, j};
            OK(ta_blocks_tile(blocks, 2, idx, &t[i * nt + j], &err));
        }
    return t;
}

static void free_tiles(ta_tensor **t, size_t nt) {
    for (size_t x = 0; x < nt * nt; x++) OK(ta_tensor_free(t[x]));
    free(t);
}

/* Options for a task on the critical path or not (see the header comment). */
static const ta_submit *at(int critical) {
    prio.priority = critical ? 1 : 0;
    return &prio.submit;
}

/* The algorithm of the header comment, submitted in program order on the
 * tiles t (row by row); nothing waits. */
static void submit_cholesky(ta_tensor **t, size_t nt) {
#define T(i, j) t[(i) * nt + (j)]
    for (size_t k = 0; k < nt; k++) {
        OK(ta_potrf(T(k, k), TA_UPLO_LOWER, at(1), NULL, &err));
        ta_tensor *lkk_t = NULL; /* L_kk^T: the transposed view of a lower tile is upper */
        OK(ta_tensor_transpose(T(k, k), &lkk_t, &err));
        for (size_t i = k + 1; i < nt; i++)
            OK(ta_trsm(T(i, k), TA_SIDE_RIGHT, TA_UPLO_UPPER, TA_DIAG_NON_UNIT, real(1.0), lkk_t, at(i == k + 1), NULL,
                       &err));
        OK(ta_tensor_free(lkk_t));
        for (size_t i = k + 1; i < nt; i++) {
            OK(ta_syrk(T(i, i), TA_UPLO_LOWER, real(-1.0), T(i, k), real(1.0), at(i == k + 1), NULL, &err));
            for (size_t j = k + 1; j < i; j++) {
                ta_tensor *ljk_t = NULL;
                OK(ta_tensor_transpose(T(j, k), &ljk_t, &err));
                OK(ta_gemm(T(i, j), real(-1.0), T(i, k), ljk_t, real(1.0), at(i == k + 2 && j == k + 1), NULL, &err));
                OK(ta_tensor_free(ljk_t));
            }
        }
    }
#undef T
}

static void run_case(size_t n, size_t ts, ta_order order) {
    size_t nt = (n + ts - 1) / ts;
    double *a = malloc(sizeof *a * n * n), *l = malloc(sizeof *l * n * n), *got = malloc(sizeof *got * n * n);
    if (!a || !l || !got) exit(2);
    make_spd(a, n);
    memcpy(l, a, sizeof *a * n * n);
    if (ref_cholesky(l, n) != 0) {
        fprintf(stderr, "reference Cholesky failed: the input is not SPD?\n");
        exit(1);
    }

    size_t ext[2] = {n, n}, tile[2] = {ts, ts}, grid[2] = {0, 0}, count = 0;
    ta_blocks *blocks = NULL;
    OK(ta_blocks_new_tiled(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ext, tile, order, &blocks, &err));
    OK(ta_blocks_grid(blocks, grid, 2));
    OK(ta_blocks_count(blocks, &count));
    if (grid[0] != nt || grid[1] != nt || count != nt * nt) {
        fprintf(stderr, "grid %zux%zu count %zu, expected %zux%zu\n", grid[0], grid[1], count, nt, nt);
        exit(1);
    }
    ta_tensor **t = tiles_of(blocks, nt);

    /* The input through the whole-array view. */
    ta_tensor *all = NULL;
    OK(ta_blocks_all(blocks, &all, &err));
    OK(ta_copy_in(all, a, 2, ext, NULL, &opts, NULL, &err));

    /* The factorisation, in program order. */
    submit_cholesky(t, nt);

    ta_event *ev = NULL;
    OK(ta_copy_out(all, got, n * n, NULL, &opts, &ev, &err));
    wait_event(ev, "copy-out of the result");
    OK(ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, &err));
    for (size_t x = 0; x < nt * nt; x++) OK(ta_tensor_wait(t[x], TA_WAIT_FOREVER, &err));

    /* 1. Entry by entry against the plain-C factor (lower triangle). */
    double maxerr = 0.0, maxl = 0.0;
    size_t wi = 0, wj = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double e = fabs(got[i * n + j] - l[i * n + j]);
            if (fabs(l[i * n + j]) > maxl) maxl = fabs(l[i * n + j]);
            if (!(e <= maxerr)) {
                maxerr = e;
                wi = i;
                wj = j;
            }
        }
    /* 2. The residual max|A - L L^T| over the lower triangle, L from the result. */
    double maxres = 0.0, maxa = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0.0;
            for (size_t p = 0; p <= j; p++) s += got[i * n + p] * got[j * n + p];
            double e = fabs(a[i * n + j] - s);
            if (!(e <= maxres)) maxres = e;
            if (fabs(a[i * n + j]) > maxa) maxa = fabs(a[i * n + j]);
        }
    /* 3. Tiles strictly above the diagonal are never written. */
    size_t untouched_bad = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = (i / ts + 1) * ts; j < n; j++)
            if (got[i * n + j] != a[i * n + j]) untouched_bad++;

    const char *ord = order == TA_ORDER_ROW_MAJOR ? "row-major" : "col-major";
    double tol_l = 1e-12 * (double)n * maxl, tol_res = 1e-14 * (double)n * maxa;
    if (!(maxerr <= tol_l) || !(maxres <= tol_res) || untouched_bad) {
        printf("MISMATCH cholesky n=%zu tiles %zu (%s): max |L - L_ref| %.3g at (%zu,%zu) [tol %.3g], max |A - LL^T| "
               "%.3g [tol %.3g], %zu changed entries above the diagonal tiles\n",
               n, ts, ord, maxerr, wi, wj, tol_l, maxres, tol_res, untouched_bad);
        failures++;
    } else {
        printf("verified: tiled cholesky n=%3zu, tiles %2zu (grid %zux%zu%s), %s: max |L - L_ref| %.2g, max |A - "
               "LL^T| %.2g (max |A| %.3g)\n",
               n, ts, nt, nt, n % ts ? ", ragged" : "", ord, maxerr, maxres, maxa);
    }
    OK(ta_tensor_free(all));
    free_tiles(t, nt);
    OK(ta_blocks_free(blocks));
    free(a);
    free(l);
    free(got);
}

/* Errors are values, tile by tile: a matrix that is not positive definite
 * (a large negative diagonal entry at row `bad`) fails the POTRF of the tile
 * that holds it; that poisons the tile, and every task that reads a poisoned
 * tile fails with the same error and poisons what it writes. Tiles finished
 * before the failure stay clean. Nothing waits until the end. */
static void run_not_spd(size_t n, size_t ts, size_t bad) {
    size_t nt = (n + ts - 1) / ts, kb = bad / ts;
    double *a = malloc(sizeof *a * n * n);
    if (!a) exit(2);
    make_spd(a, n);
    a[bad * n + bad] = -1e6;

    size_t ext[2] = {n, n}, tile[2] = {ts, ts};
    ta_blocks *blocks = NULL;
    OK(ta_blocks_new_tiled(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ext, tile, TA_ORDER_ROW_MAJOR, &blocks, &err));
    ta_tensor **t = tiles_of(blocks, nt);
#define T(i, j) t[(i) * nt + (j)]
    ta_tensor *all = NULL;
    OK(ta_blocks_all(blocks, &all, &err));
    OK(ta_copy_in(all, a, 2, ext, NULL, &opts, NULL, &err));
    submit_cholesky(t, nt);
    /* Column kb-1 and before were final before the failure: clean. The failing
     * diagonal tile and the last diagonal tile (which reads it, through the
     * TRSM and SYRK chain) carry the POTRF's error. */
    int ok = 1;
    for (size_t j = 0; j < kb; j++)
        for (size_t i = j; i < nt; i++) {
            ta_error *e = NULL;
            ta_status s = ta_tensor_wait(T(i, j), TA_WAIT_FOREVER, &e);
            if (s != TA_STATUS_OK) {
                printf("MISMATCH not-SPD: tile (%zu,%zu), final before the failure, is %s\n", i, j, ta_status_name(s));
                ok = 0;
            }
            ta_error_free(e);
        }
    size_t check_tiles[2][2] = {{kb, kb}, {nt - 1, nt - 1}};
    for (int c = 0; c < 2; c++) {
        ta_error *e = NULL;
        char origin[64] = "";
        ta_status s = ta_tensor_wait(T(check_tiles[c][0], check_tiles[c][1]), TA_WAIT_FOREVER, &e);
        if (e) ta_error_origin(e, origin, sizeof origin, NULL);
        if (s == TA_STATUS_OK || strcmp(origin, "ta_potrf") != 0) {
            printf("MISMATCH not-SPD: tile (%zu,%zu) reports %s (started in '%s'), expected the error of ta_potrf\n",
                   check_tiles[c][0], check_tiles[c][1], ta_status_name(s), origin);
            ok = 0;
        }
        ta_error_free(e);
    }
    /* The whole-array view covers the poisoned tiles: reading it fails too. */
    {
        double *got = malloc(sizeof *got * n * n);
        ta_event *ev = NULL;
        if (!got) exit(2);
        OK(ta_copy_out(all, got, n * n, NULL, &opts, &ev, &err));
        ta_status s = ta_event_wait(ev, TA_WAIT_FOREVER);
        if (s == TA_STATUS_OK) {
            printf("MISMATCH not-SPD: copying out the whole array succeeded\n");
            ok = 0;
        }
        OK(ta_event_free(ev));
        free(got);
    }
#undef T
    if (ok)
        printf("verified: not positive definite (n=%zu, tiles %zu, bad row %zu): potrf of tile (%zu,%zu) fails, its "
               "error reaches the trailing tiles, earlier tiles stay clean\n",
               n, ts, bad, kb, kb);
    else
        failures++;
    OK(ta_tensor_free(all));
    free_tiles(t, nt);
    OK(ta_blocks_free(blocks));
    free(a);
}

int main(int argc, char **argv) {
    OK(ta_runtime_new(2, &rt, &err));
    memset(&opts, 0, sizeof opts);
    opts.runtime = rt;
    memset(&prio, 0, sizeof prio);
    prio.struct_size = sizeof prio;
    prio.submit = opts;
    prio.submit.flags |= TA_SUBMIT_EXTENDED;
    if (argc == 3) {
        /* One case of your choosing: tiled_cholesky N TILE (e.g. for a trace). */
        run_case((size_t)strtoul(argv[1], NULL, 10), (size_t)strtoul(argv[2], NULL, 10), TA_ORDER_ROW_MAJOR);
        OK(ta_runtime_free(rt));
        return example_finish("tiled_cholesky", failures);
    }

    run_case(64, 16, TA_ORDER_ROW_MAJOR);  /* exact tiles, 4x4 */
    run_case(100, 32, TA_ORDER_ROW_MAJOR); /* ragged: 3 x 32 + 4 */
    run_case(100, 32, TA_ORDER_COL_MAJOR);
    run_case(200, 48, TA_ORDER_COL_MAJOR); /* ragged: 4 x 48 + 8 */
    run_case(150, 64, TA_ORDER_ROW_MAJOR); /* ragged: 2 x 64 + 22 */
    run_case(50, 7, TA_ORDER_COL_MAJOR);   /* small tiles, 8x8 grid: many tasks */
    run_case(37, 37, TA_ORDER_ROW_MAJOR);  /* one tile: a single POTRF */
    run_not_spd(64, 16, 40);               /* fails in tile (2,2) of a 4x4 grid */

    OK(ta_runtime_free(rt));
    return example_finish("tiled_cholesky", failures);
}
