/*
 * test_observe: the counters (ta_runtime_stats, ta_runtime_worker_busy_ns),
 * trace recording (ta_runtime_trace_start / _stop, bounded capacity) and the
 * pending-work dump (ta_runtime_dump, ta_runtime_dump_string) of a runtime.
 *
 * Counters: a known program with exact expected counts: two operations on Y
 * that fail (a kernel that fails, then a reader of its poisoned output),
 * then a gate kernel on X with a chain of 9 updates behind it; while the gate
 * holds, 10 operations are pending and the queue is empty; a refused
 * submission is not counted; every operation ready at its submission was
 * taken from the ready queue (3 steals) and the chain ran inline behind the
 * gate; after a wait for the runtime, the busy time of every worker is
 * counted (the total and the per-worker figures agree). A cancelled
 * shutdown counts its cancelled operations.
 *
 * Trace: a diamond (A writes X; B and C read it; D updates it) and a failing
 * E, written to a file (TRACE_OUT, default /tmp/ta_test_observe.json): every
 * operation appears exactly once with its outcome; the file is checked in
 * depth (intervals, edges) by scripts/test-observe.sh. A capacity of 3 with
 * 10 operations keeps the last 3 and writes 7 dropped.
 *
 * Dump: a kernel blocked on a flag that is set only at the end, with a chain
 * behind it: the dump names the running blocker, its waiters, what each
 * waits for and on which tensor; the DOT form has the edges.
 */
#include "check.h"

#include <unistd.h>

static ta_status inc_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ud; (void)ctx;
    double *x = v[0].data;
    x[0] += 1.0;
    return TA_STATUS_OK;
}

static ta_status read_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ctx;
    if (ud) atomic_add((long *)ud, (long)((const double *)v[0].data)[0]);
    return TA_STATUS_OK;
}

static ta_status fail_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud;
    ta_kernel_set_error(ctx, "fails on purpose");
    return TA_STATUS_KERNEL_FAILED;
}

static ta_tensor *scalar(void) {
    size_t ext[1] = {1};
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext, TA_ORDER_ROW_MAJOR, &t, NULL));
    return t;
}

static void submit1(ta_kernel_fn k, void *ud, const char *name, ta_tensor *t, ta_mode mode, const ta_runtime *rt) {
    ta_access a = {t, mode};
    ta_submit opts;
    memset(&opts, 0, sizeof opts);
    opts.runtime = rt;
    MUST(ta_kernel_submit(k, ud, name, &a, 1, &opts, NULL, NULL));
}

/* Blocks at the gate given as userdata, then increments. */
static ta_status gate_inc_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    gate_pass((gate *)ud);
    return inc_kernel(v, n, NULL, ctx);
}

/* The diamond A -> {B, C} -> D on X (A held at a gate until all four are
 * enrolled, so every edge is a real wait), and E failing on Y. */
static void diamond(ta_tensor *x, ta_tensor *y, long *sum, const ta_runtime *rt) {
    gate g;
    gate_init(&g);
    submit1(gate_inc_kernel, &g, "A", x, TA_MODE_UPDATE, rt);
    submit1(read_kernel, sum, "B", x, TA_MODE_READ, rt);
    submit1(read_kernel, sum, "C", x, TA_MODE_READ, rt);
    submit1(inc_kernel, NULL, "D", x, TA_MODE_UPDATE, rt);
    submit1(fail_kernel, NULL, "E", y, TA_MODE_WRITE, rt);
    gate_open(&g);
    CHECK_STATUS(ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, NULL), TA_STATUS_OK);
    gate_destroy(&g);
}

static ta_stats stats_of(const ta_runtime *rt) {
    ta_stats s;
    memset(&s, 0xab, sizeof s);
    s.struct_size = sizeof s;
    CHECK_STATUS(ta_runtime_stats(rt, &s), TA_STATUS_OK);
    return s;
}

static void *shutdown_cancel(void *rt) {
    MUST(ta_runtime_shutdown(rt, TA_SHUTDOWN_CANCEL, NULL));
    return NULL;
}

static void test_stats(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_stats s = stats_of(rt);
    CHECK(s.struct_size == sizeof s && s.threads == 2, "struct_size %u threads %u", s.struct_size, s.threads);
    CHECK(s.tasks_submitted == 0 && s.tasks_completed == 0 && s.pending == 0 && s.peak_pending == 0 && s.steals == 0,
          "a new runtime counts %llu submitted", (unsigned long long)s.tasks_submitted);

    /* A size below the first version's is refused and nothing is written. */
    ta_stats small;
    memset(&small, 0, sizeof small);
    small.struct_size = 8;
    CHECK_STATUS(ta_runtime_stats(rt, &small), TA_STATUS_INVALID_ARGUMENT);
    CHECK(small.tasks_submitted == 0 && small.threads == 0, "a refused call wrote the struct");
    CHECK_STATUS(ta_runtime_stats(rt, NULL), TA_STATUS_NULL_POINTER);
    CHECK_STATUS(ta_runtime_stats(NULL, &s), TA_STATUS_NULL_HANDLE);

    ta_tensor *x = scalar(), *y = scalar();
    /* Two failures on Y: the kernel's, and a reader of its poisoned output. */
    submit1(fail_kernel, NULL, "fails", y, TA_MODE_WRITE, rt);
    CHECK_STATUS(ta_tensor_wait(y, TA_WAIT_FOREVER, NULL), TA_STATUS_KERNEL_FAILED);
    submit1(read_kernel, NULL, "reads_poison", y, TA_MODE_READ, rt);
    CHECK_STATUS(ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, NULL), TA_STATUS_OK);

    /* A refused submission (reads an unconstructed tensor) is not counted. */
    ta_tensor *u = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
    ta_access ua = {u, TA_MODE_READ};
    ta_submit uo;
    memset(&uo, 0, sizeof uo);
    uo.runtime = rt;
    CHECK_STATUS(ta_kernel_submit(read_kernel, NULL, "refused", &ua, 1, &uo, NULL, NULL), TA_STATUS_UNCONSTRUCTED);
    MUST(ta_tensor_free(u));

    gate g;
    gate_init(&g);
    submit1(gate_kernel, &g, "gate", x, TA_MODE_UPDATE, rt);
    for (int i = 0; i < 9; i++) submit1(inc_kernel, NULL, "inc", x, TA_MODE_UPDATE, rt);
    CHECK(gate_await_entered(&g, 1, 60), "the gate kernel did not start");
    s = stats_of(rt);
    CHECK(s.tasks_submitted == 12, "submitted %llu, want 12", (unsigned long long)s.tasks_submitted);
    CHECK(s.tasks_completed == 2, "completed %llu, want 2", (unsigned long long)s.tasks_completed);
    CHECK(s.tasks_failed == 2, "failed %llu, want 2", (unsigned long long)s.tasks_failed);
    CHECK(s.pending == 10, "pending %llu, want 10", (unsigned long long)s.pending);
    CHECK(s.peak_pending == 10, "peak %llu, want 10", (unsigned long long)s.peak_pending);
    CHECK(s.queue_depth == 0, "queue depth %llu, want 0 (the chain waits on the gate, not in the queue)", (unsigned long long)s.queue_depth);
    gate_open(&g);
    CHECK_STATUS(ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, NULL), TA_STATUS_OK);
    s = stats_of(rt);
    CHECK(s.tasks_submitted == 12 && s.tasks_completed == 12 && s.pending == 0,
          "after the wait: submitted %llu completed %llu pending %llu", (unsigned long long)s.tasks_submitted,
          (unsigned long long)s.tasks_completed, (unsigned long long)s.pending);
    CHECK(s.tasks_failed == 2 && s.tasks_cancelled == 0, "failed %llu cancelled %llu", (unsigned long long)s.tasks_failed,
          (unsigned long long)s.tasks_cancelled);
    CHECK(s.peak_pending == 10, "peak %llu, want 10", (unsigned long long)s.peak_pending);
    /* "fails", "reads_poison" and "gate" are ready when submitted and go
     * through the shared queue; the chain runs inline. After the wait every
     * spell that ran them is counted (busy time and steals alike). */
    CHECK(s.steals == 3, "steals %llu, want 3 (fails, reads_poison, gate; the chain runs inline)",
          (unsigned long long)s.steals);

    uint64_t busy[4] = {0, 0, 0, 0};
    size_t nb = 0;
    CHECK_STATUS(ta_runtime_worker_busy_ns(rt, busy, 4, &nb), TA_STATUS_OK);
    CHECK(nb == 2, "%zu workers", nb);
    CHECK(busy[0] + busy[1] == s.busy_ns && s.busy_ns > 0, "busy %llu + %llu vs total %llu", (unsigned long long)busy[0],
          (unsigned long long)busy[1], (unsigned long long)s.busy_ns);
    CHECK(busy[2] == 0 && busy[3] == 0, "wrote past the worker count");
    nb = 0;
    CHECK_STATUS(ta_runtime_worker_busy_ns(rt, NULL, 0, &nb), TA_STATUS_OK);
    CHECK(nb == 2, "count only: %zu", nb);
    CHECK_STATUS(ta_runtime_worker_busy_ns(rt, NULL, 2, &nb), TA_STATUS_NULL_POINTER);

    MUST(ta_tensor_free(x));
    MUST(ta_tensor_free(y));
    MUST(ta_runtime_free(rt));
    gate_destroy(&g);

    /* Cancelled operations: the chain behind a gate, cancelled by a shutdown
     * that starts while the gate holds. */
    MUST(ta_runtime_new(1, &rt, NULL));
    x = scalar();
    gate_init(&g);
    submit1(gate_kernel, &g, "gate", x, TA_MODE_UPDATE, rt);
    for (int i = 0; i < 5; i++) submit1(inc_kernel, NULL, "inc", x, TA_MODE_UPDATE, rt);
    CHECK(gate_await_entered(&g, 1, 60), "the gate kernel did not start");
    pthread_t th;
    pthread_create(&th, NULL, shutdown_cancel, rt);
    /* A probe that is refused either way: UNCONSTRUCTED while running,
     * SHUTDOWN once the cancel has begun. */
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
    ua.tensor = u;
    uo.runtime = rt;
    while (ta_kernel_submit(read_kernel, NULL, "probe", &ua, 1, &uo, NULL, NULL) != TA_STATUS_SHUTDOWN) sleep_ms(1);
    MUST(ta_tensor_free(u));
    gate_open(&g);
    pthread_join(th, NULL);
    s = stats_of(rt);
    CHECK(s.tasks_submitted == 6 && s.tasks_completed == 6, "submitted %llu completed %llu", (unsigned long long)s.tasks_submitted,
          (unsigned long long)s.tasks_completed);
    CHECK(s.tasks_cancelled == 5 && s.tasks_failed == 0, "cancelled %llu failed %llu", (unsigned long long)s.tasks_cancelled,
          (unsigned long long)s.tasks_failed);
    MUST(ta_tensor_free(x));
    MUST(ta_runtime_free(rt));
    gate_destroy(&g);
}

/* The whole content of a file ("" if unreadable); caller frees. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return calloc(1, 1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc((size_t)n + 1, 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void test_trace(void) {
    const char *out = getenv("TRACE_OUT");
    if (!out) out = "/tmp/ta_test_observe.json";
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    CHECK_STATUS(ta_runtime_trace_stop(rt, NULL, NULL), TA_STATUS_INVALID_ARGUMENT);
    ta_trace_options bad = {4, 0, 0};
    CHECK_STATUS(ta_runtime_trace_start(rt, &bad, NULL), TA_STATUS_INVALID_ARGUMENT);
    ta_trace_options badflags = {sizeof(ta_trace_options), 1, 0};
    CHECK_STATUS(ta_runtime_trace_start(rt, &badflags, NULL), TA_STATUS_INVALID_ARGUMENT);

    ta_tensor *x = scalar(), *y = scalar();
    submit1(inc_kernel, NULL, "before_start", x, TA_MODE_UPDATE, rt);
    CHECK_STATUS(ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_runtime_trace_start(rt, NULL, NULL), TA_STATUS_OK);
    long sum = 0;
    diamond(x, y, &sum, rt);
    CHECK_STATUS(ta_runtime_trace_stop(rt, out, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_runtime_trace_stop(rt, out, NULL), TA_STATUS_INVALID_ARGUMENT);
    CHECK(sum == 4, "B and C read %ld, want 2 + 2 (before_start and A incremented)", sum);

    char *json = slurp(out);
    const char *names[] = {"A", "B", "C", "D", "E"};
    for (int i = 0; i < 5; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\"name\":\"%s\",\"cat\":\"task\"", names[i]);
        CHECK(count_of(json, pat) == 1, "operation %s appears %d times in the trace", names[i], count_of(json, pat));
    }
    CHECK(count_of(json, "before_start") == 0, "an operation from before the start is in the trace");
    CHECK(count_of(json, "\"outcome\":\"ok\"") == 4 && count_of(json, "\"outcome\":\"failed\",\"status\":\"TA_STATUS_KERNEL_FAILED\",\"message\":\"fails on purpose\"") == 1,
          "outcomes: %d ok", count_of(json, "\"outcome\":\"ok\""));
    /* Five edges: A->B, A->C, and D waits for the last writer A and the readers B, C. */
    CHECK(count_of(json, "\"ph\":\"s\"") == 5 && count_of(json, "\"ph\":\"f\"") == 5, "%d flow starts", count_of(json, "\"ph\":\"s\""));
    CHECK(count_of(json, "\"dropped\":0") == 1, "the trace does not say that nothing was dropped");
    free(json);

    /* Capacity 3, 10 operations: the last 3 are kept, 7 dropped. */
    ta_trace_options small = {sizeof(ta_trace_options), 0, 3};
    CHECK_STATUS(ta_runtime_trace_start(rt, &small, NULL), TA_STATUS_OK);
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "op%d", i);
        submit1(inc_kernel, NULL, name, x, TA_MODE_UPDATE, rt);
    }
    CHECK_STATUS(ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_runtime_trace_stop(rt, out, NULL), TA_STATUS_OK);
    json = slurp(out);
    CHECK(count_of(json, "\"dropped\":7") == 1 && count_of(json, "\"recorded\":3") == 1, "capacity 3 of 10: the counts are wrong");
    CHECK(count_of(json, "\"name\":\"op9\"") == 1 && count_of(json, "\"name\":\"op7\"") == 1 && count_of(json, "\"name\":\"op6\"") == 0,
          "the newest records are not the ones kept");
    free(json);
    /* The diamond again, for the checker script (TRACE_OUT is read by it). */
    CHECK_STATUS(ta_runtime_trace_start(rt, NULL, NULL), TA_STATUS_OK);
    diamond(x, y, &sum, rt);
    CHECK_STATUS(ta_runtime_trace_stop(rt, out, NULL), TA_STATUS_OK);

    MUST(ta_tensor_free(x));
    MUST(ta_tensor_free(y));
    MUST(ta_runtime_free(rt));
}

static long g_flag;

/* Waits (polling) for a flag that the test sets only at its end. */
static ta_status wait_flag_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ctx;
    atomic_inc((long *)ud);
    while (!atomic_get(&g_flag)) sleep_ms(1);
    return TA_STATUS_OK;
}

static void test_dump(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    char buf[8192];
    size_t len = 0;
    CHECK_STATUS(ta_runtime_dump_string(rt, TA_DUMP_TEXT, buf, sizeof buf, &len, NULL), TA_STATUS_OK);
    CHECK(strstr(buf, "tracking is off") != NULL, "untracked dump: %s", buf);
    CHECK_STATUS(ta_runtime_track(rt, 1), TA_STATUS_OK);

    ta_tensor *x = scalar(), *y = scalar();
    long entered = 0;
    submit1(wait_flag_kernel, &entered, "blocker", x, TA_MODE_UPDATE, rt);
    submit1(inc_kernel, NULL, "waiter_update", x, TA_MODE_UPDATE, rt);
    submit1(read_kernel, NULL, "waiter_read", x, TA_MODE_READ, rt);
    submit1(inc_kernel, NULL, "unrelated", y, TA_MODE_UPDATE, rt);
    CHECK_STATUS(ta_tensor_wait(y, TA_WAIT_FOREVER, NULL), TA_STATUS_OK);
    while (!atomic_get(&entered)) sleep_ms(1);

    CHECK_STATUS(ta_runtime_dump_string(rt, TA_DUMP_TEXT, buf, sizeof buf, &len, NULL), TA_STATUS_OK);
    CHECK(len == strlen(buf), "len %zu vs strlen %zu", len, strlen(buf));
    CHECK(strstr(buf, "3 unfinished operation(s) observed") != NULL, "dump header:\n%s", buf);
    CHECK(strstr(buf, "op #1 \"blocker\": RUNNING for") != NULL, "the blocker is not named running:\n%s", buf);
    CHECK(strstr(buf, "op #2 \"waiter_update\": WAITING for") != NULL, "waiter_update:\n%s", buf);
    CHECK(strstr(buf, "op #3 \"waiter_read\": WAITING for") != NULL, "waiter_read:\n%s", buf);
    CHECK(strstr(buf, "waits for op #1 \"blocker\" (running) on tensor t0 (f64)") != NULL, "what waiter_update waits for:\n%s", buf);
    CHECK(strstr(buf, "waits for op #2 \"waiter_update\" (not started) on tensor t0 (f64)") != NULL, "what waiter_read waits for:\n%s", buf);
    CHECK(strstr(buf, "waited for by: #2 \"waiter_update\"") != NULL, "the blocker's waiters:\n%s", buf);
    CHECK(strstr(buf, "unrelated") == NULL, "a completed operation is listed:\n%s", buf);
    CHECK(strstr(buf, "accesses: t0 (f64) update") != NULL, "accesses:\n%s", buf);

    char dot[4096];
    CHECK_STATUS(ta_runtime_dump_string(rt, TA_DUMP_DOT, dot, sizeof dot, &len, NULL), TA_STATUS_OK);
    CHECK(strstr(dot, "digraph") && strstr(dot, "op1 -> op2") && strstr(dot, "op2 -> op3") && !strstr(dot, "op1 -> op3"), "dot:\n%s", dot);

    /* Too small a buffer: cut, NUL-terminated, full length reported. */
    char tiny[10];
    size_t full = 0;
    CHECK_STATUS(ta_runtime_dump_string(rt, TA_DUMP_TEXT, tiny, sizeof tiny, &full, NULL), TA_STATUS_BUFFER_TOO_SMALL);
    CHECK(full > sizeof tiny && strlen(tiny) == sizeof tiny - 1 && strncmp(tiny, buf, sizeof tiny - 1) == 0, "cut: '%s' of %zu", tiny, full);
    CHECK_STATUS(ta_runtime_dump_string(rt, TA_DUMP_TEXT, NULL, 0, &full, NULL), TA_STATUS_BUFFER_TOO_SMALL);
    CHECK_STATUS(ta_runtime_dump_string(rt, 7, buf, sizeof buf, &len, NULL), TA_STATUS_INVALID_ARGUMENT);

    /* The same report through a file descriptor. */
    int p[2];
    MUST(pipe(p) == 0 ? TA_STATUS_OK : TA_STATUS_INTERNAL);
    CHECK_STATUS(ta_runtime_dump(rt, TA_DUMP_TEXT, p[1], NULL), TA_STATUS_OK);
    close(p[1]);
    char got[8192];
    size_t total = 0;
    ssize_t n;
    while (total < sizeof got - 1 && (n = read(p[0], got + total, sizeof got - 1 - total)) > 0) total += (size_t)n;
    got[total] = 0;
    close(p[0]);
    CHECK(strstr(got, "op #1 \"blocker\": RUNNING") && strstr(got, "waited for by: #2 \"waiter_update\""), "fd dump:\n%s", got);
    CHECK_STATUS(ta_runtime_dump(rt, TA_DUMP_TEXT, -1, NULL), TA_STATUS_INTERNAL);

    atomic_set(&g_flag, 1);
    CHECK_STATUS(ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_runtime_dump_string(rt, TA_DUMP_TEXT, buf, sizeof buf, &len, NULL), TA_STATUS_OK);
    CHECK(strstr(buf, "0 unfinished operation(s) observed, 0 pending in all") != NULL, "after the flag:\n%s", buf);
    CHECK_STATUS(ta_runtime_track(rt, 0), TA_STATUS_OK);
    MUST(ta_tensor_free(x));
    MUST(ta_tensor_free(y));
    MUST(ta_runtime_free(rt));
}

int main(void) {
    /* The checks expect tracking and recording only where they ask for them. */
    unsetenv("TA_TRACE");
    unsetenv("TA_DUMP_SIGNAL");
    test_stats();
    test_trace();
    test_dump();
    return finish("test_observe");
}
