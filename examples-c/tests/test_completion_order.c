/* Completion order: when a completion callback runs or a completion entry is
 * queued, the operation is complete in every observable way (its event polls
 * the final status, its error is readable, a zero-timeout wait on the event
 * and on a tensor whose last operation it was return the final status); and
 * once an event reports completion, every access the operation held is
 * released. */
#include "check.h"

#include <poll.h>

#define ITERS 2000

typedef struct probe {
    const ta_tensor *t;
    ta_event *ev; /* set before the kernel may finish */
    gate start;
    int fail;
    long bad;       /* observations that were not the final state */
    long fired;     /* callbacks run */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} probe;

static ta_status gated_write(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews;
    probe *p = (probe *)userdata;
    gate_pass(&p->start);
    if (p->fail) {
        ta_kernel_set_error(ctx, "planned failure");
        return 5;
    }
    return TA_STATUS_OK;
}

/* Everything a callback can observe about its own operation. */
static void observe(probe *p, ta_status st) {
    ta_status want = p->fail ? TA_STATUS_KERNEL_FAILED : TA_STATUS_OK;
    long bad = 0;
    if (st != want) bad++;
    if (ta_event_poll(p->ev) != want) bad++;
    ta_error *e = NULL;
    if (ta_event_error(p->ev, &e) != TA_STATUS_OK) bad++;
    else {
        if ((e != NULL) != p->fail) bad++;
        if (e) {
            char msg[64];
            if (strcmp(err_message(e, msg, sizeof msg), "planned failure") != 0) bad++;
            ta_error_free(e);
        }
    }
    if (ta_event_wait(p->ev, 0) != want) bad++;
    if (ta_tensor_wait(p->t, 0, NULL) != want) bad++;
    atomic_add(&p->bad, bad);
    pthread_mutex_lock(&p->mu);
    p->fired++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void on_done(ta_status st, void *userdata) { observe((probe *)userdata, st); }

static void await_fired(probe *p, long n) {
    pthread_mutex_lock(&p->mu);
    while (p->fired < n) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static ta_status read_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews; (void)userdata; (void)ctx;
    return TA_STATUS_OK;
}

int main(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_submit o = on_runtime(rt);

    /* Bug 1: callbacks (ta_submit.callback, and ta_event_on_complete attached
     * while pending) see their operation complete. */
    {
        ta_tensor *t = zeros1(TA_DTYPE_F64, 4);
        probe p;
        memset(&p, 0, sizeof p);
        p.t = t;
        pthread_mutex_init(&p.mu, NULL);
        pthread_cond_init(&p.cv, NULL);
        ta_submit so = o;
        so.callback = on_done;
        so.callback_userdata = &p;
        for (int i = 0; i < ITERS; i++) {
            gate_init(&p.start);
            p.fail = i % 2;
            ta_access a = { t, TA_MODE_WRITE };
            MUST(ta_kernel_submit(gated_write, &p, "order", &a, 1, &so, &p.ev, NULL));
            MUST(ta_event_on_complete(p.ev, on_done, &p));
            gate_open(&p.start);
            await_fired(&p, 2L * (i + 1));
            ta_event_free(p.ev);
            gate_destroy(&p.start);
        }
        CHECK(atomic_get(&p.bad) == 0, "%ld observations inside callbacks were not final", atomic_get(&p.bad));
        CHECK(p.fired == 2L * ITERS, "%ld callbacks fired", p.fired);
        pthread_mutex_destroy(&p.mu);
        pthread_cond_destroy(&p.cv);
        ta_tensor_free(t);
    }

    /* A completion entry: once it can be taken, the event and the tensor are final. */
    {
        ta_cq *cq = NULL;
        MUST(ta_cq_new(&cq, NULL));
        int fd = -1;
        MUST(ta_cq_fd(cq, &fd));
        ta_tensor *t = zeros1(TA_DTYPE_F64, 4);
        ta_submit so = o;
        so.cq = cq;
        long bad = 0;
        for (int i = 0; i < ITERS; i++) {
            so.cq_tag = (uint64_t)i;
            ta_access a = { t, TA_MODE_WRITE };
            ta_event *ev = NULL;
            MUST(ta_kernel_submit(read_kernel, NULL, "cq", &a, 1, &so, &ev, NULL));
            struct pollfd pf = { fd, POLLIN, 0 };
            while (poll(&pf, 1, 60000) != 1) {}
            ta_completion c;
            size_t n = 0;
            MUST(ta_cq_poll(cq, &c, 1, &n));
            if (n != 1 || c.tag != (uint64_t)i || c.status != TA_STATUS_OK) bad++;
            if (ta_event_poll(ev) != TA_STATUS_OK) bad++;
            if (ta_tensor_wait(t, 0, NULL) != TA_STATUS_OK) bad++;
            ta_event_free(ev);
        }
        CHECK(bad == 0, "%ld observations after a completion entry were not final", bad);
        ta_tensor_free(t);
        ta_cq_free(cq);
    }

    /* Bug 2, first pattern: a gated writer, then a copy into the tensor, then
     * a reader kernel; once the reader's event is OK the tensor is free. */
    {
        long bad = 0;
        double src[4] = { 1, 2, 3, 4 };
        size_t n4 = 4;
        ta_tensor *s = NULL;
        MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, src, &s, NULL));
        ta_tensor *t = zeros1(TA_DTYPE_F64, 4);
        probe p;
        memset(&p, 0, sizeof p);
        for (int i = 0; i < ITERS; i++) {
            gate_init(&p.start);
            ta_access w = { t, TA_MODE_UPDATE };
            MUST(ta_kernel_submit(gated_write, &p, "writer", &w, 1, &o, NULL, NULL));
            MUST(ta_copy(t, s, &o, NULL, NULL));
            ta_access r = { t, TA_MODE_READ };
            ta_event *ev = NULL;
            MUST(ta_kernel_submit(read_kernel, NULL, "reader", &r, 1, &o, &ev, NULL));
            gate_open(&p.start);
            if (ta_event_wait(ev, SECONDS(60)) != TA_STATUS_OK) bad++;
            if (ta_tensor_wait(t, 0, NULL) != TA_STATUS_OK) bad++;
            ta_event_free(ev);
            /* The gate is only passed by the writer, which has finished. */
            gate_destroy(&p.start);
        }
        CHECK(bad == 0, "%ld zero-timeout waits after the reader's event were not final", bad);
        ta_tensor_free(t);
        ta_tensor_free(s);
    }

    /* Bug 2, second pattern: one READ kernel on a tensor made by ta_tensor_new_copy. */
    {
        long bad = 0;
        double src[4] = { 1, 2, 3, 4 };
        size_t n4 = 4;
        for (int i = 0; i < ITERS; i++) {
            ta_tensor *t = NULL;
            MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, src, &t, NULL));
            ta_access r = { t, TA_MODE_READ };
            ta_event *ev = NULL;
            MUST(ta_kernel_submit(read_kernel, NULL, "reader", &r, 1, &o, &ev, NULL));
            if (ta_event_wait(ev, SECONDS(60)) != TA_STATUS_OK) bad++;
            if (ta_tensor_wait(t, 0, NULL) != TA_STATUS_OK) bad++;
            ta_event_free(ev);
            ta_tensor_free(t);
        }
        CHECK(bad == 0, "%ld zero-timeout waits after a reader's event were not final", bad);
    }

    MUST(ta_runtime_shutdown(rt, TA_SHUTDOWN_DRAIN, NULL));
    ta_runtime_free(rt);
    return finish("test_completion_order");
}
