/*
 * test_ops: the values computed by copy_in/copy_out, fill, scale, axpy and
 * copy, for f32, f64, complex64 and complex128, in row-major, column-major,
 * padded, broadcast (zero-stride) and permuted 3-D layouts; integer dtypes
 * through a user kernel. Every result is compared with a plain C reference
 * loop. (Negative strides: see test_negative_strides.c, a known library gap.)
 *
 * Exactness: test values are small multiples of 1/4 (imaginary parts of 1/2)
 * and scalars are small dyadic numbers, so every sum and product is exactly
 * representable in float and double; results are therefore compared exactly,
 * and the reference arithmetic may be done in double complex for every dtype.
 */
#include "dtypes.h"

static ta_runtime *rt;

static ta_submit opts(void) { return on_runtime(rt); }

static void release_free(void *userdata, void *data) {
    (void)userdata;
    free(data);
}

static void wait_ok(ta_event *ev, const char *what) {
    ta_status s = wait_event(ev, 60);
    CHECK(s == TA_STATUS_OK, "%s finished with %s", what, ta_status_name(s));
    ta_event_free(ev);
}

/* Copy a rank-2 tensor out as dense row-major. */
static void out_rm(const dtinfo *d, const ta_tensor *t, void *dst, size_t n) {
    ta_submit o = opts();
    ta_event *ev = NULL;
    MUST(ta_copy_out(t, dst, n, NULL, &o, &ev, NULL));
    wait_ok(ev, "copy_out");
    (void)d;
}

static void check_layout(const ta_tensor *t, size_t rank, const size_t *ext, const ptrdiff_t *str, const char *what) {
    size_t r = 0, e[4] = { 0 };
    ptrdiff_t s[4] = { 0 };
    MUST(ta_tensor_rank(t, &r));
    MUST(ta_tensor_extents(t, e, 4));
    MUST(ta_tensor_strides(t, s, 4));
    int ok = r == rank;
    for (size_t k = 0; ok && k < rank; k++) ok = e[k] == ext[k] && s[k] == str[k];
    CHECK(ok, "%s: layout rank %zu extents [%zu,%zu] strides [%td,%td]", what, r, e[0], e[1], s[0], s[1]);
}

/* ---- copies in and out ----------------------------------------------- */

static void test_copy_in_out(const dtinfo *d) {
    enum { R = 3, C = 4 };
    size_t ext[2] = { R, C };
    void *rm = alloc(d, R * C), *cm = alloc(d, R * C), *out = alloc(d, R * C);
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++) {
            put(d, rm, (ptrdiff_t)(i * C + j), val(d, (long)(i * C + j), 0));
            put(d, cm, (ptrdiff_t)(i + j * R), val(d, (long)(i * C + j), 1));
        }
    ta_submit o = opts();
    ta_event *ev = NULL;

    /* Row-major host data into an unconstructed tensor: it becomes dense row-major. */
    ta_tensor *t = NULL;
    MUST(ta_tensor_new(d->dt, TA_DOMAIN_HOST, &t, NULL));
    MUST(ta_copy_in(t, rm, 2, ext, NULL, &o, &ev, NULL));
    wait_ok(ev, "copy_in row-major");
    ptrdiff_t rm_str[2] = { C, 1 };
    check_layout(t, 2, ext, rm_str, "constructed by copy_in");
    out_rm(d, t, out, R * C);
    compare2(d, "copy_in/out row-major", out, C, 1, rm, C, 1, R, C);

    /* Column-major host data (strides {1, R}) into the same tensor. */
    ptrdiff_t cm_str[2] = { 1, R };
    MUST(ta_copy_in(t, cm, 2, ext, cm_str, &o, &ev, NULL));
    wait_ok(ev, "copy_in column-major");
    out_rm(d, t, out, R * C);
    compare2(d, "copy_in column-major", out, C, 1, cm, 1, R, R, C);

    /* copy_out into a column-major buffer. */
    void *cmo = alloc(d, R * C);
    MUST(ta_copy_out(t, cmo, R * C, cm_str, &o, &ev, NULL));
    wait_ok(ev, "copy_out column-major");
    compare2(d, "copy_out column-major", cmo, 1, R, cm, 1, R, R, C);

    /* copy_out into a padded buffer (leading dimension C + 3): padding untouched. */
    enum { LD = C + 3 };
    void *pad = alloc(d, R * LD);
    const double complex sentinel = -99.5;
    for (size_t k = 0; k < R * LD; k++) put(d, pad, (ptrdiff_t)k, sentinel);
    ptrdiff_t pad_str[2] = { LD, 1 };
    CHECK_STATUS(ta_copy_out(t, pad, R * LD - 3, pad_str, &o, NULL, NULL), TA_STATUS_OK); /* last row needs only C */
    MUST(ta_tensor_wait(t, SECONDS(60), NULL));
    compare2(d, "copy_out padded", pad, LD, 1, cm, 1, R, R, C);
    int untouched = 1;
    for (size_t i = 0; i < R; i++)
        for (size_t j = C; j < LD; j++) untouched &= get(d, pad, (ptrdiff_t)(i * LD + j)) == sentinel;
    CHECK(untouched, "%s copy_out padded: wrote into the padding", d->name);

    /* Broadcast: a zero stride reads one row for every row. */
    ptrdiff_t bc_str[2] = { 0, 1 };
    MUST(ta_copy_in(t, rm, 2, ext, bc_str, &o, &ev, NULL));
    wait_ok(ev, "copy_in zero stride");
    out_rm(d, t, out, R * C);
    compare2(d, "copy_in zero-stride broadcast", out, C, 1, rm, 0, 1, R, C);

    /* A 3-D permuted layout: host memory holds [k][i][j] (4 x 2 x 3) and is
     * read as a 2 x 3 x 4 tensor (i, j, k) with strides {3, 1, 6}. */
    size_t e3[3] = { 2, 3, 4 };
    ptrdiff_t s3[3] = { 3, 1, 6 };
    void *h3 = alloc(d, 24), *o3 = alloc(d, 24);
    for (long k = 0; k < 24; k++) put(d, h3, k, val(d, k, 2));
    ta_tensor *t3 = NULL;
    MUST(ta_tensor_new_copy(d->dt, 3, e3, s3, TA_ORDER_ROW_MAJOR, h3, &t3, NULL));
    out_rm(d, t3, o3, 24);
    int ok3 = 1;
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t k = 0; k < 4; k++)
                ok3 &= get(d, o3, (ptrdiff_t)(i * 12 + j * 4 + k)) == get(d, h3, (ptrdiff_t)(i * 3 + j + k * 6));
    CHECK(ok3, "%s: 3-D permuted ta_tensor_new_copy", d->name);
    ta_tensor_free(t3);

    ta_tensor_free(t);
    free(rm); free(cm); free(out); free(cmo); free(pad); free(h3); free(o3);
}

/* ---- fill, scale, axpy, copy ---------------------------------------- */

static void test_arith(const dtinfo *d) {
    enum { R = 5, C = 3 };
    size_t ext[2] = { R, C };
    void *xh = alloc(d, R * C), *yh = alloc(d, R * C), *out = alloc(d, R * C), *want = alloc(d, R * C);
    for (long k = 0; k < R * C; k++) {
        put(d, xh, k, val(d, k, 4));
        put(d, yh, k, val(d, k, 5));
    }
    ta_submit o = opts();
    ta_event *ev = NULL;

    /* x: column-major storage; y: row-major storage. */
    ta_tensor *x = NULL, *y = NULL;
    MUST(ta_tensor_new_zeros(d->dt, TA_DOMAIN_HOST, 2, ext, TA_ORDER_COL_MAJOR, &x, NULL));
    MUST(ta_tensor_new_zeros(d->dt, TA_DOMAIN_HOST, 2, ext, TA_ORDER_ROW_MAJOR, &y, NULL));
    ptrdiff_t cm_str[2] = { 1, R }, rm_str[2] = { C, 1 };
    check_layout(x, 2, ext, cm_str, "new_zeros column-major");
    check_layout(y, 2, ext, rm_str, "new_zeros row-major");
    out_rm(d, x, out, R * C);
    int zero = 1;
    for (long k = 0; k < R * C; k++) zero &= get(d, out, k) == 0;
    CHECK(zero, "%s: new_zeros is not zero", d->name);
    MUST(ta_copy_in(x, xh, 2, ext, NULL, &o, NULL, NULL));
    MUST(ta_copy_in(y, yh, 2, ext, NULL, &o, NULL, NULL));

    /* fill */
    ta_tensor *f = NULL;
    MUST(ta_tensor_new_zeros(d->dt, TA_DOMAIN_HOST, 2, ext, TA_ORDER_COL_MAJOR, &f, NULL));
    double complex fv = alpha_of(d, -1.25, 2.5);
    MUST(ta_fill(f, scalar_of(d, fv), &o, &ev, NULL));
    wait_ok(ev, "fill");
    out_rm(d, f, out, R * C);
    for (long k = 0; k < R * C; k++) put(d, want, k, fv);
    compare2(d, "fill", out, C, 1, want, C, 1, R, C);

    /* scale: x = a * x (column-major storage) */
    double complex a = alpha_of(d, 1.5, -0.75);
    MUST(ta_scale(x, scalar_of(d, a), &o, &ev, NULL));
    wait_ok(ev, "scale");
    out_rm(d, x, out, R * C);
    for (long k = 0; k < R * C; k++) put(d, want, k, a * get(d, xh, k));
    compare2(d, "scale", out, C, 1, want, C, 1, R, C);

    /* axpy: y = b * x + y, with x column-major and y row-major in memory */
    double complex b = alpha_of(d, -2.0, 0.5);
    MUST(ta_axpy(y, scalar_of(d, b), x, &o, &ev, NULL));
    wait_ok(ev, "axpy");
    out_rm(d, y, out, R * C);
    for (long k = 0; k < R * C; k++) put(d, want, k, b * (a * get(d, xh, k)) + get(d, yh, k));
    compare2(d, "axpy (mixed layouts)", out, C, 1, want, C, 1, R, C);

    /* copy: row-major y into column-major f, into an unconstructed tensor,
     * and into wrapped user memory with a padded column-major layout. */
    MUST(ta_copy(f, y, &o, &ev, NULL));
    wait_ok(ev, "copy into column-major");
    out_rm(d, f, out, R * C);
    compare2(d, "copy row-major -> column-major", out, C, 1, want, C, 1, R, C);

    ta_tensor *u = NULL;
    MUST(ta_tensor_new(d->dt, TA_DOMAIN_HOST, &u, NULL));
    MUST(ta_copy(u, f, &o, &ev, NULL));
    wait_ok(ev, "copy into unconstructed");
    check_layout(u, 2, ext, rm_str, "constructed by copy");
    out_rm(d, u, out, R * C);
    compare2(d, "copy into unconstructed", out, C, 1, want, C, 1, R, C);

    enum { LD = R + 2 };
    void *mem = alloc(d, LD * C);
    ptrdiff_t pstr[2] = { 1, LD };
    ta_tensor *w = NULL;
    MUST(ta_tensor_wrap(d->dt, 2, ext, pstr, TA_ORDER_ROW_MAJOR, mem, release_free, NULL, &w, NULL));
    check_layout(w, 2, ext, pstr, "wrapped padded");
    MUST(ta_copy(w, u, &o, &ev, NULL));
    wait_ok(ev, "copy into padded wrap");
    compare2(d, "copy into wrapped padded column-major memory", mem, 1, LD, want, C, 1, R, C);
    /* and from the wrapped tensor into a fresh one */
    ta_tensor *back = NULL;
    MUST(ta_tensor_new_zeros(d->dt, TA_DOMAIN_HOST, 2, ext, TA_ORDER_ROW_MAJOR, &back, NULL));
    MUST(ta_scale(w, scalar_of(d, alpha_of(d, 0.5, 0)), &o, NULL, NULL));
    MUST(ta_copy(back, w, &o, &ev, NULL));
    wait_ok(ev, "copy from padded wrap");
    out_rm(d, back, out, R * C);
    for (long k = 0; k < R * C; k++) put(d, want, k, 0.5 * get(d, want, k));
    compare2(d, "copy from wrapped padded memory", out, C, 1, want, C, 1, R, C);

    ta_tensor_free(x); ta_tensor_free(y); ta_tensor_free(f); ta_tensor_free(u);
    ta_tensor_free(w); /* `mem` goes back through release_free after the last access */
    ta_tensor_free(back);
    free(xh); free(yh); free(out); free(want);
}

/* ---- integer dtypes --------------------------------------------------- */

/* y[i, j] = 3 * x[i, j] - (i * C + j), for i32, through the views' strides. */
static ta_status int_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)ud;
    if (n != 2 || v[0].dtype != TA_DTYPE_I32 || v[1].dtype != TA_DTYPE_I32 || v[0].rank != 2) {
        ta_kernel_set_error(ctx, "int_kernel: bad operands");
        return 1;
    }
    const int32_t *x = v[0].data;
    int32_t *y = v[1].data;
    for (size_t i = 0; i < v[0].extents[0]; i++)
        for (size_t j = 0; j < v[0].extents[1]; j++) {
            ptrdiff_t xi = (ptrdiff_t)i * v[0].strides[0] + (ptrdiff_t)j * v[0].strides[1];
            ptrdiff_t yi = (ptrdiff_t)i * v[1].strides[0] + (ptrdiff_t)j * v[1].strides[1];
            y[yi] = 3 * x[xi] - (int32_t)(i * v[0].extents[1] + j);
        }
    return TA_STATUS_OK;
}

static void test_integers(void) {
    enum { R = 4, C = 5 };
    size_t ext[2] = { R, C };
    int32_t xh[R * C], out[R * C];
    for (int k = 0; k < R * C; k++) xh[k] = (k * 37) % 101 - 50;
    ta_submit o = opts();
    ta_event *ev = NULL;
    ta_tensor *x = NULL, *y = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_I32, TA_DOMAIN_HOST, 2, ext, TA_ORDER_COL_MAJOR, &x, NULL));
    MUST(ta_tensor_new(TA_DTYPE_I32, TA_DOMAIN_HOST, &y, NULL));
    MUST(ta_copy_in(x, xh, 2, ext, NULL, &o, NULL, NULL));
    MUST(ta_copy_in(y, xh, 2, ext, NULL, &o, NULL, NULL)); /* construct y (shape), then overwrite it */
    ta_access acc[2] = { { x, TA_MODE_READ }, { y, TA_MODE_WRITE } };
    MUST(ta_kernel_submit(int_kernel, NULL, "int_kernel", acc, 2, &o, &ev, NULL));
    wait_ok(ev, "i32 kernel");
    read_back(y, rt, out, R * C);
    int ok = 1;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) ok &= out[i * C + j] == 3 * xh[i * C + j] - (i * C + j);
    CHECK(ok, "i32 user kernel over a column-major input and row-major output");

    /* The built-in operations on i32: y = 2 * (y + (-3) * x), then fill. */
    MUST(ta_axpy(y, real(-3), x, &o, NULL, NULL));
    MUST(ta_scale(y, real(2), &o, NULL, NULL));
    read_back(y, rt, out, R * C);
    ok = 1;
    for (int k = 0; k < R * C; k++) ok &= out[k] == 2 * ((3 * xh[k] - k) + (-3) * xh[k]);
    CHECK(ok, "i32 axpy and scale");
    MUST(ta_fill(y, real(-7), &o, NULL, NULL));
    read_back(y, rt, out, R * C);
    ok = 1;
    for (int k = 0; k < R * C; k++) ok &= out[k] == -7;
    CHECK(ok, "i32 fill");
    ta_tensor_free(x);
    ta_tensor_free(y);

    /* Every integer dtype round-trips through copy_in (column-major) / copy_out. */
    static const struct { ta_dtype dt; size_t size; const char *name; } ints[] = {
        { TA_DTYPE_I8, 1, "i8" },  { TA_DTYPE_I16, 2, "i16" }, { TA_DTYPE_I32, 4, "i32" }, { TA_DTYPE_I64, 8, "i64" },
        { TA_DTYPE_U8, 1, "u8" },  { TA_DTYPE_U16, 2, "u16" }, { TA_DTYPE_U32, 4, "u32" }, { TA_DTYPE_U64, 8, "u64" },
    };
    for (size_t t = 0; t < sizeof ints / sizeof ints[0]; t++) {
        unsigned char in[R * C * 8], back[R * C * 8];
        for (size_t b = 0; b < sizeof in; b++) in[b] = (unsigned char)(b * 31 + t);
        ta_tensor *z = NULL;
        MUST(ta_tensor_new(ints[t].dt, TA_DOMAIN_HOST, &z, NULL));
        ptrdiff_t cm[2] = { 1, R };
        MUST(ta_copy_in(z, in, 2, ext, cm, &o, NULL, NULL));
        MUST(ta_copy_out(z, back, R * C, cm, &o, &ev, NULL));
        wait_ok(ev, ints[t].name);
        CHECK(memcmp(in, back, R * C * ints[t].size) == 0, "%s copy_in/copy_out round trip", ints[t].name);
        ta_tensor_free(z);
    }
}

/* ---- rank 0 and empty tensors ------------------------------------------ */

static void test_edges(void) {
    ta_submit o = opts();
    double s = 2.5, back = 0;
    ta_tensor *t = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &t, NULL));
    MUST(ta_copy_in(t, &s, 0, NULL, NULL, &o, NULL, NULL));
    MUST(ta_scale(t, real(4), &o, NULL, NULL));
    read_back(t, rt, &back, 1);
    CHECK(back == 10.0, "rank-0 tensor: got %g, want 10", back);
    size_t r = 9;
    MUST(ta_tensor_rank(t, &r));
    CHECK(r == 0, "rank-0 tensor has rank %zu", r);
    ta_tensor_free(t);

    size_t ext[2] = { 0, 3 };
    ta_tensor *e = zeros(TA_DTYPE_F64, 2, ext);
    MUST(ta_fill(e, real(1), &o, NULL, NULL));
    double dummy = 7;
    read_back(e, rt, &dummy, 1);
    CHECK(dummy == 7, "empty tensor copy_out wrote something");
    ta_tensor_free(e);
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    for (size_t i = 0; i < sizeof FLOATS / sizeof FLOATS[0]; i++) {
        int before = g_failures;
        test_copy_in_out(&FLOATS[i]);
        test_arith(&FLOATS[i]);
        printf("%-10s copy_in/copy_out (row/column-major, padded, zero stride, 3-D permuted), "
               "fill, scale, axpy, copy: %s\n",
               FLOATS[i].name, g_failures == before ? "ok" : "FAILED");
    }
    {
        int before = g_failures;
        test_integers();
        printf("integers   user kernel (i32), axpy/scale/fill (i32), round trips (8 dtypes): %s\n",
               g_failures == before ? "ok" : "FAILED");
    }
    {
        int before = g_failures;
        test_edges();
        printf("edges      rank 0, empty: %s\n", g_failures == before ? "ok" : "FAILED");
    }
    MUST(ta_runtime_free(rt));
    return finish("test_ops");
}
