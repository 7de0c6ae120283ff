/*
 * gemm.c: dense GEMM through the tensorasync C ABI against OpenBLAS, one run.
 *
 *   make -C examples-c/bench gemm        # deps + build + run (about 30 s on 2 cores)
 *   ./gemm [n] [reps]                    # defaults: n = 2048, reps = 5
 *   ./gemm small                         # only the small operations (part 2)
 *
 * Three measurements (issue 4):
 *
 *   1. dgemm, zgemm, sgemm and cgemm at n x n, C = A*B, row-major, 2 threads each side:
 *      tensorasync with its default backend order (ta_submit.backends = 0:
 *      the native backend, faer on the runtime's 2 workers, except where the
 *      dispatch policy puts a tuned system BLAS first: every product from
 *      2048 on with AVX-512, every product from 1024 on with AVX2 but not
 *      AVX-512, complex products from 2048 on elsewhere;
 *      it then runs as blocks on the same 2 workers) against
 *      cblas_?gemm from OpenBLAS with openblas_set_num_threads(2). The
 *      header line names the backend that went first for each.
 *      The two sides alternate rep by rep so machine noise hits both alike;
 *      best and median GF/s, ratio ours / OpenBLAS. Results are compared
 *      element-wise (max relative difference printed, run fails above 1e-10,
 *      1e-4 in single precision).
 *
 *   2. Small operations (issue 20 item 4), per op, all in one run: a stream
 *      of ta_gemm on n x n f64 matrices (n = 4, 16, 64; C = A*B, one C, so
 *      a chain) and of ta_fill, ta_axpy and ta_copy on 1-d f64 tensors of
 *      1, 10 and 100 elements (one output each), submission to completion,
 *      default options. Each is set against pattern (a) of bench.c (a chain
 *      of ta_kernel_submit on one double: the task overhead), measured in
 *      the same rounds, plus the direct kernel's time (cblas_dgemm on one
 *      thread; a plain C loop for fill, axpy and copy): ratio
 *      op / ((a) + direct), target <= 2. Results are checked against the
 *      direct kernel's. Then, for scale, the 4x4 gemm over 64 outputs round
 *      robin and a ta_gemm + ta_event_wait round trip.
 *
 *   3. Two n x n dgemms submitted together against the same two run one after
 *      the other (submit, wait, submit, wait); ratio together / sequential.
 *      Intra-op parallelism runs on the runtime's workers, so two gemms side by
 *      side must not cost more than back to back (no oversubscription).
 *
 * OpenBLAS note: tensorasync's BLAS backend sets OpenBLAS to one thread when it
 * loads it (its workers are the parallelism); this program restores 2 threads
 * before every OpenBLAS timing and 1 before every one of ours (the library
 * puts the system BLAS first only while it runs one thread per call).
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

/* Waits until no other thread of the process runs (at most 1 s): OpenBLAS's
 * threads spin (with sched_yield) for a while after a call, as the runtime's
 * idle workers do, and either side would otherwise start on cores the other's
 * leftovers still use. Before each timed call of either side. */
static void quiet(void) {
    if (getenv("GEMM_NO_QUIET")) return;
    char names[256];
    int total = 0, running = 0;
    settle(500, 1, &total, &running, names, sizeof names);
}

static ta_submit default_opts(void) {
    ta_submit o;
    memset(&o, 0, sizeof o);
    o.runtime = rt;
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
static void fill_random_f(float *x, size_t count, unsigned seed) {
    srand(seed);
    for (size_t i = 0; i < count; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
}

/* kind: 'd', 'z', 's' or 'c', BLAS's letters. */
static int bench_large(char kind, size_t n, int reps) {
    int complex_ = kind == 'z' || kind == 'c', single = kind == 's' || kind == 'c';
    size_t words = n * n * (complex_ ? 2 : 1), w = single ? sizeof(float) : sizeof(double);
    ta_dtype dt = kind == 'd' ? TA_DTYPE_F64 : kind == 'z' ? TA_DTYPE_C128 : kind == 's' ? TA_DTYPE_F32 : TA_DTYPE_C64;
    void *a = malloc(words * w), *b = malloc(words * w);
    void *c_ours = calloc(words, w), *c_ref = calloc(words, w);
    if (single) {
        fill_random_f(a, words, 1);
        fill_random_f(b, words, 2);
    } else {
        fill_random(a, words, 1);
        fill_random(b, words, 2);
    }
    ta_tensor *ta = wrap2(dt, n, n, a), *tb = wrap2(dt, n, n, b), *tc = wrap2(dt, n, n, c_ours);
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 };
    double zone[2] = { 1.0, 0.0 }, zzero[2] = { 0.0, 0.0 };
    float cone[2] = { 1.0f, 0.0f }, czero[2] = { 0.0f, 0.0f };
    double flops = (complex_ ? 8.0 : 2.0) * (double)n * n * n;
    double *t_ours = malloc((size_t)reps * sizeof(double)), *t_blas = malloc((size_t)reps * sizeof(double));
    const int ni = (int)n;
    const enum CBLAS_ORDER RM = CblasRowMajor;
    const enum CBLAS_TRANSPOSE NT = CblasNoTrans;

    for (int r = -1; r < reps; r++) { /* r = -1: warm-up, not recorded */
        ta_submit o = default_opts();
        ta_event *ev = NULL;
        openblas_set_num_threads(1);
        quiet();
        double t0 = now();
        OK(ta_gemm(tc, one, ta, tb, zero, &o, &ev, &err));
        wait_event(ev);
        double t1 = now();
        openblas_set_num_threads(THREADS);
        quiet();
        double t2 = now();
        switch (kind) {
        case 'z': cblas_zgemm(RM, NT, NT, ni, ni, ni, zone, a, ni, b, ni, zzero, c_ref, ni); break;
        case 'c': cblas_cgemm(RM, NT, NT, ni, ni, ni, cone, a, ni, b, ni, czero, c_ref, ni); break;
        case 's': cblas_sgemm(RM, NT, NT, ni, ni, ni, 1.0f, a, ni, b, ni, 0.0f, c_ref, ni); break;
        default: cblas_dgemm(RM, NT, NT, ni, ni, ni, 1.0, a, ni, b, ni, 0.0, c_ref, ni); break;
        }
        double t3 = now();
        if (r >= 0) {
            t_ours[r] = t1 - t0;
            t_blas[r] = t3 - t2;
        }
    }
    double maxrel = 0.0, scale = 0.0;
    for (size_t i = 0; i < words; i++) {
        double v = single ? ((float *)c_ref)[i] : ((double *)c_ref)[i];
        scale = fmax(scale, fabs(v));
    }
    for (size_t i = 0; i < words; i++) {
        double d = single ? (double)((float *)c_ours)[i] - ((float *)c_ref)[i]
                          : ((double *)c_ours)[i] - ((double *)c_ref)[i];
        maxrel = fmax(maxrel, fabs(d) / scale);
    }

    double ob = flops / best(t_ours, reps) / 1e9, bb = flops / best(t_blas, reps) / 1e9;
    double om = flops / median(t_ours, reps) / 1e9, bm = flops / median(t_blas, reps) / 1e9;
    char name[8];
    snprintf(name, sizeof name, "%cgemm", kind);
    /* The library's policy (src/backends/registry.rs, blas_wins): a tuned
     * system BLAS goes first for every product from 2048 on with AVX-512,
     * from 1024 on with AVX2 but not AVX-512 (real ones from 256 (d) and
     * 512 (s) there), and for complex products from 2048 on elsewhere. */
    int level = ob_cpu_level();
    int avx2_min = kind == 'd' ? 256 : kind == 's' ? 512 : 1024;
    int blas_first = level == 4 ? n >= 2048 : level == 3 ? n >= (size_t)avx2_min : complex_ && n >= 2048;
    const char *first = blas_first && !openblas_fallback() ? "blas" : "native";
    printf("%s n=%zu  tensorasync(%s) best %6.1f GF/s median %6.1f | OpenBLAS best %6.1f median %6.1f | "
           "ratio best %.3f median %.3f | max rel diff %.1e\n",
           name, n, first, ob, om, bb, bm, ob / bb, om / bm, maxrel);
    if (openblas_fallback())
        printf("RESULT bench=%s n=%zu ratio=ours_over_openblas value=%.3f target=%.2f verdict=none (OpenBLAS ran a "
               "fallback kernel)\n", name, n, om / bm, GEMM_TARGET);
    else
        printf("RESULT bench=%s n=%zu ratio=ours_over_openblas value=%.3f target=%.2f verdict=%s\n", name, n, om / bm,
               GEMM_TARGET, om / bm >= GEMM_TARGET ? "PASS" : "MISS");
    /* Single precision accumulates 2048 products in 24-bit mantissas. */
    int bad = !(maxrel < (single ? 1e-4 : 1e-10));
    if (bad) printf("FAIL: %s results differ from OpenBLAS\n", name);
    ta_tensor_free(ta);
    ta_tensor_free(tb);
    ta_tensor_free(tc);
    free(a); free(b); free(c_ours); free(c_ref); free(t_ours); free(t_blas);
    return bad;
}

/* ---------------------------------------------------------------------------
 * 2. Small operations (issue 20 item 4): a stream of one operation, per op,
 *    against pattern (a)'s ns/task plus the direct kernel's time, one run.
 */
#define SMALL_ROUNDS 5   /* timed rounds, after one warm-up round */
#define SMALL_TARGET 2.0 /* op <= 2 x ((a) + direct) */
#define N_CHAIN 100000   /* pattern (a), as in bench.c */
#define NSMALL_C 64      /* outputs of the 4x4 "indep" stream */

/* Pattern (a) of bench.c: 1-double tensor, k_inc, one UPDATE access per task, name NULL. */
static ta_status k_inc(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *c) {
    (void)n; (void)ud; (void)c;
    *(double *)v[0].data += 1.0;
    return TA_STATUS_OK;
}

static double pattern_a(ta_tensor *x, const ta_submit *o) {
    ta_access acc = { x, TA_MODE_UPDATE };
    double t0 = now_ns();
    for (long i = 0; i < N_CHAIN; i++) OK(ta_kernel_submit(k_inc, NULL, NULL, &acc, 1, o, NULL, &err));
    wait_tensor(x);
    return (now_ns() - t0) / N_CHAIN;
}

/* The direct kernels, out of line and with a compiler barrier per call so
 * that a loop of calls is a loop of kernels. */
__attribute__((noinline)) static void direct_fill(double *x, size_t n, double v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void direct_axpy(double *y, double a, const double *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void direct_copy(double *d, const double *s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = s[i];
    __asm__ volatile("" ::: "memory");
}

enum small_op { S_GEMM, S_FILL, S_AXPY, S_COPY };
static const char *const small_name[] = { "gemm", "fill", "axpy", "copy" };

typedef struct {
    enum small_op op;
    size_t n;  /* gemm: n x n matrices; otherwise elements */
    long ops;  /* per stream */
    double *x, *y, *z, *ref; /* wrapped memory: gemm C, A, B; fill x; axpy y, x; copy dst, src */
    ta_tensor *tx, *ty, *tz;
    double t_op[SMALL_ROUNDS], t_direct[SMALL_ROUNDS];
    double maxdiff;
} small_case;

static ta_tensor *wrap1(size_t n, double *data) {
    ta_tensor *t = NULL;
    ta_error *err = NULL;
    check(ta_tensor_wrap(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, data, NULL, NULL, &t, &err), err,
          "ta_tensor_wrap");
    return t;
}

static void small_setup(small_case *c) {
    size_t words = c->op == S_GEMM ? c->n * c->n : c->n;
    c->x = calloc(words, sizeof(double));
    c->y = calloc(words, sizeof(double));
    c->z = calloc(words, sizeof(double));
    c->ref = calloc(words, sizeof(double));
    c->maxdiff = 0;
    if (c->op == S_GEMM) {
        fill_random(c->y, words, 3);
        fill_random(c->z, words, 4);
        c->tx = wrap2(TA_DTYPE_F64, c->n, c->n, c->x);
        c->ty = wrap2(TA_DTYPE_F64, c->n, c->n, c->y);
        c->tz = wrap2(TA_DTYPE_F64, c->n, c->n, c->z);
    } else {
        for (size_t i = 0; i < words; i++) c->y[i] = (double)(i + 1);
        c->tx = wrap1(words, c->x);
        c->ty = wrap1(words, c->y);
        c->tz = NULL;
    }
}

static void small_teardown(small_case *c) {
    ta_tensor_free(c->tx);
    ta_tensor_free(c->ty);
    if (c->tz) ta_tensor_free(c->tz);
    free(c->x); free(c->y); free(c->z); free(c->ref);
}

/* One stream of c->ops operations on one output (each waits for the one
 * before: a chain), submission to completion, ns per op; then the result is
 * checked against the direct kernel's. */
static double small_stream(small_case *c, const ta_submit *o) {
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 }, half = { 0.5, 0.0 };
    size_t words = c->op == S_GEMM ? c->n * c->n : c->n;
    memset(c->x, 0, words * sizeof(double)); /* the tensor is idle here */
    double t0 = now_ns();
    switch (c->op) {
    case S_GEMM: for (long i = 0; i < c->ops; i++) OK(ta_gemm(c->tx, one, c->ty, c->tz, zero, o, NULL, &err)); break;
    case S_FILL: for (long i = 0; i < c->ops; i++) OK(ta_fill(c->tx, one, o, NULL, &err)); break;
    case S_AXPY: for (long i = 0; i < c->ops; i++) OK(ta_axpy(c->tx, half, c->ty, o, NULL, &err)); break;
    case S_COPY: for (long i = 0; i < c->ops; i++) OK(ta_copy(c->tx, c->ty, o, NULL, &err)); break;
    }
    wait_tensor(c->tx);
    double per = (now_ns() - t0) / (double)c->ops;
    for (size_t i = 0; i < words; i++) {
        double want = c->op == S_GEMM ? c->ref[i]
                      : c->op == S_FILL ? 1.0
                      : c->op == S_AXPY ? 0.5 * (double)c->ops * c->y[i] /* exact: small integers times 2^-1 */
                                        : c->y[i];
        c->maxdiff = fmax(c->maxdiff, fabs(c->x[i] - want));
    }
    return per;
}

/* The same operation called directly c->ops times (OpenBLAS on one thread for gemm). */
static double small_direct(small_case *c) {
    double t0 = now_ns();
    switch (c->op) {
    case S_GEMM: {
        int n = (int)c->n;
        for (long i = 0; i < c->ops; i++)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, c->y, n, c->z, n, 0.0, c->ref, n);
        break;
    }
    case S_FILL: for (long i = 0; i < c->ops; i++) direct_fill(c->ref, c->n, 1.0); break;
    case S_AXPY: for (long i = 0; i < c->ops; i++) direct_axpy(c->ref, 0.5, c->y, c->n); break;
    case S_COPY: for (long i = 0; i < c->ops; i++) direct_copy(c->ref, c->y, c->n); break;
    }
    return (now_ns() - t0) / (double)c->ops;
}

/* The 4x4 gemm's other figures (for scale; no target): over 64 outputs
 * round robin, and one ta_gemm + ta_event_wait round trip. */
static int small_extra(long ops, const ta_submit *o) {
    enum { S = 4 };
    double a[S * S], b[S * S], ref[S * S], cs[NSMALL_C][S * S];
    fill_random(a, S * S, 3);
    fill_random(b, S * S, 4);
    memset(cs, 0, sizeof cs);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, S, S, 1.0, a, S, b, S, 0.0, ref, S);
    ta_tensor *ta = wrap2(TA_DTYPE_F64, S, S, a), *tb = wrap2(TA_DTYPE_F64, S, S, b), *tc[NSMALL_C];
    for (int i = 0; i < NSMALL_C; i++) tc[i] = wrap2(TA_DTYPE_F64, S, S, cs[i]);
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 };
    double per_indep = 1e30, per_lat = 1e30;
    long lat_ops = ops / 10;
    for (int round = 0; round < 3; round++) {
        double t0 = now_ns();
        for (long i = 0; i < ops; i++) OK(ta_gemm(tc[i % NSMALL_C], one, ta, tb, zero, o, NULL, &err));
        for (int i = 0; i < NSMALL_C; i++) wait_tensor(tc[i]);
        per_indep = fmin(per_indep, (now_ns() - t0) / (double)ops);
        t0 = now_ns();
        for (long i = 0; i < lat_ops; i++) {
            ta_event *ev = NULL;
            OK(ta_gemm(tc[0], one, ta, tb, zero, o, &ev, &err));
            wait_event(ev);
        }
        per_lat = fmin(per_lat, (now_ns() - t0) / (double)lat_ops);
    }
    double maxdiff = 0.0;
    for (int k = 0; k < NSMALL_C; k++)
        for (int i = 0; i < S * S; i++) maxdiff = fmax(maxdiff, fabs(cs[k][i] - ref[i]));
    printf("gemm 4x4 also (best of 3): over %d outputs round robin %.0f ns/op | ta_gemm + ta_event_wait round trip "
           "%.0f ns | max diff vs cblas %.1e\n", NSMALL_C, per_indep, per_lat, maxdiff);
    ta_tensor_free(ta);
    ta_tensor_free(tb);
    for (int i = 0; i < NSMALL_C; i++) ta_tensor_free(tc[i]);
    int bad = !(maxdiff < 1e-13);
    if (bad) printf("FAIL: 4x4 results differ from OpenBLAS\n");
    return bad;
}

static void read_loadavg(char *buf, size_t cap) {
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        if (fgets(buf, (int)cap, f)) buf[strcspn(buf, "\n")] = 0;
        fclose(f);
    }
}

static int bench_small(void) {
    const long ops = getenv("GEMM_SMALL_OPS") ? atol(getenv("GEMM_SMALL_OPS")) : 100000;
#define CASE(o, size, count) { .op = (o), .n = (size), .ops = (count) }
    small_case cases[] = {
        CASE(S_GEMM, 4, ops), CASE(S_GEMM, 16, ops), CASE(S_GEMM, 64, ops / 10 > 0 ? ops / 10 : 1),
        CASE(S_FILL, 1, ops), CASE(S_FILL, 10, ops), CASE(S_FILL, 100, ops),
        CASE(S_AXPY, 1, ops), CASE(S_AXPY, 10, ops), CASE(S_AXPY, 100, ops),
        CASE(S_COPY, 1, ops), CASE(S_COPY, 10, ops), CASE(S_COPY, 100, ops),
    };
#undef CASE
    const int ncases = (int)(sizeof cases / sizeof *cases);
    /* Default submission options, as a program would pass them (pattern (a) uses the same). */
    ta_submit o;
    memset(&o, 0, sizeof o);
    o.runtime = rt;
    size_t one_ext = 1;
    ta_tensor *xa = NULL;
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &one_ext, TA_ORDER_ROW_MAJOR, &xa, &err));
    for (int k = 0; k < ncases; k++) small_setup(&cases[k]);
    double t_a[SMALL_ROUNDS];
    char load0[128], load1[128];
    read_loadavg(load0, sizeof load0);
    double w0 = now_ns(), sys0 = system_busy_ns(), self0 = self_cpu_ns();
    openblas_set_num_threads(1);
    /* Each round runs (a), every stream and every direct kernel once, so a
     * slow spell of the machine hits all of them alike; round -1 is the warm-up. */
    for (int r = -1; r < SMALL_ROUNDS; r++) {
        double a = pattern_a(xa, &o);
        if (r >= 0) t_a[r] = a;
        for (int k = 0; k < ncases; k++) {
            double d = small_direct(&cases[k]);
            double t = small_stream(&cases[k], &o);
            if (r >= 0) {
                cases[k].t_direct[r] = d;
                cases[k].t_op[r] = t;
            }
        }
    }
    openblas_set_num_threads(THREADS);
    double wall = now_ns() - w0;
    double other = wall > 0 ? (system_busy_ns() - sys0 - (self_cpu_ns() - self0)) / (wall * sysconf(_SC_NPROCESSORS_ONLN)) : 0;
    if (other < 0) other = 0;
    read_loadavg(load1, sizeof load1);

    double am = median(t_a, SMALL_ROUNDS), amin = best(t_a, SMALL_ROUNDS);
    printf("\nsmall operations: a stream of %ld ops on one output (64x64: %ld), submission to completion, default "
           "options;\n  (a) = bench.c's pattern (a) in the same run (%d ta_kernel_submit on one double), direct = "
           "the kernel called directly\n  (cblas_dgemm on 1 thread; a C loop for fill/axpy/copy). Median (min) of %d "
           "rounds after a warm-up.\n  loadavg before: %s; after: %s; other processes' share of the machine during "
           "the section: %.0f%%\n", ops, cases[2].ops, N_CHAIN, SMALL_ROUNDS, load0, load1, 100 * other);
    printf("(a) %.0f ns/task (min %.0f)\n\n", am, amin);
    printf("| op | size | ours ns/op | direct ns | (a) + direct | ratio | target | verdict |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (int k = 0; k < ncases; k++) {
        small_case *c = &cases[k];
        double om = median(c->t_op, SMALL_ROUNDS), omin = best(c->t_op, SMALL_ROUNDS);
        double dm = median(c->t_direct, SMALL_ROUNDS);
        double ratio = om / (am + dm);
        char size[32];
        if (c->op == S_GEMM) snprintf(size, sizeof size, "%zux%zu", c->n, c->n);
        else snprintf(size, sizeof size, "%zu", c->n);
        int no_peer = c->op == S_GEMM && openblas_fallback();
        const char *verdict = no_peer ? "none" : ratio <= SMALL_TARGET ? "PASS" : "MISS";
        printf("| %s | %s | %.0f (%.0f) | %.1f | %.0f | %.2fx | <= %.1fx | %s |\n", small_name[c->op], size, om, omin,
               dm, am + dm, ratio, SMALL_TARGET, verdict);
        double tol = c->op == S_GEMM ? 1e-13 : 0.0;
        if (!(c->maxdiff <= tol)) {
            printf("FAIL: %s %s results differ from the direct kernel's (max diff %.1e)\n", small_name[c->op], size,
                   c->maxdiff);
            bad = 1;
        }
    }
    printf("\n");
    for (int k = 0; k < ncases; k++) {
        small_case *c = &cases[k];
        double om = median(c->t_op, SMALL_ROUNDS), dm = median(c->t_direct, SMALL_ROUNDS);
        double ratio = om / (am + dm);
        int no_peer = c->op == S_GEMM && openblas_fallback();
        printf("RESULT bench=small op=%s n=%zu unit=ns_per_op median=%.1f a=%.1f direct=%.1f "
               "ratio=op_over_a_plus_direct value=%.3f target=%.1f verdict=%s%s\n",
               small_name[c->op], c->n, om, am, dm, ratio, SMALL_TARGET,
               no_peer ? "none" : ratio <= SMALL_TARGET ? "PASS" : "MISS",
               no_peer ? " (OpenBLAS ran a fallback kernel)" : "");
    }
    for (int k = 0; k < ncases; k++) small_teardown(&cases[k]);
    ta_tensor_free(xa);
    bad |= small_extra(ops, &o);
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
    if (argc > 1 && strcmp(argv[1], "small") == 0) { /* only the small operations */
        OK(ta_runtime_new(THREADS, &rt, &err));
        printf("%s\n", openblas_kernel_line());
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
    printf("gemm benchmark: %d threads each side; tensorasync with its default backend order (native faer; a tuned system BLAS first for every product from 2048 on AVX-512, from 1024 on AVX2 without AVX-512, and for complex products from 2048 elsewhere); peer OpenBLAS via cblas\n"
           "tensorasync's system BLAS (the rows marked (blas)): %s\n%s\n", THREADS, blas[0] ? blas : "(none)",
           openblas_kernel_line());
    openblas_set_num_threads(THREADS);
    int bad = 0;
    bad |= bench_large('d', n, reps);
    bad |= bench_large('z', n, reps > 3 ? 3 : reps);
    bad |= bench_large('s', n, reps);
    bad |= bench_large('c', n, reps > 3 ? 3 : reps);
    bad |= bench_small();
    bad |= bench_pair(n, reps > 3 ? 3 : reps);
    ta_runtime_free(rt);
    return bad;
}
