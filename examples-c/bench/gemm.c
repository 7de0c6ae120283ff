/*
 * gemm.c: dense GEMM through the tensorasync C ABI against OpenBLAS, one run.
 *
 *   make -C examples-c/bench gemm        # deps + build + run (about 30 s on 2 cores)
 *   ./gemm [n] [reps]                    # defaults: n = 2048, reps = 5
 *   ./gemm small                         # only the 4x4 part (for profilers)
 *
 * Three measurements (issue 4):
 *
 *   1. dgemm and zgemm at n x n, C = A*B, row-major, 2 threads each side:
 *      tensorasync with its native backend only (ta_submit.backends =
 *      1 << TA_BACKEND_NATIVE; faer on the runtime's 2 workers) against
 *      cblas_dgemm / cblas_zgemm from OpenBLAS with openblas_set_num_threads(2).
 *      The two sides alternate rep by rep so machine noise hits both alike;
 *      best and median GF/s, ratio ours / OpenBLAS. Results are compared
 *      element-wise (max relative difference printed, run fails above 1e-10).
 *
 *   2. gemm on 4x4 f64 matrices through the C ABI, per op:
 *        stream   - 200000 ta_gemm calls on one C (each a write of C, so a
 *                   chain), then one wait: submission-to-completion cost per op
 *        indep    - the same over 64 different C, round robin
 *        latency  - ta_gemm + ta_event_wait per op (a full round trip each)
 *      next to a direct cblas_dgemm 4x4 call for scale.
 *
 *   3. Two n x n dgemms submitted together against the same two run one after
 *      the other (submit, wait, submit, wait); ratio together / sequential.
 *      Intra-op parallelism runs on the runtime's workers, so two gemms side by
 *      side must not cost more than back to back (no oversubscription).
 *
 * OpenBLAS note: tensorasync's BLAS backend sets OpenBLAS to one thread when it
 * loads it (its workers are the parallelism); this program restores 2 threads
 * before every OpenBLAS timing.
 */
#define _POSIX_C_SOURCE 200809L

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>
#include <tensorasync.h>

#include "harness.h"
#include "openblas_best.h"

/* OpenBLAS's own thread control (declared in its cblas.h; repeated for other BLAS headers). */
void openblas_set_num_threads(int num_threads);

#define THREADS 2

/* Target for d/z gemm at n = 2048: ours / OpenBLAS (medians), OpenBLAS at its best kernel. */
#define GEMM_TARGET 0.95

static ta_runtime *rt;

/* Seconds. */
static double now(void) { return now_ns() * 1e-9; }

static void check(ta_status s, ta_error *err, const char *what) {
    if (s == TA_STATUS_OK) return;
    char msg[512] = "";
    if (!err) ta_last_error(&err);
    ta_error_message(err, msg, sizeof msg, NULL);
    fprintf(stderr, "%s failed: %s: %s\n", what, ta_status_name(s), msg);
    exit(1);
}
#define OK(call) do { ta_error *err = NULL; ta_status s_ = (call); check(s_, err, #call); } while (0)

static ta_submit native_opts(void) {
    ta_submit o;
    memset(&o, 0, sizeof o);
    o.runtime = rt;
    o.backends = 1u << TA_BACKEND_NATIVE;
    return o;
}

static ta_tensor *wrap2(ta_dtype dt, size_t m, size_t n, void *data) {
    size_t ext[2] = { m, n };
    ta_tensor *t = NULL;
    ta_error *err = NULL;
    check(ta_tensor_wrap(dt, 2, ext, NULL, TA_ORDER_ROW_MAJOR, data, NULL, NULL, &t, &err), err, "ta_tensor_wrap");
    return t;
}

static void wait_event(ta_event *ev) {
    ta_error *err = NULL;
    ta_status s = ta_event_wait(ev, -1);
    if (s != TA_STATUS_OK) {
        ta_event_error(ev, &err);
        check(s, err, "ta_event_wait");
    }
    ta_event_free(ev);
}

static void wait_tensor(const ta_tensor *t) {
    ta_error *err = NULL;
    check(ta_tensor_wait(t, -1, &err), err, "ta_tensor_wait");
}

static void fill_random(double *x, size_t count, unsigned seed) {
    srand(seed);
    for (size_t i = 0; i < count; i++) x[i] = (double)rand() / RAND_MAX - 0.5;
}

/* ---------------------------------------------------------------------------
 * 1. Large gemm, ours (native backend) vs OpenBLAS.
 */
static int bench_large(int complex_, size_t n, int reps) {
    size_t words = n * n * (complex_ ? 2 : 1);
    ta_dtype dt = complex_ ? TA_DTYPE_C128 : TA_DTYPE_F64;
    double *a = malloc(words * sizeof *a), *b = malloc(words * sizeof *b);
    double *c_ours = calloc(words, sizeof *c_ours), *c_ref = calloc(words, sizeof *c_ref);
    fill_random(a, words, 1);
    fill_random(b, words, 2);
    ta_tensor *ta = wrap2(dt, n, n, a), *tb = wrap2(dt, n, n, b), *tc = wrap2(dt, n, n, c_ours);
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 };
    double zone[2] = { 1.0, 0.0 }, zzero[2] = { 0.0, 0.0 };
    double flops = (complex_ ? 8.0 : 2.0) * (double)n * n * n;
    double *t_ours = malloc((size_t)reps * sizeof(double)), *t_blas = malloc((size_t)reps * sizeof(double));

    for (int r = -1; r < reps; r++) { /* r = -1: warm-up, not recorded */
        ta_submit o = native_opts();
        ta_event *ev = NULL;
        double t0 = now();
        OK(ta_gemm(tc, one, ta, tb, zero, &o, &ev, &err));
        wait_event(ev);
        double t1 = now();
        openblas_set_num_threads(THREADS);
        double t2 = now();
        if (complex_)
            cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, zone, a, (int)n, b,
                        (int)n, zzero, c_ref, (int)n);
        else
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, a, (int)n, b,
                        (int)n, 0.0, c_ref, (int)n);
        double t3 = now();
        if (r >= 0) {
            t_ours[r] = t1 - t0;
            t_blas[r] = t3 - t2;
        }
    }
    double maxrel = 0.0, scale = 0.0;
    for (size_t i = 0; i < words; i++) scale = fmax(scale, fabs(c_ref[i]));
    for (size_t i = 0; i < words; i++) maxrel = fmax(maxrel, fabs(c_ours[i] - c_ref[i]) / scale);

    double ob = flops / best(t_ours, reps) / 1e9, bb = flops / best(t_blas, reps) / 1e9;
    double om = flops / median(t_ours, reps) / 1e9, bm = flops / median(t_blas, reps) / 1e9;
    const char *name = complex_ ? "zgemm" : "dgemm";
    printf("%s n=%zu  tensorasync(native) best %6.1f GF/s median %6.1f | OpenBLAS best %6.1f median %6.1f | "
           "ratio best %.3f median %.3f | max rel diff %.1e\n",
           name, n, ob, om, bb, bm, ob / bb, om / bm, maxrel);
    if (openblas_fallback())
        printf("RESULT bench=%s n=%zu ratio=ours_over_openblas value=%.3f target=%.2f verdict=none (OpenBLAS ran a "
               "fallback kernel)\n", name, n, om / bm, GEMM_TARGET);
    else
        printf("RESULT bench=%s n=%zu ratio=ours_over_openblas value=%.3f target=%.2f verdict=%s\n", name, n, om / bm,
               GEMM_TARGET, om / bm >= GEMM_TARGET ? "PASS" : "MISS");
    int bad = !(maxrel < 1e-10);
    if (bad) printf("FAIL: %s results differ from OpenBLAS\n", name);
    ta_tensor_free(ta);
    ta_tensor_free(tb);
    ta_tensor_free(tc);
    free(a); free(b); free(c_ours); free(c_ref); free(t_ours); free(t_blas);
    return bad;
}

/* ---------------------------------------------------------------------------
 * 2. 4x4 gemm per-op cost.
 */
#define SMALL 4
#define NSMALL_C 64

static int bench_small(void) {
    const int ops = getenv("GEMM_SMALL_OPS") ? atoi(getenv("GEMM_SMALL_OPS")) : 200000;
    const int lat_ops = ops / 10;
    double a[SMALL * SMALL], b[SMALL * SMALL], ref[SMALL * SMALL], cs[NSMALL_C][SMALL * SMALL];
    fill_random(a, SMALL * SMALL, 3);
    fill_random(b, SMALL * SMALL, 4);
    memset(cs, 0, sizeof cs);
    ta_tensor *ta = wrap2(TA_DTYPE_F64, SMALL, SMALL, a), *tb = wrap2(TA_DTYPE_F64, SMALL, SMALL, b);
    ta_tensor *tc[NSMALL_C];
    for (int i = 0; i < NSMALL_C; i++) tc[i] = wrap2(TA_DTYPE_F64, SMALL, SMALL, cs[i]);
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 };
    ta_submit o = native_opts();
    double per_stream = 1e9, per_indep = 1e9, per_lat = 1e9, per_blas = 1e9;

    for (int round = 0; round < 3; round++) {
        double t0 = now();
        for (int i = 0; i < ops; i++) OK(ta_gemm(tc[0], one, ta, tb, zero, &o, NULL, &err));
        wait_tensor(tc[0]);
        per_stream = fmin(per_stream, (now() - t0) / ops * 1e9);

        t0 = now();
        for (int i = 0; i < ops; i++) OK(ta_gemm(tc[i % NSMALL_C], one, ta, tb, zero, &o, NULL, &err));
        for (int i = 0; i < NSMALL_C; i++) wait_tensor(tc[i]);
        per_indep = fmin(per_indep, (now() - t0) / ops * 1e9);

        t0 = now();
        for (int i = 0; i < lat_ops; i++) {
            ta_event *ev = NULL;
            OK(ta_gemm(tc[0], one, ta, tb, zero, &o, &ev, &err));
            wait_event(ev);
        }
        per_lat = fmin(per_lat, (now() - t0) / lat_ops * 1e9);

        openblas_set_num_threads(1);
        t0 = now();
        for (int i = 0; i < ops; i++)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, SMALL, SMALL, SMALL, 1.0, a, SMALL, b, SMALL,
                        0.0, ref, SMALL);
        per_blas = fmin(per_blas, (now() - t0) / ops * 1e9);
        openblas_set_num_threads(THREADS);
    }
    double maxdiff = 0.0;
    for (int k = 0; k < NSMALL_C; k++)
        for (int i = 0; i < SMALL * SMALL; i++) maxdiff = fmax(maxdiff, fabs(cs[k][i] - ref[i]));
    printf("gemm 4x4 per op (best of 3): stream %.0f ns | indep %.0f ns | latency (submit+wait) %.0f ns | "
           "direct cblas_dgemm call %.0f ns | max diff vs cblas %.1e\n",
           per_stream, per_indep, per_lat, per_blas, maxdiff);
    ta_tensor_free(ta);
    ta_tensor_free(tb);
    for (int i = 0; i < NSMALL_C; i++) ta_tensor_free(tc[i]);
    int bad = !(maxdiff < 1e-13);
    if (bad) printf("FAIL: 4x4 results differ from OpenBLAS\n");
    return bad;
}

/* ---------------------------------------------------------------------------
 * 3. Two large gemms together vs one after the other.
 */
static int bench_pair(size_t n, int reps) {
    size_t words = n * n;
    double *a = malloc(words * sizeof *a), *b = malloc(words * sizeof *b);
    double *c1 = calloc(words, sizeof *c1), *c2 = calloc(words, sizeof *c2), *ref = calloc(words, sizeof *ref);
    fill_random(a, words, 5);
    fill_random(b, words, 6);
    ta_tensor *ta = wrap2(TA_DTYPE_F64, n, n, a), *tb = wrap2(TA_DTYPE_F64, n, n, b);
    ta_tensor *tc1 = wrap2(TA_DTYPE_F64, n, n, c1), *tc2 = wrap2(TA_DTYPE_F64, n, n, c2);
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 };
    double *seq = malloc((size_t)reps * sizeof(double)), *tog = malloc((size_t)reps * sizeof(double));
    ta_submit o = native_opts();

    for (int r = -1; r < reps; r++) {
        ta_event *e1 = NULL, *e2 = NULL;
        double t0 = now();
        OK(ta_gemm(tc1, one, ta, tb, zero, &o, &e1, &err));
        wait_event(e1);
        OK(ta_gemm(tc2, one, ta, tb, zero, &o, &e2, &err));
        wait_event(e2);
        double t1 = now();
        OK(ta_gemm(tc1, one, ta, tb, zero, &o, &e1, &err));
        OK(ta_gemm(tc2, one, ta, tb, zero, &o, &e2, &err));
        wait_event(e1);
        wait_event(e2);
        double t2 = now();
        if (r >= 0) {
            seq[r] = t1 - t0;
            tog[r] = t2 - t1;
        }
    }
    openblas_set_num_threads(THREADS);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, a, (int)n, b, (int)n, 0.0,
                ref, (int)n);
    double maxrel = 0.0, scale = 0.0;
    for (size_t i = 0; i < words; i++) scale = fmax(scale, fabs(ref[i]));
    for (size_t i = 0; i < words; i++)
        maxrel = fmax(maxrel, fmax(fabs(c1[i] - ref[i]), fabs(c2[i] - ref[i])) / scale);
    double sb = best(seq, reps), tb_ = best(tog, reps), sm = median(seq, reps), tm = median(tog, reps);
    printf("two dgemm n=%zu: one after the other best %.3f s median %.3f | together best %.3f s median %.3f | "
           "ratio together/sequential best %.3f median %.3f | max rel diff %.1e\n",
           n, sb, sm, tb_, tm, tb_ / sb, tm / sm, maxrel);
    int bad = !(maxrel < 1e-10);
    if (bad) printf("FAIL: paired results differ from OpenBLAS\n");
    ta_tensor_free(ta); ta_tensor_free(tb); ta_tensor_free(tc1); ta_tensor_free(tc2);
    free(a); free(b); free(c1); free(c2); free(ref); free(seq); free(tog);
    return bad;
}

int main(int argc, char **argv) {
    openblas_best_init(argv);
    if (argc > 1 && strcmp(argv[1], "small") == 0) { /* only the 4x4 part (for profilers) */
        OK(ta_runtime_new(THREADS, &rt, &err));
        int bad = bench_small();
        ta_runtime_free(rt);
        return bad;
    }
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 2048;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (n == 0 || reps <= 0) {
        fprintf(stderr, "usage: %s [n] [reps]\n", argv[0]);
        return 2;
    }
    OK(ta_runtime_new(THREADS, &rt, &err));
    char blas[256] = "";
    ta_blas_info(blas, sizeof blas, NULL);
    printf("gemm benchmark: %d threads each side; tensorasync native backend (faer); peer OpenBLAS via cblas\n"
           "tensorasync's system BLAS (not used for these timings): %s\n%s\n", THREADS, blas[0] ? blas : "(none)",
           openblas_kernel_line());
    openblas_set_num_threads(THREADS);
    int bad = 0;
    bad |= bench_large(0, n, reps);
    bad |= bench_large(1, n, reps > 3 ? 3 : reps);
    bad |= bench_small();
    bad |= bench_pair(n, reps > 3 ? 3 : reps);
    ta_runtime_free(rt);
    return bad;
}
