/*
 * test_kernel_ctx: what a running user kernel may do with its ta_kernel_ctx.
 *
 * - ta_kernel_parallel_for covers every index exactly once, in disjoint
 *   pieces, on no more distinct threads than the runtime has workers
 *   (pthread_self() recorded per piece); bad arguments give statuses.
 * - The ctx is valid only during the call and on that thread: after the
 *   kernel returned, or from another thread, ta_kernel_set_error and
 *   ta_kernel_parallel_for give TA_STATUS_INVALID_HANDLE (NULL ctx:
 *   TA_STATUS_NULL_HANDLE).
 * - Blocking inside a kernel: ta_tensor_wait on a tensor the kernel accesses
 *   (read or update) and ta_event_wait on an operation that waits for the
 *   kernel give TA_STATUS_WOULD_DEADLOCK instead of hanging; waiting on an
 *   unrelated tensor whose work is queued on the same (single) worker helps
 *   run that work and succeeds.
 * - Kernels and callbacks may submit operations.
 */
#include "check.h"

#define N 10007
#define MAX_PIECES 4096

/* ---- parallel_for ------------------------------------------------------- */

struct pfor {
    long hits[N + 200];
    double *x;           /* the kernel's output view (dense) */
    ptrdiff_t stride;
    long npieces;
    size_t begin[MAX_PIECES], end[MAX_PIECES];
    pthread_t thread[MAX_PIECES];
    pthread_t kernel_thread;
    long busy_us; /* busy time per piece */
    /* results of calls made inside the kernel */
    ta_status st_main, st_offset, st_single, st_empty, st_reversed, st_null_fn;
};

static void piece(size_t b, size_t e, void *ud) {
    struct pfor *p = ud;
    long k = atomic_inc(&p->npieces) - 1;
    if (k < MAX_PIECES) {
        p->begin[k] = b;
        p->end[k] = e;
        p->thread[k] = pthread_self();
    }
    for (size_t i = b; i < e; i++) {
        atomic_inc(&p->hits[i]);
        if (i < N) p->x[(ptrdiff_t)i * p->stride] = 2.0 * (double)i;
    }
    if (p->busy_us) { /* give the other workers time to take pieces */
        double until = now_s() + 1e-6 * p->busy_us;
        while (now_s() < until) {}
    }
}

static ta_status pfor_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n;
    struct pfor *p = ud;
    p->kernel_thread = pthread_self();
    p->x = v[0].data;
    p->stride = v[0].strides[0];
    p->st_main = ta_kernel_parallel_for(ctx, 0, N, 64, piece, p);
    return TA_STATUS_OK;
}

/* Edge cases, in a second kernel (counted separately). */
static ta_status pfor_edges(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n;
    struct pfor *p = ud;
    p->x = v[0].data;
    p->stride = 0; /* write x[0] only */
    p->st_offset = ta_kernel_parallel_for(ctx, N, N + 100, 7, piece, p); /* [N, N+100) */
    p->st_single = ta_kernel_parallel_for(ctx, N + 100, N + 110, 1000, piece, p);
    p->st_empty = ta_kernel_parallel_for(ctx, 5, 5, 1, piece, p);
    p->st_reversed = ta_kernel_parallel_for(ctx, 9, 3, 1, piece, p);
    p->st_null_fn = ta_kernel_parallel_for(ctx, 0, 10, 1, NULL, p);
    return TA_STATUS_OK;
}

static void test_parallel_for(void) {
    enum { THREADS = 3 };
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(THREADS, &rt, NULL));
    size_t threads = 0;
    MUST(ta_runtime_threads(rt, &threads));
    CHECK(threads == THREADS, "ta_runtime_threads = %zu, want %d", threads, THREADS);

    static struct pfor p;
    memset(&p, 0, sizeof p);
    p.busy_us = 200;
    ta_tensor *x = zeros1(TA_DTYPE_F64, N);
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_access acc = { x, TA_MODE_WRITE };
    MUST(ta_kernel_submit(pfor_kernel, &p, "pfor_kernel", &acc, 1, &o, &ev, NULL));
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
    ta_event_free(ev);
    CHECK_STATUS(p.st_main, TA_STATUS_OK);

    long np = atomic_get(&p.npieces), bad = 0;
    CHECK(np <= MAX_PIECES, "%ld pieces", np);
    for (size_t i = 0; i < N; i++) bad += atomic_get(&p.hits[i]) != 1;
    CHECK(bad == 0, "%ld indices were not visited exactly once", bad);
    long covered = 0;
    pthread_t seen[MAX_PIECES + 1];
    int nseen = 0;
    for (long k = 0; k < np && k < MAX_PIECES; k++) {
        CHECK(p.begin[k] < p.end[k] && p.end[k] <= N, "piece [%zu, %zu)", p.begin[k], p.end[k]);
        covered += (long)(p.end[k] - p.begin[k]);
        int known = 0;
        for (int s = 0; s < nseen; s++) known |= pthread_equal(seen[s], p.thread[k]);
        if (!known) seen[nseen++] = p.thread[k];
    }
    CHECK(covered == N, "pieces cover %ld items, want %d (overlap or gaps)", covered, N);
    int kernel_known = 0;
    for (int s = 0; s < nseen; s++) kernel_known |= pthread_equal(seen[s], p.kernel_thread);
    int distinct = nseen + !kernel_known; /* the kernel's own thread counts too */
    CHECK(distinct >= 1 && (size_t)distinct <= threads, "%d distinct threads ran the kernel and its pieces, runtime has %zu",
          distinct, threads);

    double xs[N];
    read_back(x, rt, xs, N);
    bad = 0;
    for (size_t i = 0; i < N; i++) bad += xs[i] != 2.0 * (double)i;
    CHECK(bad == 0, "%ld elements written by the pieces are wrong", bad);
    printf("parallel_for: %d items in %ld pieces on %d distinct threads (runtime: %zu workers), each once\n", N, np,
           distinct, threads);

    /* Edge cases. */
    memset(p.hits, 0, sizeof p.hits);
    atomic_set(&p.npieces, 0);
    p.busy_us = 0;
    acc.mode = TA_MODE_UPDATE;
    MUST(ta_kernel_submit(pfor_edges, &p, "pfor_edges", &acc, 1, &o, &ev, NULL));
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
    ta_event_free(ev);
    CHECK_STATUS(p.st_offset, TA_STATUS_OK);
    CHECK_STATUS(p.st_single, TA_STATUS_OK);
    CHECK_STATUS(p.st_empty, TA_STATUS_OK);
    CHECK_STATUS(p.st_reversed, TA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(p.st_null_fn, TA_STATUS_NULL_POINTER);
    bad = 0;
    for (size_t i = 0; i < N + 200; i++) bad += atomic_get(&p.hits[i]) != (i >= N && i < N + 110);
    CHECK(bad == 0, "offset/single/empty ranges: %ld indices visited wrongly", bad);
    int single_pieces = 0;
    for (long k = 0; k < atomic_get(&p.npieces); k++) single_pieces += p.begin[k] >= N + 100;
    CHECK(single_pieces == 1, "a range smaller than the grain ran in %d pieces", single_pieces);
    printf("parallel_for: offset range, range below the grain (one piece), empty range; begin > end and a NULL "
           "function give statuses\n");

    ta_tensor_free(x);
    MUST(ta_runtime_free(rt));
}

/* ---- the ctx outside its call ------------------------------------------ */

static ta_kernel_ctx *saved_ctx;
static ta_status other_thread_status, other_thread_pfor;

static void noop_range(size_t b, size_t e, void *ud) { (void)b; (void)e; (void)ud; }

static void *use_ctx_from_other_thread(void *arg) {
    other_thread_status = ta_kernel_set_error((ta_kernel_ctx *)arg, "from another thread");
    other_thread_pfor = ta_kernel_parallel_for((ta_kernel_ctx *)arg, 0, 10, 1, noop_range, NULL);
    return NULL;
}

static ta_status keep_ctx(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud;
    saved_ctx = ctx;
    pthread_t th;
    pthread_create(&th, NULL, use_ctx_from_other_thread, ctx);
    pthread_join(th, NULL);
    return TA_STATUS_OK;
}

static void test_ctx_validity(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(1, &rt, NULL));
    ta_tensor *t = zeros1(TA_DTYPE_F64, 4);
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_access acc = { t, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(keep_ctx, NULL, "keep_ctx", &acc, 1, &o, &ev, NULL));
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
    CHECK_STATUS(other_thread_status, TA_STATUS_INVALID_HANDLE);
    CHECK_STATUS(other_thread_pfor, TA_STATUS_INVALID_HANDLE);
    CHECK_STATUS(ta_kernel_set_error(saved_ctx, "too late"), TA_STATUS_INVALID_HANDLE);
    CHECK_STATUS(ta_kernel_parallel_for(saved_ctx, 0, 10, 1, noop_range, NULL), TA_STATUS_INVALID_HANDLE);
    CHECK_STATUS(ta_kernel_set_error(NULL, "no ctx"), TA_STATUS_NULL_HANDLE);
    /* The late call changed nothing: the kernel's operation still succeeded. */
    CHECK_STATUS(ta_event_poll(ev), TA_STATUS_OK);
    CHECK_STATUS(ta_tensor_wait(t, SECONDS(10), NULL), TA_STATUS_OK);
    printf("kernel ctx: INVALID_HANDLE after the kernel returned and from another thread; NULL_HANDLE for NULL\n");
    ta_event_free(ev);
    ta_tensor_free(t);
    MUST(ta_runtime_free(rt));
}

/* ---- blocking inside a kernel ------------------------------------------ */

struct waits {
    const ta_tensor *read_t, *upd_t, *other;
    ta_event *later; /* an operation that waits for this kernel; set before the gate opens */
    gate go;
    ta_status wait_read, wait_upd, wait_event, wait_other;
    double other_secs;
};

static ta_status waiting_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ctx;
    struct waits *w = ud;
    gate_pass(&w->go);
    w->wait_read = ta_tensor_wait(w->read_t, SECONDS(30), NULL);
    w->wait_upd = ta_tensor_wait(w->upd_t, SECONDS(30), NULL);
    w->wait_event = ta_event_wait(w->later, SECONDS(30));
    double t0 = now_s();
    w->wait_other = ta_tensor_wait(w->other, SECONDS(30), NULL);
    w->other_secs = now_s() - t0;
    return TA_STATUS_OK;
}

static void test_blocking_in_kernel(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(1, &rt, NULL)); /* one worker: a wait that does not help would hang */
    ta_tensor *r = zeros1(TA_DTYPE_F64, 4), *u = zeros1(TA_DTYPE_F64, 4), *other = zeros1(TA_DTYPE_F64, 4);
    static struct waits w;
    memset(&w, 0, sizeof w);
    gate_init(&w.go);
    w.read_t = r;
    w.upd_t = u;
    w.other = other;
    ta_submit o = on_runtime(rt);
    ta_event *kev = NULL;
    ta_access acc[2] = { { r, TA_MODE_READ }, { u, TA_MODE_UPDATE } };
    MUST(ta_kernel_submit(waiting_kernel, &w, "waiting_kernel", acc, 2, &o, &kev, NULL));
    CHECK(gate_await_entered(&w.go, 1, 60), "the waiting kernel did not start");
    /* Queued behind the kernel on the only worker: */
    MUST(ta_scale(u, real(2), &o, &w.later, NULL));  /* waits for the kernel */
    MUST(ta_fill(other, real(4), &o, NULL, NULL));   /* independent, but needs the worker */
    gate_open(&w.go);
    CHECK_STATUS(wait_event(kev, 120), TA_STATUS_OK);
    CHECK_STATUS(w.wait_read, TA_STATUS_WOULD_DEADLOCK);
    CHECK_STATUS(w.wait_upd, TA_STATUS_WOULD_DEADLOCK);
    CHECK_STATUS(w.wait_event, TA_STATUS_WOULD_DEADLOCK);
    CHECK_STATUS(w.wait_other, TA_STATUS_OK);
    double got[4];
    read_back(other, rt, got, 4);
    CHECK(got[0] == 4 && got[3] == 4, "the fill the kernel waited for did not run");
    CHECK_STATUS(wait_event(w.later, 60), TA_STATUS_OK);
    printf("blocking in a kernel: waits on its own operands -> %s, on its successor -> %s; a wait on queued "
           "independent work helped run it (%.3f s) -> %s\n", ta_status_name(w.wait_read),
           ta_status_name(w.wait_event), w.other_secs, ta_status_name(w.wait_other));
    ta_event_free(kev);
    ta_event_free(w.later);
    ta_tensor_free(r); ta_tensor_free(u); ta_tensor_free(other);
    gate_destroy(&w.go);
    MUST(ta_runtime_free(rt));
}

/* ---- submitting from kernels and callbacks ------------------------------ */

struct nested {
    const ta_runtime *rt;
    ta_tensor *target;
    ta_status from_kernel, from_callback;
    long callback_done;
};

static ta_status submitting_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ctx;
    struct nested *s = ud;
    ta_submit o = on_runtime(s->rt);
    s->from_kernel = ta_fill(s->target, real(3), &o, NULL, NULL);
    return TA_STATUS_OK;
}

static void submitting_callback(ta_status status, void *ud) {
    struct nested *s = ud;
    ta_submit o = on_runtime(s->rt);
    s->from_callback = status == TA_STATUS_OK ? ta_scale(s->target, real(5), &o, NULL, NULL) : status;
    atomic_set(&s->callback_done, 1);
}

static void test_nested_submission(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    static struct nested s;
    s.rt = rt;
    s.target = zeros1(TA_DTYPE_F64, 4);
    s.from_kernel = s.from_callback = 0xffff;
    ta_tensor *t = zeros1(TA_DTYPE_F64, 1);
    ta_submit o = on_runtime(rt);
    o.callback = submitting_callback;
    o.callback_userdata = &s;
    ta_access acc = { t, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(submitting_kernel, &s, "submitting_kernel", &acc, 1, &o, NULL, NULL));
    double deadline = now_s() + 60;
    while (!atomic_get(&s.callback_done) && now_s() < deadline) sleep_ms(1);
    CHECK(atomic_get(&s.callback_done), "the callback did not run");
    CHECK_STATUS(s.from_kernel, TA_STATUS_OK);
    CHECK_STATUS(s.from_callback, TA_STATUS_OK);
    MUST(ta_tensor_wait(s.target, SECONDS(60), NULL)); /* both nested operations were enrolled by now */
    double got[4] = { 0 };
    read_back(s.target, rt, got, 4);
    CHECK(got[0] == 15 && got[3] == 15, "fill(3) from the kernel then scale(5) from its callback gave %g", got[0]);
    printf("nested submission: from a kernel and from its callback, in that order\n");
    ta_tensor_free(t);
    ta_tensor_free(s.target);
    MUST(ta_runtime_free(rt));
}

int main(void) {
    test_parallel_for();
    test_ctx_validity();
    test_blocking_in_kernel();
    test_nested_submission();
    return finish("test_kernel_ctx");
}
