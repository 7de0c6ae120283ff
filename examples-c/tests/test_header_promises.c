/*
 * test_header_promises: behaviours the header documents, each checked here.
 *
 * - ta_gemm with beta 0 does not read C (NaN in C does not propagate).
 * - ta_potrf reads only the named triangle (NaN in the other one does not
 *   matter, and it is left as it was); a matrix that is not positive
 *   definite fails with TA_STATUS_INVALID_ARGUMENT and poisons A.
 * - ta_trsm reads only the named triangle of A.
 * - The linear algebra operations are float/complex only
 *   (TA_STATUS_UNSUPPORTED for an integer dtype); integer arithmetic wraps.
 * - TA_STATUS_ALIAS: disjoint views of one tensor are accepted in one
 *   operation, overlapping ones are refused.
 * - A rejected submission fires no callback, queues no completion entry and
 *   returns no event.
 * - Block handles report is_view 0; slices report 1.
 * - ta_runtime_shutdown twice is fine (and the runtime can still be freed);
 *   ta_runtime_free from a worker is
 *   TA_STATUS_WOULD_DEADLOCK.
 */
#include "check.h"
#include <math.h>

static ta_runtime *rt;
static long callbacks;
static ta_status free_from_worker = 0xffff;

static void on_done(ta_status s, void *ud) {
    (void)s; (void)ud;
    atomic_inc(&callbacks);
}

static ta_status free_rt_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ctx;
    free_from_worker = ta_runtime_free((ta_runtime *)ud);
    return TA_STATUS_OK;
}

static ta_status run(ta_status s, ta_event **ev) {
    if (s == TA_STATUS_OK) s = wait_event(*ev, 60);
    ta_event_free(*ev);
    *ev = NULL;
    return s;
}

static ta_tensor *mat(const double *v, size_t n) {
    size_t e[2] = { n, n };
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 2, e, NULL, TA_ORDER_ROW_MAJOR, v, &t, NULL));
    return t;
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_submit o = on_runtime(rt);
    ta_event *ev = NULL;
    double got[9];

    /* beta 0 does not read C. */
    {
        const double a[4] = { 1, 2, 3, 4 }, nan4[4] = { NAN, NAN, NAN, NAN };
        ta_tensor *A = mat(a, 2), *C = mat(nan4, 2);
        CHECK_STATUS(run(ta_gemm(C, real(1.0), A, A, real(0.0), &o, &ev, NULL), &ev), TA_STATUS_OK);
        read_back(C, rt, got, 4);
        CHECK(got[0] == 7 && got[1] == 10 && got[2] == 15 && got[3] == 22, "A*A with beta 0 over NaN: %g %g %g %g", got[0], got[1], got[2], got[3]);
        ta_tensor_free(A); ta_tensor_free(C);
    }
    /* potrf reads and writes only its triangle. */
    {
        const double a[9] = { 4, NAN, NAN, 2, 5, NAN, 2, 3, 6 };
        ta_tensor *A = mat(a, 3);
        CHECK_STATUS(run(ta_potrf(A, TA_UPLO_LOWER, &o, &ev, NULL), &ev), TA_STATUS_OK);
        read_back(A, rt, got, 9);
        /* L = [2 0 0; 1 2 0; 1 1 2] */
        CHECK(got[0] == 2 && got[3] == 1 && got[4] == 2 && got[6] == 1 && got[7] == 1 && got[8] == 2, "L: %g %g %g %g %g %g", got[0], got[3], got[4], got[6], got[7], got[8]);
        CHECK(isnan(got[1]) && isnan(got[2]) && isnan(got[5]), "the strict upper triangle is untouched");
        ta_tensor_free(A);
    }
    /* Not positive definite: INVALID_ARGUMENT, A poisoned. */
    {
        const double a[4] = { 1, 2, 2, 1 };
        ta_tensor *A = mat(a, 2);
        CHECK_STATUS(ta_potrf(A, TA_UPLO_LOWER, &o, &ev, NULL), TA_STATUS_OK);
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_INVALID_ARGUMENT);
        ta_error *e = event_error(ev);
        char msg[256];
        CHECK(e && strstr(err_message(e, msg, sizeof msg), "positive definite"), "message '%s'", msg);
        ta_error_free(e);
        ta_event_free(ev);
        ev = NULL;
        CHECK_STATUS(ta_tensor_wait(A, SECONDS(60), NULL), TA_STATUS_INVALID_ARGUMENT);
        ta_tensor_free(A);
    }
    /* trsm reads only the named triangle of A. */
    {
        const double l[4] = { 2, NAN, 1, 4 }, b[4] = { 2, 4, 5, 10 };
        ta_tensor *L = mat(l, 2), *B = mat(b, 2);
        CHECK_STATUS(run(ta_trsm(B, TA_SIDE_LEFT, TA_UPLO_LOWER, TA_DIAG_NON_UNIT, real(1.0), L, &o, &ev, NULL), &ev), TA_STATUS_OK);
        read_back(B, rt, got, 4);
        /* X = L^-1 B: row 0 = [1 2], row 1 = ([5 10] - [1 2]) / 4 = [1 2]. */
        CHECK(got[0] == 1 && got[1] == 2 && got[2] == 1 && got[3] == 2, "X: %g %g %g %g", got[0], got[1], got[2], got[3]);
        ta_tensor_free(L); ta_tensor_free(B);
    }
    /* Float-only operations; integer arithmetic wraps. */
    {
        size_t e2[2] = { 2, 2 }, n = 2;
        ta_tensor *I = zeros(TA_DTYPE_I32, 2, e2), *J = zeros(TA_DTYPE_I32, 2, e2), *K = zeros(TA_DTYPE_I32, 2, e2);
        ta_error *e = NULL;
        CHECK_STATUS(ta_gemm(K, real(1.0), I, J, real(0.0), &o, NULL, &e), TA_STATUS_UNSUPPORTED);
        ta_error_free(e);
        e = NULL;
        CHECK_STATUS(ta_potrf(I, TA_UPLO_LOWER, &o, NULL, &e), TA_STATUS_UNSUPPORTED);
        ta_error_free(e);
        const int8_t x[2] = { 127, -128 };
        ta_tensor *X = NULL, *Y = zeros1(TA_DTYPE_I8, n);
        MUST(ta_tensor_new_copy(TA_DTYPE_I8, 1, &n, NULL, TA_ORDER_ROW_MAJOR, x, &X, NULL));
        CHECK_STATUS(run(ta_fill(Y, real(1.0), &o, &ev, NULL), &ev), TA_STATUS_OK);
        CHECK_STATUS(run(ta_axpy(X, real(-1.0), Y, &o, &ev, NULL), &ev), TA_STATUS_OK);
        CHECK_STATUS(run(ta_axpy(X, real(2.0), Y, &o, &ev, NULL), &ev), TA_STATUS_OK);
        int8_t g8[2];
        read_back(X, rt, g8, 2);
        CHECK(g8[0] == -128 && g8[1] == -127, "127 + 1 wraps to -128: %d %d", g8[0], g8[1]);
        ta_tensor_free(I); ta_tensor_free(J); ta_tensor_free(K); ta_tensor_free(X); ta_tensor_free(Y);
    }
    /* ALIAS: disjoint views accepted, overlapping ones refused. */
    {
        ta_tensor *T = zeros1(TA_DTYPE_F64, 4), *lo = NULL, *hi = NULL, *mid = NULL;
        ta_slice s1 = { 0, 2, 1, 0 }, s2 = { 2, 4, 1, 0 }, s3 = { 1, 3, 1, 0 };
        MUST(ta_tensor_slice(T, &s1, 1, &lo, NULL));
        MUST(ta_tensor_slice(T, &s2, 1, &hi, NULL));
        MUST(ta_tensor_slice(T, &s3, 1, &mid, NULL));
        CHECK_STATUS(run(ta_fill(hi, real(3.0), &o, &ev, NULL), &ev), TA_STATUS_OK);
        CHECK_STATUS(run(ta_axpy(lo, real(2.0), hi, &o, &ev, NULL), &ev), TA_STATUS_OK);
        ta_error *e = NULL;
        CHECK_STATUS(ta_axpy(lo, real(1.0), mid, &o, &ev, &e), TA_STATUS_ALIAS);
        CHECK(ev == NULL, "no event for the refused submission");
        ta_error_free(e);
        CHECK_STATUS(ta_axpy(T, real(1.0), T, &o, NULL, NULL), TA_STATUS_ALIAS);
        read_back(T, rt, got, 4);
        CHECK(got[0] == 6 && got[1] == 6 && got[2] == 3 && got[3] == 3, "T: %g %g %g %g", got[0], got[1], got[2], got[3]);
        /* A rejected submission fires no callback and queues no completion entry. */
        ta_cq *cq = NULL;
        MUST(ta_cq_new(&cq, NULL));
        ta_submit n = on_runtime(rt);
        n.callback = on_done;
        n.cq = cq;
        n.cq_tag = 7;
        ev = NULL;
        CHECK_STATUS(ta_axpy(lo, real(1.0), mid, &n, &ev, NULL), TA_STATUS_ALIAS);
        CHECK_STATUS(ta_fill(T, real(0.5), &n, &ev, NULL), TA_STATUS_OK); /* one accepted, as a marker */
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        ta_event_free(ev);
        ev = NULL;
        /* Shutdown blocks until every notification has fired. */
        MUST(ta_runtime_shutdown(rt, TA_SHUTDOWN_DRAIN, NULL));
        ta_completion entries[4];
        size_t cnt = 0;
        MUST(ta_cq_poll(cq, entries, 4, &cnt));
        CHECK(cnt == 1 && entries[0].tag == 7 && entries[0].status == TA_STATUS_OK, "one entry, for the accepted submission (%zu)", cnt);
        for (size_t k = 0; k < cnt; k++) ta_error_free(entries[k].error);
        CHECK(atomic_get(&callbacks) == 1, "one callback, for the accepted submission (%ld)", atomic_get(&callbacks));
        ta_cq_free(cq);
        int32_t v = -1;
        MUST(ta_tensor_is_view(lo, &v));
        CHECK(v == 1, "a slice is a view");
        ta_tensor_free(lo); ta_tensor_free(hi); ta_tensor_free(mid); ta_tensor_free(T);
    }
    /* Block handles report is_view 0. */
    {
        ta_blocks *b = NULL;
        size_t ext[2] = { 4, 4 }, tile[2] = { 2, 2 };
        MUST(ta_blocks_new_tiled(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ext, tile, TA_ORDER_ROW_MAJOR, &b, NULL));
        ta_tensor *blk = NULL;
        MUST(ta_blocks_block(b, 1, &blk, NULL));
        int32_t v = -1;
        MUST(ta_tensor_is_view(blk, &v));
        CHECK(v == 0, "a block handle reports is_view %d", v);
        ta_tensor_free(blk);
        ta_blocks_free(b);
    }
    /* ta_runtime_free from a worker of that runtime: WOULD_DEADLOCK. */
    {
        ta_runtime *r2 = NULL;
        MUST(ta_runtime_new(1, &r2, NULL));
        ta_submit s2 = on_runtime(r2);
        ta_tensor *t = zeros1(TA_DTYPE_F64, 1);
        ta_access acc = { t, TA_MODE_UPDATE };
        CHECK_STATUS(run(ta_kernel_submit(free_rt_kernel, r2, "free_rt", &acc, 1, &s2, &ev, NULL), &ev), TA_STATUS_OK);
        CHECK(free_from_worker == TA_STATUS_WOULD_DEADLOCK, "ta_runtime_free from a worker: %s", ta_status_name(free_from_worker));
        /* Shutting down twice is fine. */
        CHECK_STATUS(ta_runtime_shutdown(r2, TA_SHUTDOWN_DRAIN, NULL), TA_STATUS_OK);
        CHECK_STATUS(ta_runtime_shutdown(r2, TA_SHUTDOWN_DRAIN, NULL), TA_STATUS_OK);
        CHECK_STATUS(ta_fill(t, real(1.0), &s2, NULL, NULL), TA_STATUS_SHUTDOWN);
        CHECK_STATUS(ta_runtime_free(r2), TA_STATUS_OK);
        ta_tensor_free(t);
    }
    ta_runtime_free(rt);
    return finish("test_header_promises");
}
