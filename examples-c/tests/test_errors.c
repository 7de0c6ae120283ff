/*
 * test_errors: errors are values (SPEC §2.2).
 *
 * A user kernel fails (returns 17 after ta_kernel_set_error) while updating T.
 * Every later reader and updater of T, and transitively of what they wrote,
 * fails with that same error object: same status, message, origin (the kernel
 * name given to ta_kernel_submit) and code, and ta_error_same says it is the
 * same object. The error is visible through ta_event_wait/poll/error, through
 * callbacks (status), completion queue entries (status + error) and
 * ta_tensor_wait. A kernel whose input is poisoned is never called. Pure
 * overwrites (ta_fill, ta_copy_in, ta_copy, a WRITE kernel) clear the poison.
 */
#include "check.h"

#define N 8
#define KERNEL_NAME "factorize_panel"
#define KERNEL_MSG "zero pivot in column 3"
#define KERNEL_CODE 17

static ta_runtime *rt;
static ta_cq *cq;
static gate g;

enum { MAX_OPS = 16 };
static long cb_count[MAX_OPS];
static long cb_status[MAX_OPS];
static long kernel_calls;
static long set_error_status = -1; /* what ta_kernel_set_error returned inside the kernel */

static void on_done(ta_status status, void *userdata) {
    long i = (long)(intptr_t)userdata;
    atomic_set(&cb_status[i], (long)status);
    atomic_inc(&cb_count[i]);
}

/* Blocks at the gate (so that the operations below are submitted while it
 * runs), then fails with a message. */
static ta_status failing_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud;
    gate_pass(&g);
    atomic_set(&set_error_status, (long)ta_kernel_set_error(ctx, KERNEL_MSG));
    return KERNEL_CODE;
}

static ta_status counting_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud; (void)ctx;
    atomic_inc(&kernel_calls); /* must not run: its input is poisoned */
    return TA_STATUS_OK;
}

/* A WRITE kernel: overwrites every element with 5 (clears a poison). */
static ta_status write_fives(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ud; (void)ctx;
    double *p = v[0].data;
    for (size_t i = 0; i < v[0].extents[0]; i++) p[(ptrdiff_t)i * v[0].strides[0]] = 5.0;
    return TA_STATUS_OK;
}

/* A kernel that fails without setting a message. */
static ta_status silent_failure(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud; (void)ctx;
    return 23;
}

static ta_submit notify(long i) {
    ta_submit o = on_runtime(rt);
    o.callback = on_done;
    o.callback_userdata = (void *)(intptr_t)i;
    o.cq = cq;
    o.cq_tag = (uint64_t)i;
    return o;
}

/* The error `e` must be the kernel's error, as an identical object to `orig`. */
static void check_is_original(const ta_error *e, const ta_error *orig, const char *where) {
    char msg[256], origin[128];
    int64_t code = 0;
    CHECK(e != NULL, "%s: no error object", where);
    if (!e) return;
    CHECK(err_status(e) == TA_STATUS_KERNEL_FAILED, "%s: status %s", where, ta_status_name(err_status(e)));
    CHECK(strcmp(err_message(e, msg, sizeof msg), KERNEL_MSG) == 0, "%s: message '%s'", where, msg);
    CHECK(strcmp(err_origin(e, origin, sizeof origin), KERNEL_NAME) == 0, "%s: origin '%s'", where, origin);
    CHECK(ta_error_code(e, &code) == TA_STATUS_OK && code == KERNEL_CODE, "%s: code %lld", where, (long long)code);
    if (orig) CHECK(err_same(e, orig) == 1, "%s: not the same error object as the kernel's", where);
}

int main(void) {
    size_t n = N;
    double init[N], sentinel[N], host_t[N], host_u[N];
    for (int i = 0; i < N; i++) {
        init[i] = i + 1;
        sentinel[i] = -1234.5;
    }
    memcpy(host_t, sentinel, sizeof host_t);
    memcpy(host_u, sentinel, sizeof host_u);
    gate_init(&g);
    MUST(ta_runtime_new(2, &rt, NULL));
    MUST(ta_cq_new(&cq, NULL));

    ta_tensor *T = NULL, *X = NULL, *U = zeros1(TA_DTYPE_F64, N), *V = zeros1(TA_DTYPE_F64, N), *W = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, init, &T, NULL));
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, init, &X, NULL));
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &W, NULL));

    /* op 0: the failing kernel, updating T. */
    ta_event *ev[MAX_OPS] = { 0 };
    const char *what[MAX_OPS] = { 0 };
    int nops = 0;
    ta_submit o = notify(nops);
    ta_access a0 = { T, TA_MODE_UPDATE };
    what[nops] = "the failing kernel";
    MUST(ta_kernel_submit(failing_kernel, NULL, KERNEL_NAME, &a0, 1, &o, &ev[nops++], NULL));
    CHECK(gate_await_entered(&g, 1, 60), "the failing kernel did not start");

    /* Downstream operations, submitted while the kernel is still running. */
    o = notify(nops); what[nops] = "ta_copy_out(T) (reader)";
    MUST(ta_copy_out(T, host_t, N, NULL, &o, &ev[nops++], NULL));
    o = notify(nops); what[nops] = "ta_axpy(U += T) (reader of T)";
    MUST(ta_axpy(U, real(1), T, &o, &ev[nops++], NULL));
    o = notify(nops); what[nops] = "ta_scale(T) (updater)";
    MUST(ta_scale(T, real(2), &o, &ev[nops++], NULL));
    o = notify(nops); what[nops] = "kernel READ T, WRITE V";
    ta_access a1[2] = { { T, TA_MODE_READ }, { V, TA_MODE_WRITE } };
    MUST(ta_kernel_submit(counting_kernel, NULL, "counting_kernel", a1, 2, &o, &ev[nops++], NULL));
    o = notify(nops); what[nops] = "ta_copy(W = T) (reader of T)";
    MUST(ta_copy(W, T, &o, &ev[nops++], NULL));
    o = notify(nops); what[nops] = "ta_copy_out(U) (reader of poisoned U)";
    MUST(ta_copy_out(U, host_u, N, NULL, &o, &ev[nops++], NULL));
    o = notify(nops); what[nops] = "ta_axpy(T += X) (updater of T)";
    MUST(ta_axpy(T, real(1), X, &o, &ev[nops++], NULL));
    o = notify(nops); what[nops] = "ta_scale(V) (updater of poisoned V)";
    MUST(ta_scale(V, real(3), &o, &ev[nops++], NULL));

    /* While the kernel blocks, everything is pending. */
    for (int i = 0; i < nops; i++) {
        CHECK_STATUS(ta_event_poll(ev[i]), TA_STATUS_PENDING);
        ta_error *e = (ta_error *)(uintptr_t)1;
        CHECK_STATUS(ta_event_error(ev[i], &e), TA_STATUS_PENDING);
        CHECK(e == (ta_error *)(uintptr_t)1, "ta_event_error wrote its output while pending");
    }
    CHECK_STATUS(ta_tensor_wait(T, SECONDS(0.01), NULL), TA_STATUS_TIMEOUT);
    gate_open(&g);

    /* Every event reports the kernel's failure, with the kernel's error object. */
    CHECK_STATUS(ta_event_wait(ev[0], SECONDS(60)), TA_STATUS_KERNEL_FAILED);
    ta_error *orig = event_error(ev[0]);
    CHECK_STATUS((ta_status)atomic_get(&set_error_status), TA_STATUS_OK);
    check_is_original(orig, NULL, "the failing kernel's event");
    for (int i = 1; i < nops; i++) {
        ta_status s = ta_event_wait(ev[i], SECONDS(60));
        CHECK(s == TA_STATUS_KERNEL_FAILED, "op %d (%s): ta_event_wait gave %s", i, what[i], ta_status_name(s));
        CHECK_STATUS(ta_event_poll(ev[i]), TA_STATUS_KERNEL_FAILED);
        ta_error *e = event_error(ev[i]);
        check_is_original(e, orig, what[i]);
        ta_error_free(e);
    }
    printf("events: the kernel's error reached all %d downstream operations unchanged\n", nops - 1);

    /* The failed copies did not touch host memory; the poisoned-input kernel never ran. */
    CHECK(memcmp(host_t, sentinel, sizeof host_t) == 0, "a failed copy_out wrote host memory (T)");
    CHECK(memcmp(host_u, sentinel, sizeof host_u) == 0, "a failed copy_out wrote host memory (U)");
    CHECK(atomic_get(&kernel_calls) == 0, "a kernel with a poisoned input was called %ld times", kernel_calls);

    /* Waiting on any poisoned tensor reports the same error. */
    ta_tensor *poisoned[4] = { T, U, V, W };
    const char *pname[4] = { "T", "U", "V", "W" };
    for (int i = 0; i < 4; i++) {
        ta_error *e = NULL;
        ta_status s = ta_tensor_wait(poisoned[i], SECONDS(60), &e);
        CHECK(s == TA_STATUS_KERNEL_FAILED, "ta_tensor_wait(%s) gave %s", pname[i], ta_status_name(s));
        char where[64];
        snprintf(where, sizeof where, "ta_tensor_wait(%s)", pname[i]);
        check_is_original(e, orig, where);
        ta_error_free(e);
    }
    printf("tensors: T, U, V and W are poisoned with the same error object\n");

    /* Callbacks: each fired once, with the failure status. */
    for (int i = 0; i < nops; i++) {
        CHECK(atomic_get(&cb_count[i]) == 1, "op %d callback fired %ld times", i, atomic_get(&cb_count[i]));
        CHECK(atomic_get(&cb_status[i]) == TA_STATUS_KERNEL_FAILED, "op %d callback status %s", i,
              ta_status_name((ta_status)atomic_get(&cb_status[i])));
    }
    /* A callback attached after completion fires at once, on this thread. */
    {
        long before = atomic_get(&cb_count[MAX_OPS - 1]);
        MUST(ta_event_on_complete(ev[3], on_done, (void *)(intptr_t)(MAX_OPS - 1)));
        CHECK(atomic_get(&cb_count[MAX_OPS - 1]) == before + 1, "late ta_event_on_complete did not fire at once");
        CHECK(atomic_get(&cb_status[MAX_OPS - 1]) == TA_STATUS_KERNEL_FAILED, "late callback status");
    }

    /* Completion queue: one entry per operation, each with the status and the same error. */
    {
        ta_completion c[MAX_OPS + 4];
        size_t cnt = 0;
        MUST(ta_cq_poll(cq, c, MAX_OPS + 4, &cnt));
        CHECK(cnt == (size_t)nops, "completion queue has %zu entries, want %d", cnt, nops);
        int seen[MAX_OPS] = { 0 };
        for (size_t k = 0; k < cnt; k++) {
            int i = (int)c[k].tag;
            CHECK(i >= 0 && i < nops && !seen[i], "bad or repeated tag %llu", (unsigned long long)c[k].tag);
            if (i >= 0 && i < nops) seen[i] = 1;
            CHECK(c[k].status == TA_STATUS_KERNEL_FAILED, "entry %d status %s", i, ta_status_name(c[k].status));
            char where[64];
            snprintf(where, sizeof where, "completion entry %d", i);
            check_is_original(c[k].error, orig, where);
            ta_error_free(c[k].error);
        }
    }
    printf("callbacks and completion queue: every operation reported the kernel's failure once\n");

    /* Messages are copied with truncation; the full length is reported. */
    {
        char small[5];
        size_t len = 0;
        MUST(ta_error_message(orig, small, sizeof small, &len));
        CHECK(len == strlen(KERNEL_MSG) && strcmp(small, "zero") == 0, "truncated message '%s', len %zu", small, len);
        MUST(ta_error_message(orig, NULL, 0, &len));
        CHECK(len == strlen(KERNEL_MSG), "length-only query gave %zu", len);
    }

    /* Later updates still fail with the same error: the poison persists. */
    {
        ta_submit p = on_runtime(rt);
        ta_event *e1 = NULL;
        MUST(ta_scale(T, real(1), &p, &e1, NULL));
        CHECK_STATUS(wait_event(e1, 60), TA_STATUS_KERNEL_FAILED);
        ta_error *e = event_error(e1);
        check_is_original(e, orig, "a later ta_scale(T)");
        ta_error_free(e);
        ta_event_free(e1);
    }

    /* Pure overwrites clear the poison: fill (T), copy_in (U), a WRITE kernel (V), copy (W). */
    {
        ta_submit p = on_runtime(rt);
        double host[N], want[N];
        ta_event *e1 = NULL;
        MUST(ta_fill(T, real(3), &p, &e1, NULL));
        CHECK_STATUS(wait_event(e1, 60), TA_STATUS_OK);
        ta_event_free(e1);
        CHECK_STATUS(ta_tensor_wait(T, SECONDS(60), NULL), TA_STATUS_OK);
        MUST(ta_scale(T, real(2), &p, NULL, NULL));
        read_back(T, rt, host, N);
        for (int i = 0; i < N; i++) want[i] = 6;
        CHECK(memcmp(host, want, sizeof host) == 0, "T after fill + scale");

        MUST(ta_copy_in(U, init, 1, &n, NULL, &p, NULL, NULL));
        MUST(ta_axpy(U, real(1), T, &p, NULL, NULL));
        read_back(U, rt, host, N);
        for (int i = 0; i < N; i++) want[i] = init[i] + 6;
        CHECK(memcmp(host, want, sizeof host) == 0, "U after copy_in + axpy");

        ta_access w = { V, TA_MODE_WRITE };
        MUST(ta_kernel_submit(write_fives, NULL, "write_fives", &w, 1, &p, NULL, NULL));
        read_back(V, rt, host, N);
        for (int i = 0; i < N; i++) want[i] = 5;
        CHECK(memcmp(host, want, sizeof host) == 0, "V after a WRITE kernel");

        MUST(ta_copy(W, X, &p, NULL, NULL));
        read_back(W, rt, host, N);
        CHECK(memcmp(host, init, sizeof host) == 0, "W after copy");
        for (int i = 0; i < 4; i++)
            CHECK(ta_tensor_wait(poisoned[i], SECONDS(60), NULL) == TA_STATUS_OK, "%s still poisoned", pname[i]);
    }
    printf("overwrites: ta_fill, ta_copy_in, a WRITE kernel and ta_copy each produced a clean value\n");

    /* A kernel failing without a message: the message names its return value. */
    {
        ta_submit p = on_runtime(rt);
        ta_event *e1 = NULL;
        ta_access acc = { X, TA_MODE_UPDATE };
        MUST(ta_kernel_submit(silent_failure, NULL, NULL, &acc, 1, &p, &e1, NULL));
        CHECK_STATUS(wait_event(e1, 60), TA_STATUS_KERNEL_FAILED);
        ta_error *e = event_error(e1);
        char msg[256], origin[64];
        int64_t code = 0;
        ta_error_code(e, &code);
        err_message(e, msg, sizeof msg);
        err_origin(e, origin, sizeof origin);
        CHECK(code == 23 && strstr(msg, "23") != NULL && strlen(origin) > 0,
              "silent failure: code %lld, message '%s', origin '%s'", (long long)code, msg, origin);
        printf("a kernel without a message: code %lld, origin '%s', message '%s'\n", (long long)code, origin, msg);
        ta_error_free(e);
        ta_event_free(e1);
    }

    ta_error_free(orig);
    for (int i = 0; i < nops; i++) MUST(ta_event_free(ev[i]));
    ta_tensor_free(T); ta_tensor_free(X); ta_tensor_free(U); ta_tensor_free(V); ta_tensor_free(W);
    MUST(ta_cq_free(cq));
    MUST(ta_runtime_free(rt));
    gate_destroy(&g);
    return finish("test_errors");
}
