/*
 * test_int64_scalars: 64-bit integer scalars are exact.
 *
 * ta_fill and ta_scale accept every integral double that an integer dtype
 * holds (2^60, -(2^53+2), INT64_MIN, 2^63-1024 for i64; 2^60, 2^64-2048 for
 * u64), and refuse the ones it does not hold (2^63 for i64, -1 and 2^64 for
 * u64, 1.5) with TA_STATUS_INVALID_ARGUMENT. ta_fill_i64/_u64 and
 * ta_scale_i64/_u64 take every 64-bit value exactly (2^53+1, INT64_MAX,
 * UINT64_MAX, values no double names), and range-check narrower dtypes.
 * Integer products wrap (two's complement), checked against unsigned
 * arithmetic computed here.
 */
#include "check.h"

#define N 5

static ta_runtime *rt;

static void read_i64(const ta_tensor *t, int64_t *out) { read_back(t, rt, out, N); }
static void read_u64(const ta_tensor *t, uint64_t *out) { read_back(t, rt, out, N); }

static ta_status fill_d(const ta_tensor *t, double v) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_status s = ta_fill(t, real(v), &o, &ev, NULL);
    if (s == TA_STATUS_OK) {
        s = wait_event(ev, 60);
        ta_event_free(ev);
    }
    return s;
}

static ta_status scale_d(const ta_tensor *t, double v) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_status s = ta_scale(t, real(v), &o, &ev, NULL);
    if (s == TA_STATUS_OK) {
        s = wait_event(ev, 60);
        ta_event_free(ev);
    }
    return s;
}

static ta_status fill_i64(const ta_tensor *t, int64_t v) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_status s = ta_fill_i64(t, v, &o, &ev, NULL);
    if (s == TA_STATUS_OK) { s = wait_event(ev, 60); ta_event_free(ev); }
    return s;
}
static ta_status fill_u64(const ta_tensor *t, uint64_t v) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_status s = ta_fill_u64(t, v, &o, &ev, NULL);
    if (s == TA_STATUS_OK) { s = wait_event(ev, 60); ta_event_free(ev); }
    return s;
}
static ta_status scale_i64(const ta_tensor *t, int64_t v) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_status s = ta_scale_i64(t, v, &o, &ev, NULL);
    if (s == TA_STATUS_OK) { s = wait_event(ev, 60); ta_event_free(ev); }
    return s;
}
static ta_status scale_u64(const ta_tensor *t, uint64_t v) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_status s = ta_scale_u64(t, v, &o, &ev, NULL);
    if (s == TA_STATUS_OK) { s = wait_event(ev, 60); ta_event_free(ev); }
    return s;
}

static int all_i64(const ta_tensor *t, int64_t want) {
    int64_t got[N];
    read_i64(t, got);
    for (int i = 0; i < N; i++)
        if (got[i] != want) {
            fprintf(stderr, "  element %d is %lld, expected %lld\n", i, (long long)got[i], (long long)want);
            return 0;
        }
    return 1;
}

static int all_u64(const ta_tensor *t, uint64_t want) {
    uint64_t got[N];
    read_u64(t, got);
    for (int i = 0; i < N; i++)
        if (got[i] != want) {
            fprintf(stderr, "  element %d is %llu, expected %llu\n", i, (unsigned long long)got[i], (unsigned long long)want);
            return 0;
        }
    return 1;
}

/* A refused scalar: INVALID_ARGUMENT at submission, with a message naming the dtype. */
static void check_refused(ta_status (*submit)(const ta_tensor *, ta_scalar, const ta_submit *, ta_event **, ta_error **),
                          const ta_tensor *t, double v, const char *dtype_name) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    ta_error *e = NULL;
    char msg[256];
    CHECK_STATUS(submit(t, real(v), &o, &ev, &e), TA_STATUS_INVALID_ARGUMENT);
    CHECK(ev == NULL, "no event for a refused submission");
    CHECK(strstr(err_message(e, msg, sizeof msg), dtype_name) != NULL, "message '%s' names %s", msg, dtype_name);
    ta_error_free(e);
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_tensor *ti = zeros1(TA_DTYPE_I64, N), *tu = zeros1(TA_DTYPE_U64, N), *t32 = zeros1(TA_DTYPE_I32, N);

    /* Every integral double an i64 holds, beyond 2^53 included. */
    const double i64_ok[] = { 0x1p60, -(0x1p53 + 2), -0x1p63, 0x1p63 - 1024, 0x1p53 + 2, -0x1p62 };
    const int64_t i64_want[] = { (int64_t)1 << 60, -(((int64_t)1 << 53) + 2), INT64_MIN, INT64_MAX - 1023,
                                 ((int64_t)1 << 53) + 2, -((int64_t)1 << 62) };
    for (size_t k = 0; k < sizeof i64_ok / sizeof i64_ok[0]; k++) {
        CHECK_STATUS(fill_d(ti, i64_ok[k]), TA_STATUS_OK);
        CHECK(all_i64(ti, i64_want[k]), "ta_fill i64 with %.17g", i64_ok[k]);
    }
    const double u64_ok[] = { 0x1p60, 0x1p64 - 2048, 0x1p63, 0.0 };
    const uint64_t u64_want[] = { (uint64_t)1 << 60, UINT64_MAX - 2047, (uint64_t)1 << 63, 0 };
    for (size_t k = 0; k < sizeof u64_ok / sizeof u64_ok[0]; k++) {
        CHECK_STATUS(fill_d(tu, u64_ok[k]), TA_STATUS_OK);
        CHECK(all_u64(tu, u64_want[k]), "ta_fill u64 with %.17g", u64_ok[k]);
    }
    /* What the dtype does not hold is refused, and leaves the tensor as it was. */
    check_refused(ta_fill, ti, 0x1p63, "i64");
    check_refused(ta_fill, ti, 0.5, "i64");
    check_refused(ta_fill, tu, -1.0, "u64");
    check_refused(ta_fill, tu, 0x1p64, "u64");
    check_refused(ta_scale, ti, -0x1p64, "i64");
    check_refused(ta_fill, t32, 0x1p31, "i32");
    CHECK(all_u64(tu, 0), "refused fills leave the u64 tensor at 0");

    /* ta_scale by INT64_MIN (an exact double): 3 * INT64_MIN wraps to INT64_MIN. */
    CHECK_STATUS(fill_d(ti, 3.0), TA_STATUS_OK);
    CHECK_STATUS(scale_d(ti, -0x1p63), TA_STATUS_OK);
    CHECK(all_i64(ti, (int64_t)((uint64_t)3 * ((uint64_t)1 << 63))), "3 * INT64_MIN wraps");

    /* Exact integer entry points: values no double names. */
    const int64_t exact_i[] = { ((int64_t)1 << 53) + 1, INT64_MAX, INT64_MIN, -(((int64_t)1 << 60) + 7), -1 };
    for (size_t k = 0; k < sizeof exact_i / sizeof exact_i[0]; k++) {
        CHECK_STATUS(fill_i64(ti, exact_i[k]), TA_STATUS_OK);
        CHECK(all_i64(ti, exact_i[k]), "ta_fill_i64 %lld", (long long)exact_i[k]);
    }
    const uint64_t exact_u[] = { UINT64_MAX, ((uint64_t)1 << 63) + 1, ((uint64_t)1 << 53) + 1, 12345 };
    for (size_t k = 0; k < sizeof exact_u / sizeof exact_u[0]; k++) {
        CHECK_STATUS(fill_u64(tu, exact_u[k]), TA_STATUS_OK);
        CHECK(all_u64(tu, exact_u[k]), "ta_fill_u64 %llu", (unsigned long long)exact_u[k]);
    }
    /* ta_fill_u64 of a value above INT64_MAX into an i64, and a negative
     * ta_fill_i64 into a u64, are out of range. */
    {
        ta_error *e = NULL;
        ta_submit o = on_runtime(rt);
        char msg[256];
        CHECK_STATUS(ta_fill_u64(ti, (uint64_t)INT64_MAX + 1, &o, NULL, &e), TA_STATUS_INVALID_ARGUMENT);
        CHECK(strstr(err_message(e, msg, sizeof msg), "9223372036854775808") != NULL, "message '%s' names the value", msg);
        ta_error_free(e);
        e = NULL;
        CHECK_STATUS(ta_fill_i64(tu, -1, &o, NULL, &e), TA_STATUS_INVALID_ARGUMENT);
        ta_error_free(e);
        e = NULL;
        CHECK_STATUS(ta_fill_i64(t32, (int64_t)1 << 31, &o, NULL, &e), TA_STATUS_INVALID_ARGUMENT);
        ta_error_free(e);
        CHECK_STATUS(ta_fill_i64(t32, INT32_MIN, &o, NULL, NULL), TA_STATUS_OK);
        int32_t g32[N];
        read_back(t32, rt, g32, N);
        CHECK(g32[0] == INT32_MIN && g32[N - 1] == INT32_MIN, "ta_fill_i64 INT32_MIN into i32: %d", g32[0]);
        CHECK_STATUS(ta_fill_i64(NULL, 1, &o, NULL, NULL), TA_STATUS_NULL_HANDLE);
    }

    /* Exact scaling, checked against wrapping unsigned arithmetic. */
    const int64_t base = ((int64_t)1 << 53) + 3;
    const int64_t factors[] = { 3, -7, INT64_MIN, INT64_MAX, ((int64_t)1 << 40) + 1 };
    for (size_t k = 0; k < sizeof factors / sizeof factors[0]; k++) {
        CHECK_STATUS(fill_i64(ti, base), TA_STATUS_OK);
        CHECK_STATUS(scale_i64(ti, factors[k]), TA_STATUS_OK);
        int64_t want = (int64_t)((uint64_t)base * (uint64_t)factors[k]);
        CHECK(all_i64(ti, want), "ta_scale_i64 (2^53+3) * %lld", (long long)factors[k]);
    }
    CHECK_STATUS(fill_u64(tu, UINT64_MAX - 4), TA_STATUS_OK);
    CHECK_STATUS(scale_u64(tu, UINT64_MAX), TA_STATUS_OK);
    CHECK(all_u64(tu, (UINT64_MAX - 4) * UINT64_MAX), "ta_scale_u64 wraps");

    /* A floating-point tensor takes the nearest value. */
    {
        ta_tensor *tf = zeros1(TA_DTYPE_F64, N);
        CHECK_STATUS(fill_i64(tf, ((int64_t)1 << 60) + 1), TA_STATUS_OK);
        double gf[N];
        read_back(tf, rt, gf, N);
        CHECK(gf[0] == 0x1p60 && gf[N - 1] == 0x1p60, "f64 takes the nearest double: %.17g", gf[0]);
        ta_tensor_free(tf);
    }

    ta_tensor_free(ti);
    ta_tensor_free(tu);
    ta_tensor_free(t32);
    ta_runtime_free(rt);
    return finish("test_int64_scalars");
}
