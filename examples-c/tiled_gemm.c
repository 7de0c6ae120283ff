/*
 * tiled_gemm.c: tiled matrix multiply on block arrays.
 *
 * Build and run:  make -C examples-c tiled_gemm   (also run by `make check`)
 *
 * C, A and B are block arrays: one dense allocation each, cut into tiles, with
 * one epoch queue per tile. The program submits, in plain program order,
 *
 *     for k, for i, for j:   C_ij = alpha * A_ik * B_kj + (k == 0 ? beta : 1) * C_ij
 *
 * one ta_gemm task per tile update, and never waits in between. The library
 * orders the updates of each C tile (their submission order) and runs updates
 * of different tiles concurrently: exactly the dependency graph a tiled
 * runtime (StarPU, PaRSEC) would build, without declaring it.
 *
 * Inputs go in three ways, to show the handles a block array gives:
 *   A  through ta_blocks_all        (the whole array as one strided view),
 *   B  tile by tile (ta_blocks_tile + ta_copy_in of a sub-rectangle of host memory),
 *   C  through two ta_blocks_coalesce views (the top and bottom tile rows).
 *
 * Every case is checked against a naive triple loop in plain C, including
 * ragged tiles (extents that are not multiples of the tile size), different
 * tile sizes per axis, both storage orders, and a transposed operand
 * (C = alpha * A^T * B with A^T passed as ta_tensor_transpose views of A's tiles).
 * The program prints one "verified" line per case and exits non-zero on any
 * mismatch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorasync.h>

#include "example_util.h"

static ta_runtime *rt;
static ta_submit opts; /* {.runtime = rt} */
static int failures;

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* A rows x cols block array in `order`, tiles tr x tc, with its grid checked. */
static ta_blocks *new_blocks(size_t rows, size_t cols, size_t tr, size_t tc, ta_order order) {
    size_t ext[2] = {rows, cols}, tile[2] = {tr, tc}, grid[2] = {0, 0}, count = 0;
    ta_blocks *b = NULL;
    OK(ta_blocks_new_tiled(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ext, tile, order, &b, &err));
    OK(ta_blocks_grid(b, grid, 2));
    OK(ta_blocks_count(b, &count));
    if (grid[0] != ceil_div(rows, tr) || grid[1] != ceil_div(cols, tc) || count != grid[0] * grid[1]) {
        fprintf(stderr, "block array %zux%zu tiles %zux%zu: grid %zux%zu count %zu, expected %zux%zu\n", rows, cols,
                tr, tc, grid[0], grid[1], count, ceil_div(rows, tr), ceil_div(cols, tc));
        exit(1);
    }
    return b;
}

/* Handles to every tile, row by row (gr x gc), each with its extents checked. */
static ta_tensor **tiles_of(const ta_blocks *b, size_t rows, size_t cols, size_t tr, size_t tc) {
    size_t gr = ceil_div(rows, tr), gc = ceil_div(cols, tc);
    ta_tensor **t = malloc(sizeof *t * gr * gc);
    if (!t) exit(2);
    for (size_t i = 0; i < gr; i++)
        for (size_t j = 0; j < gc; j++) {
            size_t idx[2] = {i, j}, ext[2] = {0, 0};
            OK(ta_blocks_tile(b, 2, idx, &t[i * gc + j], &err));
            OK(ta_tensor_extents(t[i * gc + j], ext, 2));
            size_t er = i + 1 < gr ? tr : rows - i * tr, ec = j + 1 < gc ? tc : cols - j * tc;
            if (ext[0] != er || ext[1] != ec) {
                fprintf(stderr, "tile (%zu,%zu) has extents %zux%zu, expected %zux%zu\n", i, j, ext[0], ext[1], er,
                        ec);
                exit(1);
            }
        }
    return t;
}

static void free_tiles(ta_tensor **t, size_t n) {
    for (size_t i = 0; i < n; i++) OK(ta_tensor_free(t[i]));
    free(t);
}

/*
 * One case: C (m x n) = alpha * op(A) * B + beta * C, op(A) m x k, tiles
 * tm x tk for op(A), tk x tn for B, tm x tn for C. With trans_a, A is stored
 * as a k x m block array (tiles tk x tm) and op(A)_ik = transpose(A_ki).
 */
static void run_case(size_t m, size_t n, size_t k, size_t tm, size_t tn, size_t tk, int trans_a, ta_order order) {
    const double alpha = 1.5, beta = -0.5;
    size_t ar = trans_a ? k : m, ac = trans_a ? m : k; /* A as stored */
    size_t atr = trans_a ? tk : tm, atc = trans_a ? tm : tk;
    double *a = malloc(sizeof *a * ar * ac), *b = malloc(sizeof *b * k * n), *c0 = malloc(sizeof *c0 * m * n);
    double *c = malloc(sizeof *c * m * n), *ref = malloc(sizeof *ref * m * n);
    if (!a || !b || !c0 || !c || !ref) exit(2);
    /* Host matrices are row-major. */
    for (size_t x = 0; x < ar * ac; x++) a[x] = rnd();
    for (size_t x = 0; x < k * n; x++) b[x] = rnd();
    for (size_t x = 0; x < m * n; x++) c0[x] = rnd();

    ta_blocks *ba = new_blocks(ar, ac, atr, atc, order);
    ta_blocks *bb = new_blocks(k, n, tk, tn, order);
    ta_blocks *bc = new_blocks(m, n, tm, tn, order);
    size_t gm = ceil_div(m, tm), gn = ceil_div(n, tn), gk = ceil_div(k, tk);
    size_t gar = trans_a ? gk : gm, gac = trans_a ? gm : gk;
    ta_tensor **ta = tiles_of(ba, ar, ac, atr, atc);
    ta_tensor **tb = tiles_of(bb, k, n, tk, tn);
    ta_tensor **tc = tiles_of(bc, m, n, tm, tn);

    /* A: the whole array as one view. */
    ta_tensor *all_a = NULL;
    OK(ta_blocks_all(ba, &all_a, &err));
    {
        size_t ext[2] = {ar, ac};
        OK(ta_copy_in(all_a, a, 2, ext, NULL, &opts, NULL, &err));
    }
    /* B: tile by tile, each from a sub-rectangle of the row-major host matrix. */
    for (size_t i = 0; i < gk; i++)
        for (size_t j = 0; j < gn; j++) {
            size_t ext[2] = {i + 1 < gk ? tk : k - i * tk, j + 1 < gn ? tn : n - j * tn};
            ptrdiff_t strides[2] = {(ptrdiff_t)n, 1};
            OK(ta_copy_in(tb[i * gn + j], b + i * tk * n + j * tn, 2, ext, strides, &opts, NULL, &err));
        }
    /* C: two coalesced views, tile rows [0, h) and [h, gm) (one view if gm == 1). */
    {
        size_t h = gm >= 2 ? gm / 2 : gm;
        size_t lo[2][2] = {{0, 0}, {h, 0}}, hi[2][2] = {{h, gn}, {gm, gn}};
        for (int part = 0; part < (h < gm ? 2 : 1); part++) {
            ta_tensor *v = NULL;
            OK(ta_blocks_coalesce(bc, 2, lo[part], hi[part], &v, &err));
            size_t r0 = lo[part][0] * tm, r1 = hi[part][0] * tm < m ? hi[part][0] * tm : m;
            size_t ext[2] = {r1 - r0, n};
            OK(ta_copy_in(v, c0 + r0 * n, 2, ext, NULL, &opts, NULL, &err));
            OK(ta_tensor_free(v)); /* never blocks: the copy keeps what it needs */
        }
    }

    /* The tiled product, in program order, one task per tile update. */
    for (size_t p = 0; p < gk; p++)
        for (size_t i = 0; i < gm; i++)
            for (size_t j = 0; j < gn; j++) {
                ta_tensor *opa = NULL;
                if (trans_a)
                    OK(ta_tensor_transpose(ta[p * gac + i], &opa, &err));
                else
                    OK(ta_tensor_share(ta[i * gac + p], &opa));
                OK(ta_gemm(tc[i * gn + j], real(alpha), opa, tb[p * gn + j], real(p == 0 ? beta : 1.0), &opts, NULL,
                           &err));
                OK(ta_tensor_free(opa));
            }
    (void)gar;

    /* Everything submitted so far, then the result through the whole-array view. */
    ta_tensor *all_c = NULL;
    OK(ta_blocks_all(bc, &all_c, &err));
    ta_event *ev = NULL;
    OK(ta_copy_out(all_c, c, m * n, NULL, &opts, &ev, &err));
    wait_event(ev, "copy-out of the result");
    for (size_t t = 0; t < gm * gn; t++) OK(ta_tensor_wait(tc[t], TA_WAIT_FOREVER, &err));

    /* Plain C reference. */
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t p = 0; p < k; p++) s += (trans_a ? a[p * m + i] : a[i * k + p]) * b[p * n + j];
            ref[i * n + j] = alpha * s + beta * c0[i * n + j];
        }
    double maxerr = 0.0;
    size_t worst = 0;
    for (size_t x = 0; x < m * n; x++) {
        double e = fabs(c[x] - ref[x]);
        if (!(e <= maxerr)) { /* also catches NaN */
            maxerr = e;
            worst = x;
        }
    }
    double tol = 1e-13 * (double)(k + 1) * 4.0;
    const char *ord = order == TA_ORDER_ROW_MAJOR ? "row-major" : "col-major";
    if (!(maxerr <= tol)) {
        printf("MISMATCH gemm %s m=%zu n=%zu k=%zu tiles %zux%zux%zu (%s): max error %.3g at (%zu,%zu): got %.17g, "
               "expected %.17g\n",
               trans_a ? "A^T*B" : "A*B", m, n, k, tm, tn, tk, ord, maxerr, worst / n, worst % n, c[worst],
               ref[worst]);
        failures++;
    } else {
        printf("verified: tiled gemm %-5s m=%3zu n=%3zu k=%3zu, tiles %2zux%2zux%2zu (grid %zux%zux%zu%s), %s: max "
               "error %.2g\n",
               trans_a ? "A^T*B" : "A*B", m, n, k, tm, tn, tk, gm, gn, gk,
               (m % tm || n % tn || k % tk) ? ", ragged" : "", ord, maxerr);
    }

    OK(ta_tensor_free(all_a));
    OK(ta_tensor_free(all_c));
    free_tiles(ta, gar * gac);
    free_tiles(tb, gk * gn);
    free_tiles(tc, gm * gn);
    OK(ta_blocks_free(ba));
    OK(ta_blocks_free(bb));
    OK(ta_blocks_free(bc));
    free(a);
    free(b);
    free(c0);
    free(c);
    free(ref);
}

int main(void) {
    OK(ta_runtime_new(2, &rt, &err));
    memset(&opts, 0, sizeof opts);
    opts.runtime = rt;

    /*        m    n    k  tm  tn  tk  A^T  order */
    run_case(64, 64, 64, 16, 16, 16, 0, TA_ORDER_ROW_MAJOR);   /* exact tiles */
    run_case(100, 70, 130, 32, 32, 32, 0, TA_ORDER_ROW_MAJOR); /* ragged on every axis */
    run_case(200, 200, 200, 64, 64, 64, 0, TA_ORDER_COL_MAJOR);
    run_case(90, 75, 60, 20, 25, 16, 0, TA_ORDER_COL_MAJOR); /* a different tile size per axis */
    run_case(90, 75, 60, 20, 25, 16, 1, TA_ORDER_ROW_MAJOR); /* A^T from transposed tile views */
    run_case(77, 45, 101, 24, 16, 40, 1, TA_ORDER_COL_MAJOR);
    run_case(7, 5, 9, 3, 2, 4, 0, TA_ORDER_ROW_MAJOR); /* tiny tiles: many tasks */
    run_case(50, 50, 50, 50, 50, 50, 0, TA_ORDER_ROW_MAJOR); /* one tile */

    OK(ta_runtime_free(rt));
    return example_finish("tiled_gemm", failures);
}
