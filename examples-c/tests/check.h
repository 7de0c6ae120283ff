/*
 * check.h: small helpers shared by the C tests (not part of the library API).
 *
 * Include it first: it selects POSIX.1-2008 for the -std=c99 builds.
 *
 *   CHECK(cond, fmt, ...)        count a check; report and continue on failure
 *   CHECK_STATUS(expr, want)     the same for a ta_status, printing both names
 *   MUST(expr)                   a setup call that has to return TA_STATUS_OK;
 *                                exits at once (with the library's message) if not
 *   finish("test_x")             prints the summary line, returns the exit code
 *
 * Counters shared with library threads use the GCC/Clang __atomic builtins
 * (C99 has no <stdatomic.h>); a `gate` (mutex + condvar) lets a kernel block
 * until the test opens it, without spinning (spinning is slow under valgrind).
 */
#ifndef TA_TEST_CHECK_H
#define TA_TEST_CHECK_H

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorasync.h"

static int g_checks;
static int g_failures;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        g_checks++;                                                             \
        if (!(cond)) {                                                          \
            g_failures++;                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

#define CHECK_STATUS(expr, want) check_status_((expr), (want), #expr, __FILE__, __LINE__)

static inline int check_status_(ta_status got, ta_status want, const char *what, const char *file, int line) {
    g_checks++;
    if (got == want) return 1;
    g_failures++;
    fprintf(stderr, "FAIL %s:%d: %s\n    expected %s, got %s (%u)\n", file, line, what,
            ta_status_name(want), ta_status_name(got), (unsigned)got);
    return 0;
}

#define MUST(expr) must_((expr), #expr, __FILE__, __LINE__)

static inline void must_(ta_status got, const char *what, const char *file, int line) {
    if (got == TA_STATUS_OK) return;
    char msg[512] = "";
    ta_error *e = NULL;
    if (ta_last_error(&e) == TA_STATUS_OK && e) {
        ta_error_message(e, msg, sizeof msg, NULL);
        ta_error_free(e);
    }
    fprintf(stderr, "FATAL %s:%d: %s returned %s: %s\n", file, line, what, ta_status_name(got), msg);
    exit(2);
}

/* Ends a test: every handle the test made must have been freed (a handle
 * never freed is reachable memory, which valgrind does not report). */
static inline int finish(const char *name) {
    size_t live = (size_t)-1;
    CHECK(ta_handles_live(&live) == TA_STATUS_OK && live == 0, "%zu handles still live at the end", live);
    if (g_failures == 0)
        printf("%s: all %d checks passed\n", name, g_checks);
    else
        printf("%s: %d of %d checks FAILED\n", name, g_failures, g_checks);
    fflush(stdout);
    return g_failures == 0 ? 0 : 1;
}

/* ---- error objects ---------------------------------------------------- */

/* The message of an error object (into buf), or "" for NULL. */
static inline const char *err_message(const ta_error *e, char *buf, size_t cap) {
    buf[0] = 0;
    if (e) ta_error_message(e, buf, cap, NULL);
    return buf;
}

static inline const char *err_origin(const ta_error *e, char *buf, size_t cap) {
    buf[0] = 0;
    if (e) ta_error_origin(e, buf, cap, NULL);
    return buf;
}

static inline ta_status err_status(const ta_error *e) {
    ta_status s = 0xffffffffu;
    if (ta_error_status(e, &s) != TA_STATUS_OK) return 0xffffffffu;
    return s;
}

/* 1 if a and b are the same error object, 0 if not, -1 if the call failed. */
static inline int err_same(const ta_error *a, const ta_error *b) {
    int32_t same = -1;
    if (ta_error_same(a, b, &same) != TA_STATUS_OK) return -1;
    return same;
}

/* The error of a completed event (caller frees); NULL if it succeeded. */
static inline ta_error *event_error(const ta_event *ev) {
    ta_error *e = NULL;
    ta_status s = ta_event_error(ev, &e);
    if (s != TA_STATUS_OK) {
        fprintf(stderr, "ta_event_error returned %s\n", ta_status_name(s));
        return NULL;
    }
    return e;
}

/* ---- atomics and time --------------------------------------------------- */

static inline long atomic_inc(long *p) { return __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); }
static inline long atomic_add(long *p, long d) { return __atomic_add_fetch(p, d, __ATOMIC_SEQ_CST); }
static inline long atomic_get(const long *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void atomic_set(long *p, long v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }

static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void sleep_ms(long ms) {
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

#define SECONDS(s) ((int64_t)((s) * 1e9))

/* ---- gates -------------------------------------------------------------- */

/* A one-shot gate: `entered` counts kernels that reached it, `open` lets them go. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    int entered;
} gate;

static inline void gate_init(gate *g) {
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
    g->entered = 0;
}

static inline void gate_destroy(gate *g) {
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

/* Called by a kernel: announce arrival, then block until the gate opens. */
static inline void gate_pass(gate *g) {
    pthread_mutex_lock(&g->mu);
    g->entered++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* Called by the test: wait until `n` kernels are blocked at the gate
 * (at most `timeout_s`); returns 1 if they are. */
static inline int gate_await_entered(gate *g, int n, double timeout_s) {
    double deadline = now_s() + timeout_s;
    pthread_mutex_lock(&g->mu);
    while (g->entered < n && now_s() < deadline) {
        pthread_mutex_unlock(&g->mu);
        sleep_ms(1);
        pthread_mutex_lock(&g->mu);
    }
    int ok = g->entered >= n;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static inline void gate_open(gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A kernel that blocks at the gate passed as userdata, holding its accesses. */
static inline ta_status gate_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews; (void)ctx;
    gate_pass((gate *)userdata);
    return TA_STATUS_OK;
}

/* ---- submission helpers ------------------------------------------------- */

static inline ta_submit on_runtime(const ta_runtime *rt) {
    ta_submit s;
    memset(&s, 0, sizeof s);
    s.runtime = rt;
    return s;
}

static inline ta_scalar real(double re) {
    ta_scalar s = { re, 0.0 };
    return s;
}

/* A new zero-filled dense row-major tensor. */
static inline ta_tensor *zeros(ta_dtype dt, size_t rank, const size_t *ext) {
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(dt, TA_DOMAIN_HOST, rank, ext, TA_ORDER_ROW_MAJOR, &t, NULL));
    return t;
}

static inline ta_tensor *zeros1(ta_dtype dt, size_t n) { return zeros(dt, 1, &n); }

/* Wait for an event (must complete within `timeout_s`), return its status. */
static inline ta_status wait_event(const ta_event *ev, double timeout_s) {
    return ta_event_wait(ev, SECONDS(timeout_s));
}

/* Copy a tensor out to host memory and wait for it (fatal on failure). */
static inline void read_back(const ta_tensor *t, const ta_runtime *rt, void *dst, size_t n) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    MUST(ta_copy_out(t, dst, n, NULL, &o, &ev, NULL));
    MUST(ta_event_wait(ev, SECONDS(60)));
    ta_event_free(ev);
}

#endif /* TA_TEST_CHECK_H */
