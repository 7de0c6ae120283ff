/* ta_submit_ex: priorities among ready operations, and the validation of
 * the extended options (struct_size, flags).
 *
 * A one-worker runtime is held by a gated kernel while the test submits;
 * once the gate opens, the order in which the worker runs what waited is
 * the order the pool chose (no timing involved). */
#include "check.h"

#define MAXLOG 16
static int g_log[MAXLOG];
static long g_nlog;

/* Logs its userdata (an int label) when it runs. */
static ta_status log_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews; (void)ctx;
    long at = atomic_inc(&g_nlog) - 1;
    if (at < MAXLOG) g_log[at] = *(const int *)userdata;
    return TA_STATUS_OK;
}

static ta_tensor *scalar(void) {
    size_t one = 1;
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &one, TA_ORDER_ROW_MAJOR, &t, NULL));
    return t;
}

static ta_submit_ex ex_for(ta_runtime *rt, int32_t priority) {
    ta_submit_ex ex;
    memset(&ex, 0, sizeof ex);
    ex.struct_size = sizeof ex;
    ex.priority = priority;
    ex.submit.runtime = rt;
    ex.submit.flags = TA_SUBMIT_EXTENDED;
    return ex;
}

/* Runs the kernels labelled labels[i] with priorities prio[i] (each on its
 * own tensor) behind a held worker; checks they ran in the order `want`. */
static void check_order(const int *labels, const int32_t *prio, int n, const int *want, const char *what) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(1, &rt, NULL));
    ta_tensor *held = scalar();
    ta_tensor *t[MAXLOG];
    gate g;
    gate_init(&g);
    ta_submit plain;
    memset(&plain, 0, sizeof plain);
    plain.runtime = rt;
    ta_access a = { held, TA_MODE_WRITE };
    MUST(ta_kernel_submit(gate_kernel, &g, "gate", &a, 1, &plain, NULL, NULL));
    CHECK(gate_await_entered(&g, 1, 60), "the gate kernel runs");
    atomic_set(&g_nlog, 0);
    for (int i = 0; i < n; i++) {
        t[i] = scalar();
        ta_access w = { t[i], TA_MODE_WRITE };
        ta_submit_ex ex = ex_for(rt, prio[i]);
        /* Priority 0 through a plain ta_submit, as before. */
        MUST(ta_kernel_submit(log_kernel, (void *)&labels[i], "logged", &w, 1, prio[i] ? &ex.submit : &plain, NULL,
                              NULL));
    }
    gate_open(&g);
    MUST(ta_runtime_wait_idle(rt, SECONDS(60), NULL));
    int same = atomic_get(&g_nlog) == n;
    for (int i = 0; same && i < n; i++) same = g_log[i] == want[i];
    CHECK(same, "%s: ran in the wrong order (%ld ran; first %d, want %d)", what, atomic_get(&g_nlog), g_log[0],
          want[0]);
    for (int i = 0; i < n; i++) ta_tensor_free(t[i]);
    ta_tensor_free(held);
    gate_destroy(&g);
    ta_runtime_free(rt);
}

/* The status and message of one ta_fill with `opts`. */
static ta_status fill_with(const ta_submit *opts, char *msg, size_t cap) {
    ta_tensor *t = scalar();
    ta_error *e = NULL;
    ta_event *ev = NULL;
    ta_scalar one = { 1.0, 0.0 };
    ta_status s = ta_fill(t, one, opts, &ev, &e);
    err_message(e, msg, cap);
    ta_error_free(e);
    if (ev) {
        CHECK_STATUS(ta_event_wait(ev, SECONDS(60)), TA_STATUS_OK);
        ta_event_free(ev);
    }
    ta_tensor_free(t);
    return s;
}

int main(void) {
    /* Highest first; equal priorities in submission order; 0 before negative. */
    {
        const int labels[] = { 0, 5, -3, 50, 1, 10, -30, 100 };
        const int32_t prio[] = { 0, 5, -3, 5, 0, 10, -3, 0 };
        const int want[] = { 10, 5, 50, 0, 1, 100, -3, -30 };
        check_order(labels, prio, 8, want, "with priorities");
    }
    /* No priority: submission order. */
    {
        const int labels[] = { 1, 2, 3, 4, 5 };
        const int32_t prio[] = { 0, 0, 0, 0, 0 };
        check_order(labels, prio, 5, labels, "without priorities");
    }

    char msg[512];
    ta_submit_ex ex = ex_for(NULL, 3);
    CHECK_STATUS(fill_with(&ex.submit, msg, sizeof msg), TA_STATUS_OK);

    /* struct_size below this version's struct. */
    ex.struct_size = 8;
    CHECK_STATUS(fill_with(&ex.submit, msg, sizeof msg), TA_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(msg, "struct_size is 8") != NULL, "message names struct_size: %s", msg);
    ex.struct_size = 0;
    CHECK_STATUS(fill_with(&ex.submit, msg, sizeof msg), TA_STATUS_INVALID_ARGUMENT);

    /* A later version's larger struct: accepted while the fields this
     * version does not know are zero, refused once one is set. */
    struct {
        ta_submit_ex ex;
        uint64_t later;
    } big;
    memset(&big, 0, sizeof big);
    big.ex = ex_for(NULL, -1);
    big.ex.struct_size = sizeof big;
    CHECK_STATUS(fill_with(&big.ex.submit, msg, sizeof msg), TA_STATUS_OK);
    big.later = 1;
    CHECK_STATUS(fill_with(&big.ex.submit, msg, sizeof msg), TA_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(msg, "struct_size") != NULL && strstr(msg, "knows only") != NULL, "message: %s", msg);

    /* Unknown flags next to TA_SUBMIT_EXTENDED are still refused. */
    ex = ex_for(NULL, 1);
    ex.submit.flags |= 0x80;
    CHECK_STATUS(fill_with(&ex.submit, msg, sizeof msg), TA_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(msg, "unknown flags") != NULL, "message: %s", msg);

    /* TA_SUBMIT_TRANSFER still works inside an extended struct. */
    ex = ex_for(NULL, 2);
    ex.submit.flags |= TA_SUBMIT_TRANSFER;
    CHECK_STATUS(fill_with(&ex.submit, msg, sizeof msg), TA_STATUS_OK);

    return finish("test_priority");
}
