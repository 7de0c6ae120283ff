/*
 * test_negative_strides: host memory described with negative strides.
 *
 * SPEC §2: strides are in elements and "may be negative or zero"; §2.5: copy
 * in/out of host memory with any strides. The C ABI gives the host pointer
 * as the address of element [0, 0, ...] (as ta_view.data is defined), so a
 * negative stride addresses memory below that pointer: here the rows of a
 * 3 x 4 matrix are stored bottom-up, element [i, j] at base[(R-1-i)*C + j],
 * and the pointer passed is &base[(R-1)*C], with strides {-C, 1}.
 *
 * Negative strides used to be rejected ("host layout addresses memory
 * before the pointer"); this test keeps them working.
 */
#include "dtypes.h"

static ta_runtime *rt;

static ta_submit opts(void) { return on_runtime(rt); }

static void wait_ok(ta_event *ev, const char *what) {
    ta_status s = wait_event(ev, 60);
    CHECK(s == TA_STATUS_OK, "%s finished with %s", what, ta_status_name(s));
    ta_event_free(ev);
}

static void out_rm(const dtinfo *d, const ta_tensor *t, void *dst, size_t n) {
    ta_submit o = opts();
    ta_event *ev = NULL;
    MUST(ta_copy_out(t, dst, n, NULL, &o, &ev, NULL));
    wait_ok(ev, "copy_out");
    (void)d;
}

/* Negative strides: `src`/`dst`/`data` is the address of element [0, 0]
 * (as for ta_view.data), and a negative stride walks down from there. Here:
 * host rows stored bottom-up, element [i, j] at base[(R-1-i)*C + j]. */
static void test_negative_strides(const dtinfo *d) {
    enum { R = 3, C = 4 };
    size_t ext[2] = { R, C };
    void *buf = alloc(d, R * C), *out = alloc(d, R * C), *rev = alloc(d, R * C);
    for (long k = 0; k < R * C; k++) put(d, buf, k, val(d, k, 3));
    char *elem00 = (char *)buf + (size_t)(R - 1) * C * d->size; /* element [0, 0] */
    ptrdiff_t neg[2] = { -(ptrdiff_t)C, 1 };
    ta_submit o = opts();
    ta_event *ev = NULL;
    ta_error *e = NULL;
    char msg[256];

    ta_tensor *t = NULL;
    MUST(ta_tensor_new(d->dt, TA_DOMAIN_HOST, &t, NULL));
    ta_status s = ta_copy_in(t, elem00, 2, ext, neg, &o, &ev, &e);
    CHECK(s == TA_STATUS_OK, "%s ta_copy_in with strides {-%d, 1} from element [0,0]: %s (%s)", d->name, C,
          ta_status_name(s), err_message(e, msg, sizeof msg));
    ta_error_free(e);
    e = NULL;
    if (s == TA_STATUS_OK) {
        wait_ok(ev, "copy_in negative stride");
        out_rm(d, t, out, R * C);
        compare2(d, "copy_in negative row stride", out, C, 1, elem00, -C, 1, R, C);

        /* And back out through a negative stride. */
        s = ta_copy_out(t, (char *)rev + (size_t)(R - 1) * C * d->size, R * C, neg, &o, &ev, &e);
        CHECK(s == TA_STATUS_OK, "%s ta_copy_out with strides {-%d, 1}: %s (%s)", d->name, C, ta_status_name(s),
              err_message(e, msg, sizeof msg));
        ta_error_free(e);
        e = NULL;
        if (s == TA_STATUS_OK) {
            wait_ok(ev, "copy_out negative stride");
            compare2(d, "copy_out negative row stride", rev, C, 1, buf, C, 1, R, C);
        }
    }
    ta_tensor_free(t);

    /* A column-reversed host tensor made by copy (strides {C, -1} from the end of row 0). */
    ptrdiff_t negc[2] = { C, -1 };
    ta_tensor *t2 = NULL;
    s = ta_tensor_new_copy(d->dt, 2, ext, negc, TA_ORDER_ROW_MAJOR, (char *)buf + (size_t)(C - 1) * d->size, &t2, &e);
    CHECK(s == TA_STATUS_OK, "%s ta_tensor_new_copy with strides {%d, -1}: %s (%s)", d->name, C, ta_status_name(s),
          err_message(e, msg, sizeof msg));
    ta_error_free(e);
    e = NULL;
    if (s == TA_STATUS_OK) {
        out_rm(d, t2, out, R * C);
        compare2(d, "new_copy negative column stride", out, C, 1, (char *)buf + (size_t)(C - 1) * d->size, C, -1, R, C);
    }
    ta_tensor_free(t2);
    free(buf); free(out); free(rev);
}

static void test_wrap(const dtinfo *d) {
    enum { R = 3, C = 4 };
    size_t ext[2] = { R, C };
    void *buf = alloc(d, R * C), *out = alloc(d, R * C);
    for (long k = 0; k < R * C; k++) put(d, buf, k, val(d, k, 6));
    char *elem00 = (char *)buf + (size_t)(R - 1) * C * d->size;
    ptrdiff_t neg[2] = { -(ptrdiff_t)C, 1 };
    ta_tensor *t = NULL;
    ta_error *e = NULL;
    char msg[256];
    ta_status s = ta_tensor_wrap(d->dt, 2, ext, neg, TA_ORDER_ROW_MAJOR, elem00, NULL, NULL, &t, &e);
    CHECK(s == TA_STATUS_OK, "%s ta_tensor_wrap with strides {-%d, 1}: %s (%s)", d->name, C, ta_status_name(s),
          err_message(e, msg, sizeof msg));
    ta_error_free(e);
    if (s == TA_STATUS_OK) {
        out_rm(d, t, out, R * C);
        compare2(d, "wrap negative row stride", out, C, 1, elem00, -C, 1, R, C);
        ta_tensor_free(t);
    }
    free(buf);
    free(out);
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    for (size_t i = 0; i < sizeof FLOATS / sizeof FLOATS[0]; i++) {
        int before = g_failures;
        test_negative_strides(&FLOATS[i]);
        test_wrap(&FLOATS[i]);
        printf("%-10s negative strides (copy_in, copy_out, new_copy, wrap): %s\n", FLOATS[i].name,
               g_failures == before ? "ok" : "FAILED");
    }
    MUST(ta_runtime_free(rt));
    return finish("test_negative_strides");
}
