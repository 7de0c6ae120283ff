/*
 * Waits that could never finish fail with TA_STATUS_WOULD_DEADLOCK at once
 * (SPEC §2.1: "a blocking wait from a runtime thread never hangs the pool"),
 * where they hung before:
 *
 *   1. In a kernel K that updates T, acquiring U, whose pending writer X
 *      (submitted after K) reads T: blocking (ta_tensor_acquire) and
 *      non-blocking (ta_tensor_acquire_async, then ta_event_wait on its
 *      event), both with no timeout. ta_tensor_wait(U) there was refused
 *      already and still is.
 *   2. In the callback of A, waiting on B, which reads what A writes and
 *      starts only after A's callbacks return: on B's event and on the
 *      tensor, with no timeout, for a callback run on a worker and for one
 *      run by ta_token_finish on a program thread. A wait there on an
 *      operation that does not depend on A still succeeds.
 *   3. While a runtime drains, a callback run by ta_token_finish on a
 *      program thread submits follow-up work, which is accepted (as it is
 *      from a worker's callback) and runs before the drain returns.
 */
#include "check.h"

static ta_tensor *vec(size_t n) {
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &t, NULL));
    return t;
}

static double first(ta_tensor *t) {
    double x = -1;
    ta_event *ev = NULL;
    MUST(ta_copy_out(t, &x, 1, NULL, NULL, &ev, NULL));
    MUST(ta_event_wait(ev, TA_WAIT_FOREVER));
    MUST(ta_event_free(ev));
    return x;
}

static ta_status noop(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v;
    (void)n;
    (void)ud;
    (void)ctx;
    return TA_STATUS_OK;
}

/* ---- 1. acquire inside a kernel ------------------------------------------ */

static gate g_k;
static ta_tensor *g_u;
static ta_status g_acq[3];

static ta_status k_acquires(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v;
    (void)n;
    (void)ud;
    (void)ctx;
    gate_pass(&g_k); /* X is submitted by now */
    ta_mapping *m = NULL;
    ta_error *err = NULL;
    g_acq[0] = ta_tensor_acquire(g_u, TA_MODE_READ, TA_WAIT_FOREVER, &m, &err);
    if (m) ta_mapping_free(m);
    char o[64] = "";
    CHECK(err && !strcmp(err_origin(err, o, sizeof o), "ta_tensor_acquire"), "acquire's origin: %s", o);
    ta_error_free(err);
    m = NULL;
    ta_event *e = NULL;
    g_acq[1] = ta_tensor_acquire_async(g_u, TA_MODE_READ, &m, &e, NULL);
    if (g_acq[1] == TA_STATUS_OK) g_acq[1] = ta_event_wait(e, TA_WAIT_FOREVER);
    ta_event_free(e);
    ta_mapping_free(m);
    g_acq[2] = ta_tensor_wait(g_u, TA_WAIT_FOREVER, NULL);
    return TA_STATUS_OK;
}

static void acquire_in_kernel(ta_runtime *rt) {
    gate_init(&g_k);
    ta_submit o = {0};
    o.runtime = rt;
    ta_tensor *t = vec(4);
    g_u = vec(4);
    ta_access a = {t, TA_MODE_UPDATE};
    ta_event *ek = NULL;
    MUST(ta_kernel_submit(k_acquires, NULL, "K", &a, 1, &o, &ek, NULL));
    ta_access x[2] = {{t, TA_MODE_READ}, {g_u, TA_MODE_WRITE}};
    MUST(ta_kernel_submit(noop, NULL, "X", x, 2, &o, NULL, NULL));
    CHECK(gate_await_entered(&g_k, 1, 10.0), "K did not start");
    gate_open(&g_k);
    CHECK_STATUS(ta_event_wait(ek, SECONDS(20)), TA_STATUS_OK);
    CHECK_STATUS(g_acq[0], TA_STATUS_WOULD_DEADLOCK);
    CHECK_STATUS(g_acq[1], TA_STATUS_WOULD_DEADLOCK);
    CHECK_STATUS(g_acq[2], TA_STATUS_WOULD_DEADLOCK);
    /* The refused accesses hold nothing up: U is readable after X. */
    MUST(ta_tensor_wait(g_u, SECONDS(20), NULL));
    MUST(ta_event_free(ek));
    MUST(ta_tensor_free(t));
    MUST(ta_tensor_free(g_u));
    gate_destroy(&g_k);
}

/* ---- 2. a callback waiting on what waits for it -------------------------- */

typedef struct {
    ta_event *b;           /* B, which reads A's output */
    ta_tensor *t;          /* A's output */
    ta_event *unrelated;   /* an operation on another tensor */
    ta_status on_b, on_t, on_unrelated;
    long calls;
} cb_state;

static void cb_waits(ta_status s, void *ud) {
    (void)s;
    cb_state *c = ud;
    c->on_b = ta_event_wait(c->b, TA_WAIT_FOREVER);
    c->on_t = ta_tensor_wait(c->t, TA_WAIT_FOREVER, NULL);
    c->on_unrelated = ta_event_wait(c->unrelated, SECONDS(20));
    atomic_inc(&c->calls);
}

static gate g_hold;

/* A runs on a worker (finished by its kernel) or is an external operation
 * whose token this thread finishes (its callback then runs here). */
static void callback_waits(ta_runtime *rt, int external) {
    gate_init(&g_hold);
    ta_submit o = {0};
    o.runtime = rt;
    cb_state c;
    memset(&c, 0, sizeof c);
    c.on_b = c.on_t = c.on_unrelated = 999;
    c.t = vec(1);
    ta_tensor *other = vec(1);
    /* A gate ahead of A on T, so that B and the unrelated fill exist before A's callback runs. */
    ta_access held = {c.t, TA_MODE_UPDATE};
    MUST(ta_kernel_submit(gate_kernel, &g_hold, "hold", &held, 1, &o, NULL, NULL));
    ta_submit oa = o;
    oa.callback = cb_waits;
    oa.callback_userdata = &c;
    ta_access wa = {c.t, TA_MODE_UPDATE};
    ta_token *tok = NULL;
    ta_event *started = NULL;
    if (external)
        MUST(ta_external_submit(&wa, 1, "A", &oa, &tok, &started, NULL, NULL));
    else
        MUST(ta_kernel_submit(noop, NULL, "A", &wa, 1, &oa, NULL, NULL));
    ta_access rb = {c.t, TA_MODE_READ};
    MUST(ta_kernel_submit(noop, NULL, "B", &rb, 1, &o, &c.b, NULL));
    ta_scalar two = {2, 0};
    MUST(ta_fill(other, two, &o, &c.unrelated, NULL));
    CHECK(gate_await_entered(&g_hold, 1, 10.0), "the hold did not start");
    gate_open(&g_hold);
    if (external) {
        /* Granted first, so that the finish (and A's callback) runs on this thread. */
        MUST(ta_event_wait(started, SECONDS(20)));
        MUST(ta_event_free(started));
        MUST(ta_token_finish(tok, TA_STATUS_OK, NULL));
    }
    CHECK_STATUS(ta_event_wait(c.b, SECONDS(20)), TA_STATUS_OK);
    CHECK(atomic_get(&c.calls) == 1, "A's callback ran %ld times", atomic_get(&c.calls));
    CHECK_STATUS(c.on_b, TA_STATUS_WOULD_DEADLOCK);
    CHECK_STATUS(c.on_t, TA_STATUS_WOULD_DEADLOCK);
    CHECK_STATUS(c.on_unrelated, TA_STATUS_OK);
    CHECK(first(other) == 2, "the unrelated fill");
    MUST(ta_event_free(c.b));
    MUST(ta_event_free(c.unrelated));
    MUST(ta_tensor_free(c.t));
    MUST(ta_tensor_free(other));
    gate_destroy(&g_hold);
}

/* ---- 3. follow-up work from a program thread's callback while draining ---- */

typedef struct {
    ta_runtime *rt;
    ta_tensor *f;
    ta_status follow_up;
} drain_state;

static void cb_follow_up(ta_status s, void *ud) {
    (void)s;
    drain_state *d = ud;
    ta_submit o = {0};
    o.runtime = d->rt;
    ta_scalar seven = {7, 0};
    d->follow_up = ta_fill(d->f, seven, &o, NULL, NULL);
}

typedef struct {
    ta_token *tok;
    ta_runtime *rt;
} finisher_arg;

static void *finisher(void *p) {
    finisher_arg *a = p;
    /* Finish once the drain has begun: a submission from here is refused then. */
    ta_tensor *probe = vec(1);
    ta_submit o = {0};
    o.runtime = a->rt;
    ta_scalar one = {1, 0};
    double t0 = now_s();
    while (ta_fill(probe, one, &o, NULL, NULL) == TA_STATUS_OK && now_s() - t0 < 20) sleep_ms(1);
    MUST(ta_token_finish(a->tok, TA_STATUS_OK, NULL));
    MUST(ta_tensor_free(probe));
    return NULL;
}

static void drain_follow_up(void) {
    drain_state d;
    MUST(ta_runtime_new(2, &d.rt, NULL));
    d.f = vec(1);
    d.follow_up = 999;
    ta_tensor *x = vec(1);
    ta_submit o = {0};
    o.runtime = d.rt;
    o.callback = cb_follow_up;
    o.callback_userdata = &d;
    ta_access ax = {x, TA_MODE_UPDATE};
    finisher_arg a = {NULL, d.rt};
    MUST(ta_external_submit(&ax, 1, "ext", &o, &a.tok, NULL, NULL, NULL));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, finisher, &a) == 0, "pthread_create");
    MUST(ta_runtime_shutdown(d.rt, TA_SHUTDOWN_DRAIN, NULL));
    pthread_join(th, NULL);
    CHECK_STATUS(d.follow_up, TA_STATUS_OK);
    CHECK(first(d.f) == 7, "the follow-up fill ran before the drain returned: %g", first(d.f));
    MUST(ta_tensor_free(x));
    MUST(ta_tensor_free(d.f));
    MUST(ta_runtime_free(d.rt));
}

int main(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    acquire_in_kernel(rt);
    callback_waits(rt, 0);
    callback_waits(rt, 1);
    MUST(ta_runtime_free(rt));
    drain_follow_up();
    size_t live = 1;
    MUST(ta_handles_live(&live));
    CHECK(live == 0, "%zu handles live", live);
    return finish("test_wait_refusals");
}
