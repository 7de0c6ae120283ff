/*
 * test_release: releasing handles never blocks and never cancels (SPEC §2.1).
 *
 * A kernel blocks at a gate while holding an UPDATE access on A, a tensor that
 * wraps user memory (ta_tensor_wrap with a release callback). Behind it, 10^4
 * operations on A, B and C are submitted, each with a callback and an event;
 * a few also report to a completion queue. Then every handle is freed while
 * all of that is pending: the events, the tensors, the queue. The gate opens
 * and ta_runtime_free drains the runtime.
 *
 * Checks: every callback ran exactly once, with TA_STATUS_OK; the results in
 * host memory equal a sequential plain-C replay; the release callback of the
 * wrapped memory ran exactly once, after every operation that accessed A had
 * completed, and saw A's final values. Under valgrind (the sysalloc build)
 * the whole run must be free of leaks.
 *
 * First, the order of reports in two steps, deterministically: an operation
 * T3 waits for T1 (on a wrapped tensor W) and for T2 (on D). T1 finishes
 * first; its callback lets T2 finish and then watches for half a second.
 * T3, made ready by T2's finish, must not start before T1's callback has
 * returned, and W's release (behind T3) must come after it too.
 */
#include "check.h"

#define M 16        /* elements per tensor */
#define NOPS 10000  /* operations behind the blocker */

static ta_runtime *rt;
static gate g;
static long cb_count[NOPS + 2];
static long cb_bad_status[NOPS + 2];
static int touches_a[NOPS + 2];

static long release_calls;
static long release_early;  /* operations on A that had not completed when A was released */
static long release_wrong;  /* elements of A that differed from the replay at release time */
static double want_a[M];

static void on_done(ta_status status, void *userdata) {
    long k = (long)(intptr_t)userdata;
    if (status != TA_STATUS_OK) atomic_inc(&cb_bad_status[k]);
    atomic_inc(&cb_count[k]);
}

/* Runs once, after the last access to A: checks that, then frees the memory. */
static void release_a(void *userdata, void *data) {
    (void)userdata;
    long early = 0, wrong = 0;
    for (long k = 0; k < NOPS + 2; k++)
        if (touches_a[k] && atomic_get(&cb_count[k]) != 1) early++;
    for (int j = 0; j < M; j++)
        if (((double *)data)[j] != want_a[j]) wrong++;
    atomic_set(&release_early, early);
    atomic_set(&release_wrong, wrong);
    atomic_inc(&release_calls);
    free(data);
}

/* The blocker: waits at the gate, then adds 1 to every element of A. */
static ta_status blocker(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ud; (void)ctx;
    gate_pass(&g);
    double *a = v[0].data;
    for (size_t j = 0; j < v[0].extents[0]; j++) a[(ptrdiff_t)j * v[0].strides[0]] += 1.0;
    return TA_STATUS_OK;
}

/* a[j] += j (an UPDATE kernel). */
static ta_status add_index(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ud; (void)ctx;
    double *a = v[0].data;
    for (size_t j = 0; j < v[0].extents[0]; j++) a[(ptrdiff_t)j * v[0].strides[0]] += (double)j;
    return TA_STATUS_OK;
}

static long callbacks_fired(void) {
    long s = 0;
    for (long k = 0; k < NOPS + 2; k++) s += atomic_get(&cb_count[k]);
    return s;
}

/* ---- successors start after their predecessors' reports ---------------- */

static gate t1_gate, t2_gate;
static ta_event *t2_event;
static long t1_callback_returned, t3_started, t3_saw_callback_returned = -1, w_released_after_callback = -1;

/* T1's callback: let T2 finish, wait until it has, then give T3 half a
 * second in which it must not start. */
static void t1_callback(ta_status status, void *userdata) {
    (void)status; (void)userdata;
    gate_open(&t2_gate);
    double deadline = now_s() + 60;
    while (ta_event_poll(t2_event) == TA_STATUS_PENDING && now_s() < deadline) sleep_ms(1);
    deadline = now_s() + 0.5;
    while (!atomic_get(&t3_started) && now_s() < deadline) sleep_ms(1);
    atomic_set(&t1_callback_returned, 1);
}

static ta_status t3_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud; (void)ctx;
    atomic_set(&t3_saw_callback_returned, atomic_get(&t1_callback_returned));
    atomic_set(&t3_started, 1);
    return TA_STATUS_OK;
}

static void release_w(void *userdata, void *data) {
    (void)userdata;
    atomic_set(&w_released_after_callback, atomic_get(&t1_callback_returned));
    free(data);
}

static void successors_start_after_reports(void) {
    ta_runtime *r = NULL;
    MUST(ta_runtime_new(2, &r, NULL));
    gate_init(&t1_gate);
    gate_init(&t2_gate);
    size_t m = 4;
    double *wmem = calloc(m, sizeof(double));
    ta_tensor *W = NULL, *D = zeros1(TA_DTYPE_F64, m);
    MUST(ta_tensor_wrap(TA_DTYPE_F64, 1, &m, NULL, TA_ORDER_ROW_MAJOR, wmem, release_w, NULL, &W, NULL));

    ta_submit o = on_runtime(r);
    o.callback = t1_callback;
    ta_access a1 = { W, TA_MODE_READ };
    MUST(ta_kernel_submit(gate_kernel, &t1_gate, "T1", &a1, 1, &o, NULL, NULL));
    o = on_runtime(r);
    ta_access a2 = { D, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(gate_kernel, &t2_gate, "T2", &a2, 1, &o, &t2_event, NULL));
    CHECK(gate_await_entered(&t1_gate, 1, 60) && gate_await_entered(&t2_gate, 1, 60),
          "T1 and T2 did not both start");
    ta_access a3[2] = { { W, TA_MODE_UPDATE }, { D, TA_MODE_READ } };
    ta_event *t3_event = NULL;
    MUST(ta_kernel_submit(t3_kernel, NULL, "T3", a3, 2, &o, &t3_event, NULL));
    MUST(ta_tensor_free(W)); /* the release goes behind T3 */
    gate_open(&t1_gate);
    CHECK_STATUS(wait_event(t3_event, 60), TA_STATUS_OK);
    MUST(ta_runtime_free(r));
    CHECK(atomic_get(&t3_saw_callback_returned) == 1,
          "T3 started before the callback of its predecessor T1 had returned (it saw %ld)",
          atomic_get(&t3_saw_callback_returned));
    CHECK(atomic_get(&w_released_after_callback) == 1,
          "the wrapped tensor was released before the callback of an operation on it had returned (%ld)",
          atomic_get(&w_released_after_callback));
    ta_event_free(t2_event);
    ta_event_free(t3_event);
    ta_tensor_free(D);
    gate_destroy(&t1_gate);
    gate_destroy(&t2_gate);
}

int main(void) {
    successors_start_after_reports();
    size_t m = M;
    double a0[M], ra[M], rb[M], rc[M], host_b[M], host_c[M];
    gate_init(&g);
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_cq *cq = NULL;
    MUST(ta_cq_new(&cq, NULL));

    double *amem = malloc(M * sizeof(double));
    if (!amem) return 2;
    for (int j = 0; j < M; j++) a0[j] = amem[j] = (double)(j % 5) - 2.0;
    ta_tensor *A = NULL, *B = zeros1(TA_DTYPE_F64, M), *C = zeros1(TA_DTYPE_F64, M);
    MUST(ta_tensor_wrap(TA_DTYPE_F64, 1, &m, NULL, TA_ORDER_ROW_MAJOR, amem, release_a, NULL, &A, NULL));

    /* The plain-C replay, computed first (the release callback compares with want_a). */
    for (int j = 0; j < M; j++) {
        ra[j] = a0[j] + 1.0; /* the blocker */
        rb[j] = rc[j] = 0.0;
    }
    for (long k = 0; k < NOPS; k++)
        for (int j = 0; j < M; j++) switch (k % 5) {
            case 0: rb[j] += ra[j]; break;
            case 1: ra[j] = -ra[j]; break;
            case 2: rc[j] = ra[j]; break;
            case 3: ra[j] += (double)j; break;
            case 4: rc[j] += 0.5 * rb[j]; break;
            }
    memcpy(want_a, ra, sizeof ra);

    ta_submit o = on_runtime(rt);
    ta_access blk = { A, TA_MODE_UPDATE };
    ta_event *bev = NULL;
    o.callback = on_done;
    o.callback_userdata = (void *)(intptr_t)NOPS;
    touches_a[NOPS] = 1;
    MUST(ta_kernel_submit(blocker, NULL, "blocker", &blk, 1, &o, &bev, NULL));
    CHECK(gate_await_entered(&g, 1, 60), "the blocker did not start");

    double t0 = now_s();
    for (long k = 0; k < NOPS; k++) {
        ta_event *ev = NULL;
        o = on_runtime(rt);
        o.callback = on_done;
        o.callback_userdata = (void *)(intptr_t)k;
        if (k % 1000 == 7) {
            o.cq = cq;
            o.cq_tag = (uint64_t)k;
        }
        ta_access acc = { A, TA_MODE_UPDATE };
        switch (k % 5) {
        case 0: MUST(ta_axpy(B, real(1), A, &o, &ev, NULL)); touches_a[k] = 1; break;
        case 1: MUST(ta_scale(A, real(-1), &o, &ev, NULL)); touches_a[k] = 1; break;
        case 2: MUST(ta_copy(C, A, &o, &ev, NULL)); touches_a[k] = 1; break;
        case 3: MUST(ta_kernel_submit(add_index, NULL, "add_index", &acc, 1, &o, &ev, NULL)); touches_a[k] = 1; break;
        case 4: MUST(ta_axpy(C, real(0.5), B, &o, &ev, NULL)); break;
        }
        MUST(ta_event_free(ev)); /* freed while pending */
    }
    /* Read the results back into host memory (the last operations). */
    o = on_runtime(rt);
    o.callback = on_done;
    o.callback_userdata = (void *)(intptr_t)(NOPS + 1);
    MUST(ta_copy_out(B, host_b, M, NULL, &o, NULL, NULL));
    o.callback_userdata = NULL; /* (no callback: NOPS + 1 is counted once) */
    o.callback = NULL;
    MUST(ta_copy_out(C, host_c, M, NULL, &o, NULL, NULL));
    double t_submit = now_s() - t0;

    /* Free every handle while everything is pending. */
    CHECK_STATUS(ta_event_poll(bev), TA_STATUS_PENDING);
    MUST(ta_event_free(bev));
    MUST(ta_tensor_free(A));
    MUST(ta_tensor_free(B));
    MUST(ta_tensor_free(C));
    MUST(ta_cq_free(cq));
    CHECK_STATUS(ta_tensor_wait(A, 0, NULL), TA_STATUS_STALE_HANDLE);
    long fired_before = callbacks_fired();
    CHECK(fired_before == 0, "%ld callbacks fired before the blocker was released", fired_before);
    CHECK(atomic_get(&release_calls) == 0, "A was released while operations were pending");
    printf("submitted %d operations behind a blocker in %.3f s; freed every handle while pending\n", NOPS + 2,
           t_submit);

    gate_open(&g);
    t0 = now_s();
    MUST(ta_runtime_free(rt)); /* drains everything submitted */
    printf("ta_runtime_free drained them in %.3f s\n", now_s() - t0);

    long twice = 0, never = 0, bad = 0;
    for (long k = 0; k < NOPS + 2; k++) {
        long c = atomic_get(&cb_count[k]);
        if (c == 0) never++;
        if (c > 1) twice++;
        bad += atomic_get(&cb_bad_status[k]);
    }
    CHECK(never == 0 && twice == 0, "callbacks: %ld never fired, %ld fired more than once", never, twice);
    CHECK(bad == 0, "%ld callbacks reported a failure", bad);
    CHECK(memcmp(host_b, rb, sizeof rb) == 0, "B differs from the sequential replay");
    CHECK(memcmp(host_c, rc, sizeof rc) == 0, "C differs from the sequential replay");
    CHECK(atomic_get(&release_calls) == 1, "the release callback ran %ld times", atomic_get(&release_calls));
    CHECK(atomic_get(&release_early) == 0, "A was released before %ld of its operations completed",
          atomic_get(&release_early));
    CHECK(atomic_get(&release_wrong) == 0, "%ld elements of A were wrong at release", atomic_get(&release_wrong));
    printf("every callback fired exactly once; results match the replay; the wrapped memory was released "
           "once, after its last access\n");
    gate_destroy(&g);
    return finish("test_release");
}
