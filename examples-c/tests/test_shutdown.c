/*
 * test_shutdown: ta_runtime_shutdown with TA_SHUTDOWN_CANCEL and _DRAIN.
 *
 * Cancel: a blocker kernel holds A while 1000 operations that all depend on
 * it are pending. Another thread calls ta_runtime_shutdown(CANCEL); once
 * the runtime refuses new work, the blocker is released. Then: the blocker
 * completed OK; every pending operation completed with TA_STATUS_CANCELLED
 * (event, callback exactly once, completion queue entry with an error); no
 * cancelled kernel ran; every output is poisoned with a CANCELLED error; later
 * submissions fail with TA_STATUS_SHUTDOWN.
 *
 * Drain: the same shape with DRAIN runs everything, with the right values.
 * Also: shutting a runtime down from one of its own workers is refused, and
 * ta_runtime_free returns only after the worker threads have exited.
 */
#include "check.h"

#define M 8
#define NOPS 1000

static gate g;
static long cb_count[NOPS + 1];
static long cb_status[NOPS + 1];
static long cancelled_kernel_calls;

static void on_done(ta_status status, void *userdata) {
    long k = (long)(intptr_t)userdata;
    atomic_set(&cb_status[k], (long)status);
    atomic_inc(&cb_count[k]);
}

static ta_status blocker(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ctx;
    gate_pass((gate *)ud);
    double *a = v[0].data;
    for (size_t j = 0; j < v[0].extents[0]; j++) a[(ptrdiff_t)j * v[0].strides[0]] += 1.0;
    return TA_STATUS_OK;
}

/* READ A, UPDATE D: d += a. Counts its calls. */
static ta_status add_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ctx;
    atomic_inc((long *)ud);
    const double *a = v[0].data;
    double *d = v[1].data;
    for (size_t j = 0; j < v[0].extents[0]; j++) d[(ptrdiff_t)j * v[1].strides[0]] += a[(ptrdiff_t)j * v[0].strides[0]];
    return TA_STATUS_OK;
}

struct shutdown_call {
    const ta_runtime *rt;
    ta_shutdown mode;
    ta_status status;
};

static void *shutdown_thread(void *arg) {
    struct shutdown_call *c = arg;
    c->status = ta_runtime_shutdown(c->rt, c->mode, NULL);
    return NULL;
}

/* Submit op k of the standard mix (all depend on A's blocker). */
static void submit_op(long k, const ta_runtime *rt, ta_cq *cq, ta_tensor *A, ta_tensor *B, ta_tensor *C,
                      ta_tensor *D, long *kcalls, ta_event **ev) {
    ta_submit o = on_runtime(rt);
    o.callback = on_done;
    o.callback_userdata = (void *)(intptr_t)k;
    o.cq = cq;
    o.cq_tag = (uint64_t)k;
    ta_access acc[2] = { { A, TA_MODE_READ }, { D, TA_MODE_UPDATE } };
    switch (k % 4) {
    case 0: MUST(ta_axpy(B, real(1), A, &o, ev, NULL)); break;
    case 1: MUST(ta_scale(A, real(-1), &o, ev, NULL)); break;
    case 2: MUST(ta_copy(C, A, &o, ev, NULL)); break;
    case 3: MUST(ta_kernel_submit(add_kernel, kcalls, "add_kernel", acc, 2, &o, ev, NULL)); break;
    }
}

/* Wait until the runtime refuses work, probing with a harmless fill of a
 * private tensor (an accepted probe just runs). */
static int wait_until_refusing(const ta_runtime *rt, ta_tensor *probe, double timeout_s) {
    double deadline = now_s() + timeout_s;
    ta_submit o = on_runtime(rt);
    while (now_s() < deadline) {
        ta_error *e = NULL;
        ta_status s = ta_fill(probe, real(0), &o, NULL, &e);
        if (s == TA_STATUS_SHUTDOWN) {
            CHECK(e && err_status(e) == TA_STATUS_SHUTDOWN, "a refused submission's error object");
            ta_error_free(e);
            return 1;
        }
        CHECK(s == TA_STATUS_OK, "probe submission gave %s", ta_status_name(s));
        sleep_ms(1);
    }
    return 0;
}

static void test_cancel(void) {
    size_t m = M;
    ta_runtime *rt = NULL;
    ta_cq *cq = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    MUST(ta_cq_new(&cq, NULL));
    ta_tensor *A = zeros1(TA_DTYPE_F64, M), *B = zeros1(TA_DTYPE_F64, M), *C = zeros1(TA_DTYPE_F64, M),
              *D = zeros1(TA_DTYPE_F64, M), *probe = zeros1(TA_DTYPE_F64, 1);
    ta_event *ev[NOPS + 1];
    gate_init(&g);

    ta_submit o = on_runtime(rt);
    o.callback = on_done;
    o.callback_userdata = (void *)(intptr_t)NOPS;
    o.cq = cq;
    o.cq_tag = NOPS;
    ta_access blk = { A, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(blocker, &g, "blocker", &blk, 1, &o, &ev[NOPS], NULL));
    CHECK(gate_await_entered(&g, 1, 60), "the blocker did not start");
    for (long k = 0; k < NOPS; k++) submit_op(k, rt, cq, A, B, C, D, &cancelled_kernel_calls, &ev[k]);

    struct shutdown_call call = { rt, TA_SHUTDOWN_CANCEL, 0xffff };
    pthread_t th;
    pthread_create(&th, NULL, shutdown_thread, &call);
    CHECK(wait_until_refusing(rt, probe, 60), "the runtime kept accepting work after shutdown started");
    for (long k = 0; k < NOPS; k++) CHECK_STATUS(ta_event_poll(ev[k]), TA_STATUS_PENDING);
    gate_open(&g);
    pthread_join(th, NULL);
    CHECK_STATUS(call.status, TA_STATUS_OK);

    /* The blocker, already running, completed normally. */
    CHECK_STATUS(ta_event_poll(ev[NOPS]), TA_STATUS_OK);
    CHECK(atomic_get(&cb_count[NOPS]) == 1 && atomic_get(&cb_status[NOPS]) == TA_STATUS_OK,
          "blocker callback: %ld calls, status %s", atomic_get(&cb_count[NOPS]),
          ta_status_name((ta_status)atomic_get(&cb_status[NOPS])));

    /* Everything behind it was cancelled, and said so everywhere, once. */
    long not_cancelled = 0, bad_cb = 0, bad_err = 0;
    for (long k = 0; k < NOPS; k++) {
        if (ta_event_wait(ev[k], 0) != TA_STATUS_CANCELLED || ta_event_poll(ev[k]) != TA_STATUS_CANCELLED)
            not_cancelled++;
        if (atomic_get(&cb_count[k]) != 1 || atomic_get(&cb_status[k]) != TA_STATUS_CANCELLED) bad_cb++;
        ta_error *e = event_error(ev[k]);
        char msg[256], origin[64];
        if (!e || err_status(e) != TA_STATUS_CANCELLED || !*err_message(e, msg, sizeof msg) ||
            !*err_origin(e, origin, sizeof origin) || (k % 4 == 3 && strcmp(origin, "add_kernel") != 0))
            bad_err++;
        if (k == 3) printf("a cancelled operation's error: origin '%s', message '%s'\n", origin, msg);
        ta_error_free(e);
        MUST(ta_event_free(ev[k]));
    }
    MUST(ta_event_free(ev[NOPS]));
    CHECK(not_cancelled == 0, "%ld events did not report TA_STATUS_CANCELLED", not_cancelled);
    CHECK(bad_cb == 0, "%ld callbacks did not fire exactly once with TA_STATUS_CANCELLED", bad_cb);
    CHECK(bad_err == 0, "%ld events had a wrong error object", bad_err);
    CHECK(atomic_get(&cancelled_kernel_calls) == 0, "%ld cancelled kernels ran", atomic_get(&cancelled_kernel_calls));

    /* The completion queue got every entry, each with a matching error. */
    {
        static ta_completion c[NOPS + 8];
        size_t cnt = 0;
        MUST(ta_cq_poll(cq, c, NOPS + 8, &cnt));
        CHECK(cnt == NOPS + 1, "completion queue holds %zu entries, want %d", cnt, NOPS + 1);
        long bad = 0;
        for (size_t i = 0; i < cnt; i++) {
            ta_status want = c[i].tag == NOPS ? TA_STATUS_OK : TA_STATUS_CANCELLED;
            if (c[i].status != want || (want == TA_STATUS_OK) != (c[i].error == NULL) ||
                (c[i].error && err_status(c[i].error) != TA_STATUS_CANCELLED))
                bad++;
            ta_error_free(c[i].error);
        }
        CHECK(bad == 0, "%ld completion entries were wrong", bad);
    }

    /* The outputs are poisoned with a cancellation. */
    ta_tensor *outs[4] = { A, B, C, D };
    for (int i = 0; i < 4; i++) {
        ta_error *e = NULL;
        CHECK_STATUS(ta_tensor_wait(outs[i], SECONDS(10), &e), TA_STATUS_CANCELLED);
        CHECK(e && err_status(e) == TA_STATUS_CANCELLED, "output %d: error object", i);
        ta_error_free(e);
    }

    /* Later submissions are refused, and enroll nothing. */
    {
        ta_error *e = NULL;
        ta_submit p = on_runtime(rt);
        double host[M] = { 0 };
        ta_access acc = { D, TA_MODE_UPDATE };
        CHECK_STATUS(ta_fill(B, real(1), &p, NULL, &e), TA_STATUS_SHUTDOWN);
        CHECK(e && err_status(e) == TA_STATUS_SHUTDOWN, "refused fill: error object");
        ta_error_free(e);
        CHECK_STATUS(ta_copy_in(B, host, 1, &m, NULL, &p, NULL, NULL), TA_STATUS_SHUTDOWN);
        CHECK_STATUS(ta_kernel_submit(add_kernel, &cancelled_kernel_calls, "k", &acc, 1, &p, NULL, NULL),
                     TA_STATUS_SHUTDOWN);
        CHECK_STATUS(ta_tensor_wait(B, SECONDS(10), NULL), TA_STATUS_CANCELLED); /* still the old state */
    }
    CHECK_STATUS(ta_runtime_shutdown(rt, TA_SHUTDOWN_DRAIN, NULL), TA_STATUS_OK); /* again: harmless */
    printf("cancel: blocker OK, %d pending operations cancelled (events, callbacks, queue, poisoned outputs), "
           "later submissions refused\n", NOPS);

    ta_tensor_free(A); ta_tensor_free(B); ta_tensor_free(C); ta_tensor_free(D); ta_tensor_free(probe);
    MUST(ta_cq_free(cq));
    MUST(ta_runtime_free(rt));
    gate_destroy(&g);
}

static void test_drain(void) {
    enum { K = 200 };
    size_t m = M;
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_tensor *A = zeros1(TA_DTYPE_F64, M), *B = zeros1(TA_DTYPE_F64, M), *C = zeros1(TA_DTYPE_F64, M),
              *D = zeros1(TA_DTYPE_F64, M), *probe = zeros1(TA_DTYPE_F64, 1);
    gate_init(&g);
    memset(cb_count, 0, sizeof cb_count);
    long kcalls = 0;
    ta_submit o = on_runtime(rt);
    ta_access blk = { A, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(blocker, &g, "blocker", &blk, 1, &o, NULL, NULL));
    CHECK(gate_await_entered(&g, 1, 60), "the blocker did not start");
    for (long k = 0; k < K; k++) submit_op(k, rt, NULL, A, B, C, D, &kcalls, NULL);
    double hb[M], hd[M];
    o.callback = on_done;
    o.callback_userdata = (void *)(intptr_t)K;
    MUST(ta_copy_out(B, hb, M, NULL, &o, NULL, NULL));
    o.callback_userdata = (void *)(intptr_t)(K + 1);
    MUST(ta_copy_out(D, hd, M, NULL, &o, NULL, NULL));

    struct shutdown_call call = { rt, TA_SHUTDOWN_DRAIN, 0xffff };
    pthread_t th;
    pthread_create(&th, NULL, shutdown_thread, &call);
    CHECK(wait_until_refusing(rt, probe, 60), "the runtime kept accepting work after shutdown started");
    gate_open(&g);
    pthread_join(th, NULL);
    CHECK_STATUS(call.status, TA_STATUS_OK);

    /* Replay: a = 1 (blocker), then the mix. */
    double a[M], b[M], d[M];
    for (int j = 0; j < M; j++) { a[j] = 1; b[j] = d[j] = 0; }
    for (long k = 0; k < K; k++)
        for (int j = 0; j < M; j++) switch (k % 4) {
            case 0: b[j] += a[j]; break;
            case 1: a[j] = -a[j]; break;
            case 3: d[j] += a[j]; break;
            }
    CHECK(kcalls == K / 4, "drain ran %ld of %d kernels", kcalls, K / 4);
    CHECK(atomic_get(&cb_count[K]) == 1 && atomic_get(&cb_count[K + 1]) == 1, "drain: copy_out callbacks");
    CHECK(memcmp(hb, b, sizeof b) == 0 && memcmp(hd, d, sizeof d) == 0, "drain: results differ from the replay");
    CHECK_STATUS(ta_fill(A, real(0), &o, NULL, NULL), TA_STATUS_SHUTDOWN);
    printf("drain: everything submitted before the shutdown ran (%d operations, values match the replay)\n", K);
    (void)m;
    ta_tensor_free(A); ta_tensor_free(B); ta_tensor_free(C); ta_tensor_free(D); ta_tensor_free(probe);
    MUST(ta_runtime_free(rt));
    gate_destroy(&g);
}

/* A worker cannot shut its own runtime down. */
static ta_status shutdown_from_worker(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ctx;
    void **args = ud;
    *(ta_status *)args[1] = ta_runtime_shutdown((const ta_runtime *)args[0], TA_SHUTDOWN_DRAIN, NULL);
    return TA_STATUS_OK;
}

static void test_from_worker(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(1, &rt, NULL));
    ta_tensor *t = zeros1(TA_DTYPE_F64, 1);
    ta_status inner = 0xffff;
    void *args[2] = { rt, &inner };
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_access acc = { t, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(shutdown_from_worker, args, "shutdown_from_worker", &acc, 1, &o, &ev, NULL));
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
    CHECK_STATUS(inner, TA_STATUS_WOULD_DEADLOCK);
    MUST(ta_fill(t, real(1), &o, NULL, NULL)); /* still running */
    printf("shutdown from a worker: %s\n", ta_status_name(inner));
    ta_event_free(ev);
    ta_tensor_free(t);
    MUST(ta_runtime_free(rt));
}

/* ta_runtime_free returns after the runtime's worker threads have exited.
 * Each kernel gives its thread a pthread key whose destructor, run as the
 * thread exits, counts the thread out again. */
static pthread_key_t worker_key;
static long live_workers;

static void worker_exits(void *p) {
    (void)p;
    atomic_add(&live_workers, -1);
}

static ta_status mark_worker(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud; (void)ctx;
    if (pthread_getspecific(worker_key) == NULL) {
        atomic_inc(&live_workers);
        if (pthread_setspecific(worker_key, &live_workers) != 0) return TA_STATUS_INTERNAL;
    }
    return TA_STATUS_OK;
}

static void test_free_joins_workers(void) {
    enum { ROUNDS = 10, T = 8 };
    CHECK(pthread_key_create(&worker_key, worker_exits) == 0, "pthread_key_create");
    long ran_on = 0;
    for (int round = 0; round < ROUNDS; round++) {
        ta_runtime *rt = NULL;
        MUST(ta_runtime_new(2, &rt, NULL));
        ta_submit o = on_runtime(rt);
        ta_tensor *t[T];
        for (int i = 0; i < T; i++) {
            t[i] = zeros1(TA_DTYPE_F64, 1);
            ta_access acc = { t[i], TA_MODE_UPDATE };
            MUST(ta_kernel_submit(mark_worker, NULL, "mark_worker", &acc, 1, &o, NULL, NULL));
        }
        MUST(ta_runtime_wait_idle(rt, -1, NULL));
        long live = atomic_get(&live_workers);
        CHECK(live >= 1 && live <= 2, "round %d: %ld marked worker threads, want 1 or 2", round, live);
        ran_on += live;
        for (int i = 0; i < T; i++) ta_tensor_free(t[i]);
        MUST(ta_runtime_free(rt));
        live = atomic_get(&live_workers);
        CHECK(live == 0, "round %d: %ld worker threads still running after ta_runtime_free", round, live);
    }
    pthread_key_delete(worker_key);
    printf("free: the worker threads had exited when ta_runtime_free returned (%d runtimes, %ld threads)\n", ROUNDS,
           ran_on);
}

int main(void) {
    test_cancel();
    test_drain();
    test_from_worker();
    test_free_joins_workers();
    return finish("test_shutdown");
}
