/*
 * test_wrapped_outputs: an operation never replaces the storage of a tensor
 * that wraps caller memory.
 *
 * ta_sum, ta_dot and ta_norm2 into a wrapped one-element buffer write their
 * 0-d result there (the tensor keeps its extents, the release callback does
 * not fire until the tensor is freed). ta_permute, ta_conj,
 * ta_assign_product, ta_contract and ta_sum over an axis into a wrapped
 * destination of another shape are TA_STATUS_SHAPE_MISMATCH at submission,
 * leaving the buffer and the tensor as they were. A tensor the library owns
 * may still be given another shape by these operations.
 */
#include "check.h"

static ta_runtime *rt;
static long released;

static void on_release(void *ud, void *data) {
    (void)ud; (void)data;
    atomic_inc(&released);
}

static ta_tensor *wrap(double *buf, size_t rank, const size_t *ext) {
    ta_tensor *t = NULL;
    MUST(ta_tensor_wrap(TA_DTYPE_F64, rank, ext, NULL, TA_ORDER_ROW_MAJOR, buf, on_release, NULL, &t, NULL));
    return t;
}

/* `s` is the submission's status; `*ev` its event (read after the call). */
static ta_status done(ta_status s, ta_event **ev) {
    if (s == TA_STATUS_OK) s = wait_event(*ev, 60);
    ta_event_free(*ev);
    *ev = NULL;
    return s;
}

/* `s` is the submission's status, `*pe` its error (read after the call). */
static void check_mismatch(ta_status s, ta_error **pe, const char *what) {
    char msg[256];
    ta_error *e = *pe;
    *pe = NULL;
    CHECK(s == TA_STATUS_SHAPE_MISMATCH, "%s: %s (%s)", what, ta_status_name(s), err_message(e, msg, sizeof msg));
    CHECK(e && strstr(err_message(e, msg, sizeof msg), "caller memory"), "%s: message '%s'", what, msg);
    ta_error_free(e);
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    size_t e4 = 4, e23[2] = { 2, 3 }, e32[2] = { 3, 2 }, one = 1;
    const double xv[4] = { 1, 2, 3, 4 }, yv[4] = { 2, -1, 0.5, 3 };
    ta_tensor *x = NULL, *y = NULL, *m = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &e4, NULL, TA_ORDER_ROW_MAJOR, xv, &x, NULL));
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &e4, NULL, TA_ORDER_ROW_MAJOR, yv, &y, NULL));
    const double mv[6] = { 1, 2, 3, 4, 5, 6 };
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 2, e23, NULL, TA_ORDER_ROW_MAJOR, mv, &m, NULL));
    ta_submit o = on_runtime(rt);

    /* 0-d results into a wrapped [1] buffer are written there. */
    double r[3] = { -7, -7, -7 };
    ta_tensor *rs = wrap(&r[0], 1, &one), *rd = wrap(&r[1], 1, &one), *rn = wrap(&r[2], 1, &one);
    ta_event *ev = NULL;
    CHECK_STATUS(done(ta_sum(rs, x, 0, NULL, &o, &ev, NULL), &ev), TA_STATUS_OK);
    ev = NULL;
    CHECK_STATUS(done(ta_dot(rd, x, y, 0, &o, &ev, NULL), &ev), TA_STATUS_OK);
    ev = NULL;
    CHECK_STATUS(done(ta_norm2(rn, x, &o, &ev, NULL), &ev), TA_STATUS_OK);
    double dot = 0, nrm = 0;
    for (int i = 0; i < 4; i++) { dot += xv[i] * yv[i]; nrm += xv[i] * xv[i]; }
    CHECK(r[0] == 10.0, "ta_sum wrote %g into the caller's buffer", r[0]);
    CHECK(r[1] == dot, "ta_dot wrote %g into the caller's buffer, expected %g", r[1], dot);
    CHECK(r[2] > 5.4772255 && r[2] < 5.4772256, "ta_norm2 wrote %.9g into the caller's buffer", r[2]);
    ta_tensor *outs[3] = { rs, rd, rn };
    for (int k = 0; k < 3; k++) {
        size_t rank = 9, ext = 9;
        MUST(ta_tensor_rank(outs[k], &rank));
        MUST(ta_tensor_extents(outs[k], &ext, 1));
        CHECK(rank == 1 && ext == 1, "output %d keeps extents [1] (rank %zu)", k, rank);
    }
    CHECK(atomic_get(&released) == 0, "no release while the tensors live (%ld)", atomic_get(&released));

    /* Results of another shape: refused at submission, buffers untouched. */
    double pbuf[6] = { 0, 0, 0, 0, 0, 0 }, cbuf[6] = { 0, 0, 0, 0, 0, 0 }, gbuf[4] = { 0, 0, 0, 0 }, sbuf[2] = { 0, 0 };
    ta_tensor *pd = wrap(pbuf, 2, e23), *cd = wrap(cbuf, 2, e32), *gd = wrap(gbuf, 1, &e4), *sd = wrap(sbuf, 1, &one);
    size_t perm[2] = { 1, 0 }, ax0[1] = { 1 }, ax1[1] = { 0 }, sumax[1] = { 0 };
    ta_error *e = NULL;
    ev = NULL;
    check_mismatch(ta_permute(pd, m, 2, perm, &o, &ev, &e), &e, "ta_permute into a wrapped 2x3 (result 3x2)");
    CHECK(ev == NULL, "no event");
    e = NULL;
    check_mismatch(ta_conj(cd, m, &o, NULL, &e), &e, "ta_conj into a wrapped 3x2 (result 2x3)");
    e = NULL;
    ta_tensor *sq = NULL;
    size_t e22[2] = { 2, 2 };
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, e22, TA_ORDER_ROW_MAJOR, &sq, NULL));
    check_mismatch(ta_assign_product(gd, real(1.0), sq, sq, &o, NULL, &e), &e, "ta_assign_product into a wrapped [4] (result 2x2)");
    e = NULL;
    check_mismatch(ta_contract(gd, real(1.0), sq, sq, 1, ax0, ax1, NULL, &o, NULL, &e), &e, "ta_contract into a wrapped [4]");
    e = NULL;
    check_mismatch(ta_sum(sd, m, 1, sumax, &o, NULL, &e), &e, "ta_sum over axis 0 into a wrapped [1] (result [3])");
    CHECK_STATUS(ta_tensor_wait(pd, SECONDS(60), NULL), TA_STATUS_OK);
    int untouched = 1;
    for (int i = 0; i < 6; i++) untouched &= pbuf[i] == 0 && cbuf[i] == 0;
    for (int i = 0; i < 4; i++) untouched &= gbuf[i] == 0;
    CHECK(untouched && sbuf[0] == 0, "refused operations wrote nothing");
    CHECK(atomic_get(&released) == 0, "no release fired (%ld)", atomic_get(&released));
    /* Same-shape results go into the caller's memory. */
    ev = NULL;
    CHECK_STATUS(done(ta_conj(pd, m, &o, &ev, NULL), &ev), TA_STATUS_OK);
    ev = NULL;
    CHECK_STATUS(done(ta_permute(cd, m, 2, perm, &o, &ev, NULL), &ev), TA_STATUS_OK);
    CHECK(pbuf[0] == 1 && pbuf[5] == 6 && cbuf[1] == 4 && cbuf[2] == 2, "in-place results: %g %g %g %g", pbuf[0], pbuf[5], cbuf[1], cbuf[2]);

    /* A tensor the library owns still takes another shape. */
    ta_tensor *own = zeros(TA_DTYPE_F64, 2, e23);
    ev = NULL;
    CHECK_STATUS(done(ta_permute(own, m, 2, perm, &o, &ev, NULL), &ev), TA_STATUS_OK);
    size_t oe[2] = { 0, 0 };
    MUST(ta_tensor_extents(own, oe, 2));
    CHECK(oe[0] == 3 && oe[1] == 2, "an owned output was reshaped to %zux%zu", oe[0], oe[1]);

    ta_tensor *all[] = { rs, rd, rn, pd, cd, gd, sd };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) ta_tensor_free(all[k]);
    ta_tensor_free(own); ta_tensor_free(sq); ta_tensor_free(x); ta_tensor_free(y); ta_tensor_free(m);
    ta_runtime_free(rt);
    CHECK(atomic_get(&released) == 7, "each wrap released once at the end (%ld)", atomic_get(&released));
    return finish("test_wrapped_outputs");
}
