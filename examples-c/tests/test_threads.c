/*
 * test_threads: submissions from several threads at once (SPEC §2.1).
 *
 * Part 1, program order: 4 pthreads each submit, K times in a loop,
 *   ta_fill(P_t, i)                                  (write a private tensor)
 *   kernel append(i): UPDATE L_t, READ P_t, READ R   (log i and P_t's value)
 *   kernel add_shared(i): UPDATE S                   (S[t] += i+1, S[4] += 1)
 *   ta_axpy(F, t+1, ONE)                             (shared: F += t+1)
 * The log of each thread must read 0, 1, 2, ... with P_t = i at entry i (the
 * fill of i+1 waited for the read of i: write-after-read order), R must never
 * change, and the shared totals must be exact whatever the interleaving (the
 * shared updates commute, and are integers).
 *
 * Part 2, atomic enrollment: one thread submits A <- f(A, B) (UPDATE A,
 * READ B) and another B <- g(B, A) (UPDATE B, READ A), 10^4 times each. Both
 * must finish (ta_tensor_wait with a timeout; TA_STATUS_TIMEOUT fails), and
 * the values each call saw must form a sequential interleaving: each f logs
 * how many g's it saw and vice versa; the two logs must be monotone and
 * mutually consistent (f_k after g_m  <=>  g_m before f_k).
 */
#include "check.h"

#define THREADS 4
#define K 1000        /* iterations per thread in part 1 */
#define NCROSS 10000  /* calls per thread in part 2 */
#define RLEN 16

static ta_runtime *rt;
static ta_tensor *S, *F, *ONE, *R;

/* ---- part 1 ------------------------------------------------------------ */

struct worker {
    int t;
    ta_tensor *L; /* i64 [1 + 2K]: count, then (id, value of P) pairs */
    ta_tensor *P; /* i64 [1] */
    int64_t log[1 + 2 * K];
    ta_status final;
    long r_changed;
};

static ta_status append(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n;
    int64_t *L = v[0].data;
    const int64_t *P = v[1].data;
    const double *r = v[2].data;
    int64_t c = L[0];
    if (c >= K) {
        ta_kernel_set_error(ctx, "log overflow");
        return 1;
    }
    L[(1 + 2 * c) * v[0].strides[0]] = (int64_t)(intptr_t)ud;
    L[(2 + 2 * c) * v[0].strides[0]] = P[0];
    L[0] = c + 1;
    for (size_t j = 0; j < v[2].extents[0]; j++)
        if (r[(ptrdiff_t)j * v[2].strides[0]] != (double)j) {
            ta_kernel_set_error(ctx, "R changed");
            return 2;
        }
    return TA_STATUS_OK;
}

static ta_status add_shared(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ctx;
    intptr_t packed = (intptr_t)ud; /* t * 2^20 + i */
    int t = (int)(packed >> 20);
    int64_t i = packed & ((1 << 20) - 1);
    int64_t *s = v[0].data;
    s[t * v[0].strides[0]] += i + 1;
    s[THREADS * v[0].strides[0]] += 1;
    return TA_STATUS_OK;
}

static pthread_barrier_t start; /* lets the threads submit at the same time */

static void *worker_main(void *arg) {
    struct worker *w = arg;
    ta_submit o = on_runtime(rt);
    pthread_barrier_wait(&start);
    for (int i = 0; i < K; i++) {
        MUST(ta_fill(w->P, real(i), &o, NULL, NULL));
        ta_access a[3] = { { w->L, TA_MODE_UPDATE }, { w->P, TA_MODE_READ }, { R, TA_MODE_READ } };
        MUST(ta_kernel_submit(append, (void *)(intptr_t)i, "append", a, 3, &o, NULL, NULL));
        ta_access s = { S, TA_MODE_UPDATE };
        MUST(ta_kernel_submit(add_shared, (void *)(((intptr_t)w->t << 20) | i), "add_shared", &s, 1, &o, NULL, NULL));
        MUST(ta_axpy(F, real(w->t + 1), ONE, &o, NULL, NULL));
    }
    w->final = ta_tensor_wait(w->L, SECONDS(120), NULL);
    if (w->final == TA_STATUS_OK) read_back(w->L, rt, w->log, 1 + 2 * K);
    return NULL;
}

static void part1(void) {
    size_t rlen = RLEN, five = THREADS + 1;
    double rdata[RLEN];
    for (int j = 0; j < RLEN; j++) rdata[j] = j;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &rlen, NULL, TA_ORDER_ROW_MAJOR, rdata, &R, NULL));
    S = zeros(TA_DTYPE_I64, 1, &five);
    F = zeros1(TA_DTYPE_F64, 3);
    ONE = zeros1(TA_DTYPE_F64, 3);
    ta_submit o = on_runtime(rt);
    MUST(ta_fill(ONE, real(1), &o, NULL, NULL));

    static struct worker w[THREADS];
    pthread_t th[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    double t0 = now_s();
    for (int t = 0; t < THREADS; t++) {
        w[t].t = t;
        w[t].L = zeros1(TA_DTYPE_I64, 1 + 2 * K);
        w[t].P = zeros1(TA_DTYPE_I64, 1);
        pthread_create(&th[t], NULL, worker_main, &w[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start);

    for (int t = 0; t < THREADS; t++) {
        CHECK_STATUS(w[t].final, TA_STATUS_OK);
        CHECK(w[t].log[0] == K, "thread %d: %lld log entries, want %d", t, (long long)w[t].log[0], K);
        long wrong_id = 0, wrong_p = 0;
        for (int i = 0; i < K; i++) {
            if (w[t].log[1 + 2 * i] != i) wrong_id++;
            if (w[t].log[2 + 2 * i] != i) wrong_p++;
        }
        CHECK(wrong_id == 0, "thread %d: %ld log entries out of program order", t, wrong_id);
        CHECK(wrong_p == 0, "thread %d: %ld appends saw a fill other than their own", t, wrong_p);
    }
    int64_t s[THREADS + 1];
    double f[3];
    read_back(S, rt, s, THREADS + 1);
    read_back(F, rt, f, 3);
    for (int t = 0; t < THREADS; t++)
        CHECK(s[t] == (int64_t)K * (K + 1) / 2, "S[%d] = %lld, want %lld", t, (long long)s[t],
              (long long)K * (K + 1) / 2);
    CHECK(s[THREADS] == (int64_t)THREADS * K, "S[total] = %lld, want %d", (long long)s[THREADS], THREADS * K);
    double want_f = 0;
    for (int t = 0; t < THREADS; t++) want_f += (double)(t + 1) * K;
    CHECK(f[0] == want_f && f[1] == want_f && f[2] == want_f, "F = %g, want %g", f[0], want_f);
    printf("part 1: %d threads x %d iterations (%d operations) in %.2f s: program order kept per thread, "
           "shared totals exact\n", THREADS, K, THREADS * K * 4, now_s() - t0);
    for (int t = 0; t < THREADS; t++) {
        ta_tensor_free(w[t].L);
        ta_tensor_free(w[t].P);
    }
    ta_tensor_free(S); ta_tensor_free(F); ta_tensor_free(ONE); ta_tensor_free(R);
}

/* ---- part 2 ------------------------------------------------------------ */

static ta_tensor *A, *B;
static int64_t logf_[NCROSS], logg_[NCROSS]; /* written by the kernels (exclusive per log) */

/* views[0]: UPDATE of my counter; views[1]: READ of the other counter. */
static ta_status count_and_look(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n;
    int64_t *mine = v[0].data;
    const int64_t *other = v[1].data;
    int64_t *log = ud;
    int64_t k = mine[0] + 1;
    if (k > NCROSS) {
        ta_kernel_set_error(ctx, "too many calls");
        return 1;
    }
    mine[0] = k;
    log[k - 1] = other[0];
    return TA_STATUS_OK;
}

struct cross {
    ta_tensor *mine, *other;
    int64_t *log;
    ta_status final;
};

static void *cross_main(void *arg) {
    struct cross *c = arg;
    ta_submit o = on_runtime(rt);
    ta_access a[2] = { { c->mine, TA_MODE_UPDATE }, { c->other, TA_MODE_READ } };
    pthread_barrier_wait(&start);
    for (int k = 0; k < NCROSS; k++) MUST(ta_kernel_submit(count_and_look, c->log, "count_and_look", a, 2, &o, NULL, NULL));
    c->final = ta_tensor_wait(c->mine, SECONDS(300), NULL);
    return NULL;
}

/* The logs of two interleaved sequences must describe one sequential order. */
static long inconsistent(const int64_t *x, const int64_t *y, int n) {
    long bad = 0;
    for (int k = 1; k <= n; k++) {
        int64_t m = x[k - 1]; /* x_k came after exactly m calls of y */
        if (m < 0 || m > n || (k > 1 && m < x[k - 2])) { bad++; continue; }
        if (m >= 1 && y[m - 1] >= k) bad++;   /* y_m came before x_k, so it cannot have seen x_k */
        if (m < n && y[m] < k) bad++;         /* y_{m+1} came after x_k, so it saw it */
    }
    return bad;
}

/* One round: returns how often f's view of B changed (0: no interleaving). */
static long part2_round(int round) {
    A = zeros1(TA_DTYPE_I64, 1);
    B = zeros1(TA_DTYPE_I64, 1);
    memset(logf_, 0xff, sizeof logf_);
    memset(logg_, 0xff, sizeof logg_);
    struct cross cf = { A, B, logf_, 0 }, cg = { B, A, logg_, 0 };
    pthread_t t1, t2;
    pthread_barrier_init(&start, NULL, 2);
    double t0 = now_s();
    pthread_create(&t1, NULL, cross_main, &cf);
    pthread_create(&t2, NULL, cross_main, &cg);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_barrier_destroy(&start);
    CHECK(cf.final != TA_STATUS_TIMEOUT && cg.final != TA_STATUS_TIMEOUT, "A <- f(B) / B <- g(A) did not finish");
    CHECK_STATUS(cf.final, TA_STATUS_OK);
    CHECK_STATUS(cg.final, TA_STATUS_OK);
    int64_t a = -1, b = -1;
    read_back(A, rt, &a, 1);
    read_back(B, rt, &b, 1);
    CHECK(a == NCROSS && b == NCROSS, "counters A = %lld, B = %lld, want %d", (long long)a, (long long)b, NCROSS);
    long bad_f = inconsistent(logf_, logg_, NCROSS), bad_g = inconsistent(logg_, logf_, NCROSS);
    CHECK(bad_f == 0 && bad_g == 0, "the observed values are not a sequential interleaving (%ld, %ld violations)",
          bad_f, bad_g);
    long switches = 0;
    for (int k = 1; k < NCROSS; k++) switches += logf_[k] != logf_[k - 1];
    printf("part 2, round %d: 2 x %d crossed submissions finished in %.2f s without deadlock; the values they "
           "saw form one sequential order (%ld switches between the two)\n", round, NCROSS, now_s() - t0, switches);
    ta_tensor_free(A);
    ta_tensor_free(B);
    return switches;
}

/* Repeat until the two submitters really interleaved (at most 5 rounds). */
static void part2(void) {
    for (int round = 1; round <= 5; round++)
        if (part2_round(round) > 1) return;
    printf("part 2: the two threads never interleaved (a very busy machine?)\n");
}

int main(void) {
    MUST(ta_runtime_new(0, &rt, NULL));
    size_t threads = 0;
    MUST(ta_runtime_threads(rt, &threads));
    printf("runtime with %zu workers\n", threads);
    part1();
    part2();
    MUST(ta_runtime_free(rt));
    return finish("test_threads");
}
