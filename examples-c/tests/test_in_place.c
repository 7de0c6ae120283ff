/* Small operations run in place: a small library operation whose tensors
 * are idle has completed when its call returns (its event polls done and
 * the wrapped output memory holds the result); TA_SUBMIT_DEFER, or
 * ta_runtime_set_small_in_place(rt, 0), sends it to a worker (a steal in
 * ta_stats); the setter, the getter and the flag check their arguments. */
#include "check.h"

static ta_tensor *wrap(double *buf, size_t rows, size_t cols) {
    size_t ext[2] = { rows, cols };
    ta_tensor *t = NULL;
    MUST(ta_tensor_wrap(TA_DTYPE_F64, 2, ext, NULL, TA_ORDER_ROW_MAJOR, buf, NULL, NULL, &t, NULL));
    return t;
}

static uint64_t steals(const ta_runtime *rt) {
    MUST(ta_runtime_wait_idle(rt, -1, NULL));
    ta_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    MUST(ta_runtime_stats(rt, &s));
    return s.steals;
}

/* One 4x4 gemm C = A B; checks C against the loop below. */
static int gemm_matches(const double *a, const double *b, const double *c) {
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double want = 0;
            for (int k = 0; k < 4; k++) want += a[4 * i + k] * b[4 * k + j];
            if (c[4 * i + j] != want) return 0;
        }
    return 1;
}

int main(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    double a[16], b[16], c[16];
    for (int i = 0; i < 16; i++) {
        a[i] = (double)(i % 5) - 2.0;
        b[i] = (double)((i * 3) % 7) - 3.0;
        c[i] = -1.0;
    }
    ta_tensor *ta = wrap(a, 4, 4), *tb = wrap(b, 4, 4), *tc = wrap(c, 4, 4);
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 };
    ta_submit o;
    memset(&o, 0, sizeof o);
    o.runtime = rt;

    int32_t on = -1;
    CHECK_STATUS(ta_runtime_small_in_place(rt, &on), TA_STATUS_OK);
    CHECK(on == 1, "on by default, got %d", on);

    /* In place: done at return, the result already in C's memory. */
    ta_event *ev = NULL;
    CHECK_STATUS(ta_gemm(tc, one, ta, tb, zero, &o, &ev, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_event_poll(ev), TA_STATUS_OK);
    CHECK(gemm_matches(a, b, c), "C = A B at return");
    MUST(ta_event_free(ev));
    CHECK(steals(rt) == 0, "no steal for an operation run in place");

    /* TA_SUBMIT_DEFER: a worker runs it. */
    memset(c, 0, sizeof c);
    o.flags = TA_SUBMIT_DEFER;
    CHECK_STATUS(ta_gemm(tc, one, ta, tb, zero, &o, &ev, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_event_wait(ev, -1), TA_STATUS_OK);
    CHECK(gemm_matches(a, b, c), "deferred C = A B");
    MUST(ta_event_free(ev));
    CHECK(steals(rt) == 1, "a worker took the deferred gemm");
    o.flags = 0;

    /* Off for the runtime: a worker runs it; on again: in place. */
    CHECK_STATUS(ta_runtime_set_small_in_place(rt, 0), TA_STATUS_OK);
    CHECK_STATUS(ta_runtime_small_in_place(rt, &on), TA_STATUS_OK);
    CHECK(on == 0, "off, got %d", on);
    memset(c, 0, sizeof c);
    CHECK_STATUS(ta_gemm(tc, one, ta, tb, zero, &o, &ev, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_event_wait(ev, -1), TA_STATUS_OK);
    CHECK(gemm_matches(a, b, c), "C = A B with in place off");
    MUST(ta_event_free(ev));
    CHECK(steals(rt) == 2, "a worker took it with in place off");
    CHECK_STATUS(ta_runtime_set_small_in_place(rt, 7), TA_STATUS_OK);
    CHECK_STATUS(ta_runtime_small_in_place(rt, &on), TA_STATUS_OK);
    CHECK(on == 1, "any non-zero turns it on, got %d", on);
    memset(c, 0, sizeof c);
    CHECK_STATUS(ta_gemm(tc, one, ta, tb, zero, &o, NULL, NULL), TA_STATUS_OK);
    CHECK(gemm_matches(a, b, c), "C = A B at return, without an event");
    CHECK(steals(rt) == 2, "in place again");

    /* Arguments. */
    CHECK_STATUS(ta_runtime_set_small_in_place(NULL, 1), TA_STATUS_NULL_HANDLE);
    CHECK_STATUS(ta_runtime_small_in_place(NULL, &on), TA_STATUS_NULL_HANDLE);
    CHECK_STATUS(ta_runtime_small_in_place(rt, NULL), TA_STATUS_NULL_POINTER);
    o.flags = 8; /* not a flag */
    ta_error *err = NULL;
    CHECK_STATUS(ta_gemm(tc, one, ta, tb, zero, &o, NULL, &err), TA_STATUS_INVALID_ARGUMENT);
    char msg[256];
    CHECK(strstr(err_message(err, msg, sizeof msg), "unknown flags 0x8") != NULL, "message: %s", msg);
    ta_error_free(err);

    MUST(ta_tensor_free(ta));
    MUST(ta_tensor_free(tb));
    MUST(ta_tensor_free(tc));
    MUST(ta_runtime_free(rt));
    return finish("test_in_place");
}
