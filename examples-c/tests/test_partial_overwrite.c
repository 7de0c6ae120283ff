/*
 * test_partial_overwrite: poison is tracked per element (SPEC §2.2).
 *
 * A failed write poisons exactly what it wrote; a successful pure overwrite
 * (ta_fill, ta_copy_in, ta_copy) cleans exactly what it wrote, also when it
 * covers only part of a poisoned region; a read fails only if it touches an
 * element whose latest write failed. Checked for: [0,4) poisoned then [0,2)
 * filled; ta_copy_in on [2,4); [0,4) refilled in two pieces; a whole
 * poisoned tensor with its first half refilled; in 2-d a row poisoned and a
 * column refilled (by ta_copy). Values of clean reads are compared with what
 * this program wrote.
 */
#include "check.h"

#define N 8
#define FAIL_NAME "poisoner"

static ta_runtime *rt;

static ta_status fail_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud;
    ta_kernel_set_error(ctx, "planned failure");
    return 5;
}

static void poison(const ta_tensor *t) {
    ta_submit o = on_runtime(rt);
    ta_access acc = { t, TA_MODE_UPDATE };
    ta_event *ev = NULL;
    MUST(ta_kernel_submit(fail_kernel, NULL, FAIL_NAME, &acc, 1, &o, &ev, NULL));
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_KERNEL_FAILED);
    ta_event_free(ev);
}

static ta_tensor *range1(const ta_tensor *t, int64_t lo, int64_t hi) {
    ta_slice s = { lo, hi, 1, 0 };
    ta_tensor *v = NULL;
    MUST(ta_tensor_slice(t, &s, 1, &v, NULL));
    return v;
}

static void fill(const ta_tensor *t, double x) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    MUST(ta_fill(t, real(x), &o, &ev, NULL));
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
    ta_event_free(ev);
}

static void copy_in(const ta_tensor *t, const double *src, size_t n) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    MUST(ta_copy_in(t, src, 1, &n, NULL, &o, &ev, NULL));
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
    ta_event_free(ev);
}

/* Read `t` (n elements): TA_STATUS_OK and the values in `out`, or the
 * failure status, which must then be the planned kernel's error. */
static ta_status read(const ta_tensor *t, double *out, size_t n) {
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    MUST(ta_copy_out(t, out, n, NULL, &o, &ev, NULL));
    ta_status s = wait_event(ev, 60);
    if (s != TA_STATUS_OK) {
        ta_error *e = event_error(ev);
        char origin[64];
        CHECK(e && strcmp(err_origin(e, origin, sizeof origin), FAIL_NAME) == 0, "a failed read reports the kernel's error (origin '%s')", origin);
        ta_error_free(e);
    }
    ta_event_free(ev);
    return s;
}

static int all_eq(const double *got, const double *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) return 0;
    return 1;
}

static ta_tensor *fresh1(void) {
    double init[N];
    for (int i = 0; i < N; i++) init[i] = 10 + i;
    size_t n = N;
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, init, &t, NULL));
    return t;
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    double got[16];

    /* [0,4) poisoned, [0,2) filled: [0,2) reads, [2,4) fails, [4,8) reads. */
    {
        ta_tensor *t = fresh1(), *a = range1(t, 0, 4), *lo = range1(t, 0, 2), *hi = range1(t, 2, 4), *rest = range1(t, 4, 8);
        poison(a);
        fill(lo, 7.0);
        const double sevens[2] = { 7, 7 }, tail[4] = { 14, 15, 16, 17 };
        CHECK_STATUS(read(lo, got, 2), TA_STATUS_OK);
        CHECK(all_eq(got, sevens, 2), "[0,2) after the fill: %g %g", got[0], got[1]);
        CHECK_STATUS(read(hi, got, 2), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(read(a, got, 4), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(read(rest, got, 4), TA_STATUS_OK);
        CHECK(all_eq(got, tail, 4), "[4,8) was never poisoned");
        /* ta_copy_in on [2,4) cleans the rest: all of [0,4) reads. */
        const double src[2] = { -1, -2 }, want[4] = { 7, 7, -1, -2 };
        copy_in(hi, src, 2);
        CHECK_STATUS(read(hi, got, 2), TA_STATUS_OK);
        CHECK_STATUS(read(a, got, 4), TA_STATUS_OK);
        CHECK(all_eq(got, want, 4), "[0,4) after both overwrites");
        CHECK_STATUS(ta_tensor_wait(t, SECONDS(60), NULL), TA_STATUS_OK);
        ta_tensor_free(a); ta_tensor_free(lo); ta_tensor_free(hi); ta_tensor_free(rest); ta_tensor_free(t);
    }
    /* ta_copy_in alone on [2,4) of a poisoned [0,4): [2,4) reads, [0,2) fails. */
    {
        ta_tensor *t = fresh1(), *a = range1(t, 0, 4), *lo = range1(t, 0, 2), *hi = range1(t, 2, 4);
        poison(a);
        const double src[2] = { 3, 4 };
        copy_in(hi, src, 2);
        CHECK_STATUS(read(hi, got, 2), TA_STATUS_OK);
        CHECK(all_eq(got, src, 2), "[2,4) after copy_in");
        CHECK_STATUS(read(lo, got, 2), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(ta_tensor_wait(t, SECONDS(60), NULL), TA_STATUS_KERNEL_FAILED);
        ta_tensor_free(a); ta_tensor_free(lo); ta_tensor_free(hi); ta_tensor_free(t);
    }
    /* [0,4) refilled in two pieces (fill [0,1), fill [1,4)): the whole tensor is clean. */
    {
        ta_tensor *t = fresh1(), *a = range1(t, 0, 4), *p1 = range1(t, 0, 1), *p2 = range1(t, 1, 4);
        poison(a);
        fill(p1, 1.0);
        CHECK_STATUS(ta_tensor_wait(t, SECONDS(60), NULL), TA_STATUS_KERNEL_FAILED);
        fill(p2, 2.0);
        CHECK_STATUS(ta_tensor_wait(t, SECONDS(60), NULL), TA_STATUS_OK);
        const double want[N] = { 1, 2, 2, 2, 14, 15, 16, 17 };
        CHECK_STATUS(read(t, got, N), TA_STATUS_OK);
        CHECK(all_eq(got, want, N), "after two pieces");
        ta_tensor_free(a); ta_tensor_free(p1); ta_tensor_free(p2); ta_tensor_free(t);
    }
    /* A whole poisoned tensor with its first half refilled. */
    {
        ta_tensor *t = fresh1(), *first = range1(t, 0, 4), *second = range1(t, 4, 8), *mid = range1(t, 3, 5);
        poison(t);
        fill(first, 9.0);
        const double nines[4] = { 9, 9, 9, 9 };
        CHECK_STATUS(read(first, got, 4), TA_STATUS_OK);
        CHECK(all_eq(got, nines, 4), "first half after the fill");
        CHECK_STATUS(read(second, got, 4), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(read(mid, got, 2), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(read(t, got, N), TA_STATUS_KERNEL_FAILED);
        ta_tensor_free(first); ta_tensor_free(second); ta_tensor_free(mid); ta_tensor_free(t);
    }
    /* 2-d: row 1 poisoned, column 2 refilled by ta_copy. */
    {
        size_t ext[2] = { 4, 4 }, four = 4;
        double init[16];
        for (int i = 0; i < 16; i++) init[i] = i; /* read in column-major order */
        ta_tensor *m = NULL, *src = NULL;
        MUST(ta_tensor_new_copy(TA_DTYPE_F64, 2, ext, NULL, TA_ORDER_COL_MAJOR, init, &m, NULL));
        const double colv[4] = { 50, 51, 52, 53 };
        MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &four, NULL, TA_ORDER_ROW_MAJOR, colv, &src, NULL));
        ta_slice row1[2] = { { 1, 2, 1, 1 }, { 0, 4, 1, 0 } }, col2[2] = { { 0, 4, 1, 0 }, { 2, 3, 1, 1 } };
        ta_slice e12[2] = { { 1, 2, 1, 1 }, { 2, 3, 1, 1 } }, e10[2] = { { 1, 2, 1, 1 }, { 0, 1, 1, 1 } };
        ta_slice row0[2] = { { 0, 1, 1, 1 }, { 0, 4, 1, 0 } };
        ta_tensor *r1 = NULL, *c2 = NULL, *x12 = NULL, *x10 = NULL, *r0 = NULL;
        MUST(ta_tensor_slice(m, row1, 2, &r1, NULL));
        MUST(ta_tensor_slice(m, col2, 2, &c2, NULL));
        MUST(ta_tensor_slice(m, e12, 2, &x12, NULL));
        MUST(ta_tensor_slice(m, e10, 2, &x10, NULL));
        MUST(ta_tensor_slice(m, row0, 2, &r0, NULL));
        poison(r1);
        ta_submit o = on_runtime(rt);
        ta_event *ev = NULL;
        MUST(ta_copy(c2, src, &o, &ev, NULL));
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        ta_event_free(ev);
        CHECK_STATUS(read(c2, got, 4), TA_STATUS_OK);
        CHECK(all_eq(got, colv, 4), "column 2 after the copy");
        CHECK_STATUS(read(x12, got, 1), TA_STATUS_OK);
        CHECK(got[0] == 51, "element (1,2) is clean: %g", got[0]);
        CHECK_STATUS(read(x10, got, 1), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(read(r1, got, 4), TA_STATUS_KERNEL_FAILED);
        const double row0v[4] = { 0, 4, 50, 12 }; /* col-major source: m[i][j] = init[i + 4j] */
        CHECK_STATUS(read(r0, got, 4), TA_STATUS_OK);
        CHECK(all_eq(got, row0v, 4), "row 0: %g %g %g %g", got[0], got[1], got[2], got[3]);
        /* Refilling the rest of row 1 (columns 0, 1, 3) cleans the matrix. */
        ta_slice rest[3][2] = { { { 1, 2, 1, 1 }, { 0, 2, 1, 0 } }, { { 1, 2, 1, 1 }, { 3, 4, 1, 0 } }, { { 0, 0, 1, 0 }, { 0, 0, 1, 0 } } };
        for (int k = 0; k < 2; k++) {
            ta_tensor *p = NULL;
            MUST(ta_tensor_slice(m, rest[k], 2, &p, NULL));
            fill(p, -5.0);
            ta_tensor_free(p);
        }
        CHECK_STATUS(ta_tensor_wait(m, SECONDS(60), NULL), TA_STATUS_OK);
        CHECK_STATUS(read(m, got, 16), TA_STATUS_OK);
        /* Row-major read-back: row 1 is -5 -5 51 -5. */
        CHECK(got[4] == -5 && got[5] == -5 && got[6] == 51 && got[7] == -5 && got[2] == 50 && got[15] == 15,
              "the matrix after the refills: row 1 = %g %g %g %g", got[4], got[5], got[6], got[7]);
        ta_tensor_free(r1); ta_tensor_free(c2); ta_tensor_free(x12); ta_tensor_free(x10); ta_tensor_free(r0);
        ta_tensor_free(src); ta_tensor_free(m);
    }
    ta_runtime_free(rt);
    return finish("test_partial_overwrite");
}
