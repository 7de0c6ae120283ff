/*
 * test_misuse: every misuse of the C ABI returns its own status, at once.
 *
 * For each misuse: the returned status; the `ta_error **error` out-parameter
 * (an error object with the same status and a non-empty message); that
 * nothing was enrolled (no event handed out, the callback and completion
 * queue entry never fire, the tensor's value is unchanged); and the status
 * name/description strings. Also: ta_*_free(NULL) is TA_STATUS_OK.
 */
#include "check.h"

#define N 6

static ta_runtime *rt;
static ta_cq *cq;
static long callbacks; /* callbacks fired by submissions that were rejected (must stay 0) */

static void count_callback(ta_status status, void *userdata) {
    (void)status; (void)userdata;
    atomic_inc(&callbacks);
}

/* Submission options that would report completion three ways. */
static ta_submit notify_all(void) {
    ta_submit o = on_runtime(rt);
    o.callback = count_callback;
    o.cq = cq;
    o.cq_tag = 99;
    return o;
}

/* Check a rejected call: its status, and the error object it returned. */
#define REJECTED(call, want) rejected_((call), (want), #call, __LINE__)
static ta_error *err; /* receives the error of the call under test (read after the call) */

static void rejected_(ta_status got, ta_status want, const char *what, int line) {
    char msg[512];
    ta_error *e = err;
    g_checks++;
    if (got != want) {
        g_failures++;
        fprintf(stderr, "FAIL line %d: %s\n    expected %s, got %s\n", line, what, ta_status_name(want),
                ta_status_name(got));
    }
    if (e == NULL) {
        g_checks++;
        g_failures++;
        fprintf(stderr, "FAIL line %d: %s gave no error object\n", line, what);
    } else {
        CHECK(err_status(e) == want, "line %d: error object has status %s, want %s", line,
              ta_status_name(err_status(e)), ta_status_name(want));
        err_message(e, msg, sizeof msg);
        CHECK(strlen(msg) > 0, "line %d: error message is empty", line);
        printf("  %-28s %s\n", ta_status_name(want), msg);
        ta_error_free(e);
    }
    /* The thread's last error is the same failure. */
    ta_error *last = NULL;
    CHECK(ta_last_error(&last) == TA_STATUS_OK && last != NULL && err_status(last) == want,
          "line %d: ta_last_error does not hold the failure", line);
    ta_error_free(last);
    err = NULL;
}

/* The values of an f64 tensor of N elements. */
static void values(const ta_tensor *t, double *out) { read_back(t, rt, out, N); }

static int same_values(const double *a, const double *b) { return memcmp(a, b, N * sizeof(double)) == 0; }

static ta_status noop_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud; (void)ctx;
    atomic_inc(&callbacks); /* must never run for a rejected submission */
    return TA_STATUS_OK;
}

static void check_status_strings(void) {
    static const struct { ta_status s; const char *name; } all[] = {
#define S(x) { x, #x }
        S(TA_STATUS_OK), S(TA_STATUS_PENDING), S(TA_STATUS_TIMEOUT), S(TA_STATUS_NULL_HANDLE),
        S(TA_STATUS_STALE_HANDLE), S(TA_STATUS_DOUBLE_FREE), S(TA_STATUS_WRONG_HANDLE_TYPE),
        S(TA_STATUS_INVALID_HANDLE), S(TA_STATUS_NULL_POINTER), S(TA_STATUS_INVALID_ARGUMENT),
        S(TA_STATUS_DTYPE_MISMATCH), S(TA_STATUS_SHAPE_MISMATCH), S(TA_STATUS_DOMAIN_MISMATCH),
        S(TA_STATUS_READ_ONLY), S(TA_STATUS_ALIAS), S(TA_STATUS_UNCONSTRUCTED),
        S(TA_STATUS_SHAPE_UNKNOWN), S(TA_STATUS_UNSUPPORTED), S(TA_STATUS_OUT_OF_RANGE),
        S(TA_STATUS_BUFFER_TOO_SMALL), S(TA_STATUS_NOT_CONTIGUOUS), S(TA_STATUS_KERNEL_FAILED), S(TA_STATUS_CANCELLED),
        S(TA_STATUS_SHUTDOWN), S(TA_STATUS_WOULD_DEADLOCK), S(TA_STATUS_OUT_OF_MEMORY),
        S(TA_STATUS_PANIC), S(TA_STATUS_NO_BACKEND), S(TA_STATUS_ALREADY_FINISHED), S(TA_STATUS_CUDA_UNAVAILABLE),
        S(TA_STATUS_CUDA_ERROR), S(TA_STATUS_INTERNAL),
#undef S
    };
    size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        const char *name = ta_status_name(all[i].s), *desc = ta_status_describe(all[i].s);
        CHECK(name && strcmp(name, all[i].name) == 0, "ta_status_name(%u) = %s, want %s", (unsigned)all[i].s,
              name ? name : "(null)", all[i].name);
        CHECK(desc && strlen(desc) > 0 && strcmp(desc, "unknown status") != 0,
              "ta_status_describe(%s) = '%s'", all[i].name, desc ? desc : "(null)");
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(desc, ta_status_describe(all[j].s)) != 0, "%s and %s share a description",
                  all[i].name, all[j].name);
    }
    /* Values that are not statuses. */
    const ta_status bogus[] = { 3, 9, 16, 39, 48, 98, 100, 12345, 0xffffffffu };
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        CHECK(strcmp(ta_status_name(bogus[i]), "TA_STATUS_UNKNOWN") == 0, "ta_status_name(%u) = %s",
              (unsigned)bogus[i], ta_status_name(bogus[i]));
        CHECK(strcmp(ta_status_describe(bogus[i]), "unknown status") == 0, "ta_status_describe(%u) = %s",
              (unsigned)bogus[i], ta_status_describe(bogus[i]));
    }
    printf("status names and descriptions: %zu statuses checked\n", n);
}

int main(void) {
    size_t n = N;
    double init[N] = { 1, 2, 3, 4, 5, 6 }, before[N], after[N];
    MUST(ta_runtime_new(2, &rt, NULL));
    MUST(ta_cq_new(&cq, NULL));

    check_status_strings();

    ta_tensor *x = NULL, *y = NULL, *y32 = NULL, *short_t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, init, &x, NULL));
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, init, &y, NULL));
    y32 = zeros1(TA_DTYPE_F32, N);
    short_t = zeros1(TA_DTYPE_F64, N - 1);
    values(x, before);
    CHECK(same_values(before, init), "x does not hold its initial data");

    ta_submit o = notify_all();
    ta_event *ev = NULL;

    printf("misuse -> status, message:\n");

    /* NULL handle */
    REJECTED(ta_fill(NULL, real(1), &o, &ev, &err), TA_STATUS_NULL_HANDLE);
    REJECTED(ta_axpy(y, real(1), NULL, &o, &ev, &err), TA_STATUS_NULL_HANDLE);
    REJECTED(ta_gemm(y, real(1), y, NULL, real(0), &o, &ev, &err), TA_STATUS_NULL_HANDLE);
    REJECTED(ta_gemm_t(y, NULL, y, y, y, &o, &ev, &err), TA_STATUS_NULL_HANDLE);
    REJECTED(ta_assign_product(NULL, real(1), y, y, &o, &ev, &err), TA_STATUS_NULL_HANDLE);
    CHECK_STATUS(ta_event_poll(NULL), TA_STATUS_NULL_HANDLE);
    CHECK_STATUS(ta_tensor_wait(NULL, 0, NULL), TA_STATUS_NULL_HANDLE);

    /* Stale handle: used after it was freed. */
    ta_tensor *gone = zeros1(TA_DTYPE_F64, N);
    MUST(ta_tensor_free(gone));
    REJECTED(ta_fill(gone, real(1), &o, &ev, &err), TA_STATUS_STALE_HANDLE);
    REJECTED(ta_axpy(y, real(1), gone, &o, &ev, &err), TA_STATUS_STALE_HANDLE);
    REJECTED(ta_gemm(y, real(1), gone, y, real(0), &o, &ev, &err), TA_STATUS_STALE_HANDLE);
    REJECTED(ta_gemm_t(y, y, y, y, gone, &o, &ev, &err), TA_STATUS_STALE_HANDLE);
    REJECTED(ta_add_product_t(y, gone, y, y, &o, &ev, &err), TA_STATUS_STALE_HANDLE);
    ta_dtype dt = 0;
    CHECK_STATUS(ta_tensor_dtype(gone, &dt), TA_STATUS_STALE_HANDLE);
    /* ... and still stale once the slot has been reused by new handles. */
    ta_tensor *fresh[8];
    for (int i = 0; i < 8; i++) fresh[i] = zeros1(TA_DTYPE_F64, 1);
    CHECK_STATUS(ta_tensor_dtype(gone, &dt), TA_STATUS_STALE_HANDLE);
    for (int i = 0; i < 8; i++) MUST(ta_tensor_free(fresh[i]));

    /* Double free, for each handle type. */
    CHECK_STATUS(ta_tensor_free(gone), TA_STATUS_DOUBLE_FREE);
    ta_event *ev2 = NULL;
    ta_submit plain = on_runtime(rt);
    MUST(ta_fill(y32, real(0), &plain, &ev2, NULL));
    MUST(wait_event(ev2, 60));
    MUST(ta_event_free(ev2));
    CHECK_STATUS(ta_event_free(ev2), TA_STATUS_DOUBLE_FREE);
    CHECK_STATUS(ta_event_poll(ev2), TA_STATUS_STALE_HANDLE);
    ta_cq *cq2 = NULL;
    MUST(ta_cq_new(&cq2, NULL));
    MUST(ta_cq_free(cq2));
    CHECK_STATUS(ta_cq_free(cq2), TA_STATUS_DOUBLE_FREE);
    ta_error *e2 = NULL;
    CHECK_STATUS(ta_fill(NULL, real(0), NULL, NULL, &e2), TA_STATUS_NULL_HANDLE);
    MUST(ta_error_free(e2));
    CHECK_STATUS(ta_error_free(e2), TA_STATUS_DOUBLE_FREE);
    ta_runtime *rt2 = NULL;
    MUST(ta_runtime_new(1, &rt2, NULL));
    MUST(ta_runtime_free(rt2));
    CHECK_STATUS(ta_runtime_free(rt2), TA_STATUS_DOUBLE_FREE);
    size_t threads = 0;
    CHECK_STATUS(ta_runtime_threads(rt2, &threads), TA_STATUS_STALE_HANDLE);

    /* Wrong handle type: an event (or a queue) passed where a tensor is expected. */
    ta_event *live_ev = NULL;
    MUST(ta_fill(y32, real(0), &plain, &live_ev, NULL));
    MUST(wait_event(live_ev, 60));
    REJECTED(ta_fill((const ta_tensor *)live_ev, real(1), &o, &ev, &err), TA_STATUS_WRONG_HANDLE_TYPE);
    REJECTED(ta_axpy(y, real(1), (const ta_tensor *)cq, &o, &ev, &err), TA_STATUS_WRONG_HANDLE_TYPE);
    REJECTED(ta_gemm(y, real(1), y, (const ta_tensor *)cq, real(0), &o, &ev, &err), TA_STATUS_WRONG_HANDLE_TYPE);
    REJECTED(ta_gemm_t(y, (const ta_tensor *)live_ev, y, y, y, &o, &ev, &err), TA_STATUS_WRONG_HANDLE_TYPE);
    CHECK_STATUS(ta_event_poll((const ta_event *)x), TA_STATUS_WRONG_HANDLE_TYPE);
    CHECK_STATUS(ta_tensor_free((ta_tensor *)live_ev), TA_STATUS_WRONG_HANDLE_TYPE);
    CHECK_STATUS(ta_event_poll(live_ev), TA_STATUS_OK); /* the wrong-type free did not free it */
    {
        ta_submit bad_rt = notify_all();
        bad_rt.runtime = (const ta_runtime *)x;
        REJECTED(ta_fill(y, real(1), &bad_rt, &ev, &err), TA_STATUS_WRONG_HANDLE_TYPE);
        REJECTED(ta_gemm(y, real(1), y, y, real(0), &bad_rt, &ev, &err), TA_STATUS_WRONG_HANDLE_TYPE);
    }
    MUST(ta_event_free(live_ev));

    /* Forged handle values: never issued by the library. */
    REJECTED(ta_fill((const ta_tensor *)(uintptr_t)0x1234, real(1), &o, &ev, &err), TA_STATUS_INVALID_HANDLE);
    REJECTED(ta_gemm(y, real(1), y, (const ta_tensor *)(uintptr_t)0x1234, real(0), &o, &ev, &err),
             TA_STATUS_INVALID_HANDLE);
    REJECTED(ta_fill((const ta_tensor *)(uintptr_t)0x02000fff00abcdefULL, real(1), &o, &ev, &err),
             TA_STATUS_INVALID_HANDLE);
    {
        double local = 0;
        REJECTED(ta_fill((const ta_tensor *)&local, real(1), &o, &ev, &err), TA_STATUS_INVALID_HANDLE);
    }
    CHECK_STATUS(ta_tensor_free((ta_tensor *)(uintptr_t)0x5678), TA_STATUS_INVALID_HANDLE);

    /* Wrong dtype: y (f64) += a * y32 (f32). */
    REJECTED(ta_axpy(y, real(1), y32, &o, &ev, &err), TA_STATUS_DTYPE_MISMATCH);
    REJECTED(ta_copy(y32, x, &o, &ev, &err), TA_STATUS_DTYPE_MISMATCH);

    /* Shape mismatch known at submission. */
    REJECTED(ta_axpy(y, real(1), short_t, &o, &ev, &err), TA_STATUS_SHAPE_MISMATCH);
    REJECTED(ta_copy(short_t, x, &o, &ev, &err), TA_STATUS_SHAPE_MISMATCH);
    {
        double host[N + 1] = { 0 };
        size_t e7 = N + 1;
        REJECTED(ta_copy_in(y, host, 1, &e7, NULL, &o, &ev, &err), TA_STATUS_SHAPE_MISMATCH);
    }

    /* Read-only output: const user memory. */
    static const double cdata[N] = { 9, 8, 7, 6, 5, 4 };
    ta_tensor *ro = NULL;
    MUST(ta_tensor_wrap_const(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, cdata, NULL, NULL, &ro, NULL));
    int32_t is_ro = 0;
    MUST(ta_tensor_is_read_only(ro, &is_ro));
    CHECK(is_ro == 1, "wrap_const tensor is not read-only");
    REJECTED(ta_fill(ro, real(1), &o, &ev, &err), TA_STATUS_READ_ONLY);
    REJECTED(ta_scale(ro, real(2), &o, &ev, &err), TA_STATUS_READ_ONLY);
    REJECTED(ta_axpy(ro, real(1), x, &o, &ev, &err), TA_STATUS_READ_ONLY);
    REJECTED(ta_copy(ro, x, &o, &ev, &err), TA_STATUS_READ_ONLY);
    {
        ta_access a = { ro, TA_MODE_UPDATE };
        REJECTED(ta_kernel_submit(noop_kernel, NULL, "k", &a, 1, &o, &ev, &err), TA_STATUS_READ_ONLY);
    }
    {
        double host[N];
        ta_submit p = on_runtime(rt);
        ta_event *e = NULL;
        MUST(ta_copy_out(ro, host, N, NULL, &p, &e, NULL)); /* reading is fine */
        MUST(wait_event(e, 60));
        ta_event_free(e);
        CHECK(memcmp(host, cdata, sizeof host) == 0, "read-only tensor reads back wrong values");
    }

    /* Output aliasing an input: same handle, or another handle to the same value. */
    REJECTED(ta_axpy(x, real(1), x, &o, &ev, &err), TA_STATUS_ALIAS);
    REJECTED(ta_copy(x, x, &o, &ev, &err), TA_STATUS_ALIAS);
    ta_tensor *x2 = NULL;
    MUST(ta_tensor_share(x, &x2));
    REJECTED(ta_axpy(x2, real(1), x, &o, &ev, &err), TA_STATUS_ALIAS);
    {
        ta_access a[2] = { { x, TA_MODE_READ }, { x2, TA_MODE_WRITE } };
        REJECTED(ta_kernel_submit(noop_kernel, NULL, "k", a, 2, &o, &ev, &err), TA_STATUS_ALIAS);
        ta_access b[2] = { { x, TA_MODE_UPDATE }, { x, TA_MODE_UPDATE } };
        REJECTED(ta_kernel_submit(noop_kernel, NULL, "k", b, 2, &o, &ev, &err), TA_STATUS_ALIAS);
    }

    /* Reading an unconstructed tensor. */
    ta_tensor *u = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
    {
        double host[N];
        REJECTED(ta_copy_out(u, host, N, NULL, &o, &ev, &err), TA_STATUS_UNCONSTRUCTED);
    }
    REJECTED(ta_axpy(y, real(1), u, &o, &ev, &err), TA_STATUS_UNCONSTRUCTED);
    REJECTED(ta_scale(u, real(2), &o, &ev, &err), TA_STATUS_UNCONSTRUCTED);
    REJECTED(ta_copy(y, u, &o, &ev, &err), TA_STATUS_UNCONSTRUCTED);
    {
        ta_access a = { u, TA_MODE_READ };
        REJECTED(ta_kernel_submit(noop_kernel, NULL, "k", &a, 1, &o, &ev, &err), TA_STATUS_UNCONSTRUCTED);
    }
    REJECTED(ta_tensor_wait(u, SECONDS(10), &err), TA_STATUS_UNCONSTRUCTED);
    size_t rank = 99;
    CHECK_STATUS(ta_tensor_rank(u, &rank), TA_STATUS_UNCONSTRUCTED);
    CHECK(rank == 99, "ta_tensor_rank wrote its output on failure");

    /* Invalid enumeration values. */
    {
        ta_tensor *t = NULL;
        REJECTED(ta_tensor_new(777, TA_DOMAIN_HOST, &t, &err), TA_STATUS_INVALID_ARGUMENT);
        REJECTED(ta_tensor_new(TA_DTYPE_F64, -7, &t, &err), TA_STATUS_INVALID_ARGUMENT);
        REJECTED(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, 5, &t, &err), TA_STATUS_INVALID_ARGUMENT);
        CHECK(t == NULL, "an output was written by a failed constructor");
        ta_access a = { y, 0 };
        REJECTED(ta_kernel_submit(noop_kernel, NULL, "k", &a, 1, &o, &ev, &err), TA_STATUS_INVALID_ARGUMENT);
        a.mode = 4;
        REJECTED(ta_kernel_submit(noop_kernel, NULL, "k", &a, 1, &o, &ev, &err), TA_STATUS_INVALID_ARGUMENT);
        ta_submit bad = notify_all();
        bad.backends = 1u << 20;
        REJECTED(ta_fill(y, real(1), &bad, &ev, &err), TA_STATUS_INVALID_ARGUMENT);
        REJECTED(ta_runtime_shutdown(rt, 9, &err), TA_STATUS_INVALID_ARGUMENT);
        /* Scalars the dtype cannot hold. */
        ta_scalar cplx = { 1.0, 2.0 };
        REJECTED(ta_fill(y, cplx, &o, &ev, &err), TA_STATUS_INVALID_ARGUMENT);
        ta_tensor *i8 = zeros1(TA_DTYPE_I8, N);
        REJECTED(ta_fill(i8, real(1.5), &o, &ev, &err), TA_STATUS_INVALID_ARGUMENT);
        REJECTED(ta_fill(i8, real(300), &o, &ev, &err), TA_STATUS_INVALID_ARGUMENT);
        MUST(ta_tensor_free(i8));
    }

    /* NULL out-pointers and NULL required pointers. */
    REJECTED(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, NULL, &err), TA_STATUS_NULL_POINTER);
    REJECTED(ta_runtime_new(1, NULL, &err), TA_STATUS_NULL_POINTER);
    REJECTED(ta_cq_new(NULL, &err), TA_STATUS_NULL_POINTER);
    REJECTED(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, NULL, TA_ORDER_ROW_MAJOR, &u, &err),
             TA_STATUS_NULL_POINTER);
    REJECTED(ta_copy_in(y, NULL, 1, &n, NULL, &o, &ev, &err), TA_STATUS_NULL_POINTER);
    REJECTED(ta_copy_out(x, NULL, N, NULL, &o, &ev, &err), TA_STATUS_NULL_POINTER);
    REJECTED(ta_kernel_submit(NULL, NULL, "k", NULL, 0, &o, &ev, &err), TA_STATUS_NULL_POINTER);
    CHECK_STATUS(ta_tensor_dtype(x, NULL), TA_STATUS_NULL_POINTER);
    CHECK_STATUS(ta_cq_fd(cq, NULL), TA_STATUS_NULL_POINTER);
    CHECK_STATUS(ta_event_error(NULL, NULL), TA_STATUS_NULL_POINTER);
    {
        size_t cnt = 0;
        CHECK_STATUS(ta_cq_poll(cq, NULL, 4, &cnt), TA_STATUS_NULL_POINTER);
        CHECK_STATUS(ta_cq_poll(cq, NULL, 0, NULL), TA_STATUS_NULL_POINTER);
    }
    {
        ta_tensor *w = NULL;
        REJECTED(ta_tensor_wrap(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, NULL, NULL, NULL, &w, &err),
                 TA_STATUS_NULL_POINTER);
    }

    /* A small buffer for copy_out. */
    {
        double host[N];
        REJECTED(ta_copy_out(x, host, N - 1, NULL, &o, &ev, &err), TA_STATUS_BUFFER_TOO_SMALL);
        size_t ext[1];
        CHECK_STATUS(ta_tensor_extents(x, ext, 0), TA_STATUS_BUFFER_TOO_SMALL);
    }

    /* Nothing above was enrolled: no event was handed out, no callback or
     * completion entry fired, and the values are unchanged. */
    CHECK(ev == NULL, "a rejected submission wrote its event output");
    MUST(ta_tensor_wait(y, SECONDS(60), NULL));
    values(x, after);
    CHECK(same_values(after, init), "x changed after rejected submissions");
    values(y, after);
    CHECK(same_values(after, init), "y changed after rejected submissions");
    CHECK(atomic_get(&callbacks) == 0, "%ld callbacks/kernels ran for rejected submissions", atomic_get(&callbacks));
    {
        ta_completion c[4];
        size_t cnt = 99;
        MUST(ta_cq_poll(cq, c, 4, &cnt));
        CHECK(cnt == 0, "%zu completion entries for rejected submissions", cnt);
    }
    {
        /* The unconstructed tensor stayed unconstructed. */
        ta_submit p = on_runtime(rt);
        double host[N] = { 0 };
        size_t e6 = N;
        MUST(ta_copy_in(u, host, 1, &e6, NULL, &p, NULL, NULL));
        MUST(ta_tensor_wait(u, SECONDS(60), NULL));
    }

    /* ta_*_free(NULL) is a no-op. */
    CHECK_STATUS(ta_tensor_free(NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_event_free(NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_cq_free(NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_error_free(NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_runtime_free(NULL), TA_STATUS_OK);

    MUST(ta_tensor_free(x));
    MUST(ta_tensor_free(x2));
    MUST(ta_tensor_free(y));
    MUST(ta_tensor_free(y32));
    MUST(ta_tensor_free(short_t));
    MUST(ta_tensor_free(ro));
    MUST(ta_tensor_free(u));
    MUST(ta_cq_free(cq));
    MUST(ta_runtime_free(rt));
    return finish("test_misuse");
}
