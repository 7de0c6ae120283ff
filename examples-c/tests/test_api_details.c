/*
 * test_api_details: smaller promises of the header.
 *
 * - ta_error_message, ta_error_origin and ta_blas_info: a NULL buffer is
 *   allowed only with cap 0 (which reports the length);
 *   TA_STATUS_NULL_POINTER otherwise, writing nothing.
 * - A backend mask that allows no backend of the operands' domain (only
 *   CUDA, for host tensors) is TA_STATUS_NO_BACKEND at submission.
 * - Error origins are the C functions' names ("ta_tensor_slice",
 *   "ta_fill", "ta_tensor_free"), and a user kernel's origin is its name.
 * - Messages speak the C API's language (no Rust range notation).
 * - A user kernel may declare more than 64 accesses (here 100 disjoint
 *   elements of one tensor, and 70 separate tensors).
 */
#include "check.h"

static ta_runtime *rt;

static ta_status add_index(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)ud; (void)ctx;
    for (size_t k = 0; k < n; k++) *(double *)v[k].data += (double)k;
    return TA_STATUS_OK;
}

static ta_error *last(void) {
    ta_error *e = NULL;
    ta_last_error(&e);
    return e;
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    char buf[128], msg[256];
    size_t len = 0;

    /* NULL buffers. */
    ta_tensor *t = zeros1(TA_DTYPE_F64, 4);
    ta_slice bad = { -1, 2, 1, 0 };
    ta_tensor *view = NULL;
    ta_error *e = NULL;
    CHECK_STATUS(ta_tensor_slice(t, &bad, 1, &view, &e), TA_STATUS_OUT_OF_RANGE);
    CHECK(view == NULL, "no view on failure");
    CHECK_STATUS(ta_error_message(e, NULL, 0, &len), TA_STATUS_OK);
    CHECK(len > 0, "length of the message: %zu", len);
    len = 12345;
    CHECK_STATUS(ta_error_message(e, NULL, 16, &len), TA_STATUS_NULL_POINTER);
    CHECK(len == 12345, "len_out untouched on failure");
    CHECK_STATUS(ta_error_origin(e, NULL, 8, &len), TA_STATUS_NULL_POINTER);
    CHECK_STATUS(ta_blas_info(NULL, 8, &len), TA_STATUS_NULL_POINTER);
    CHECK_STATUS(ta_error_origin(e, buf, sizeof buf, NULL), TA_STATUS_OK);
    CHECK(strcmp(buf, "ta_tensor_slice") == 0, "a slice error's origin is '%s'", buf);
    ta_error_free(e);

    /* Origins of other functions' errors. */
    e = NULL;
    CHECK_STATUS(ta_fill(t, real(0.5), NULL, NULL, &e), TA_STATUS_OK); /* f64 takes 0.5 */
    ta_tensor *ti = zeros1(TA_DTYPE_I32, 2);
    CHECK_STATUS(ta_fill(ti, real(0.5), NULL, NULL, &e), TA_STATUS_INVALID_ARGUMENT);
    CHECK(e && strcmp(err_origin(e, buf, sizeof buf), "ta_fill") == 0, "a fill error's origin is '%s'", buf);
    ta_error_free(e);
    ta_tensor *gone = zeros1(TA_DTYPE_F64, 1);
    MUST(ta_tensor_free(gone));
    CHECK(ta_tensor_free(gone) != TA_STATUS_OK, "a second free fails");
    e = last();
    CHECK(e && strcmp(err_origin(e, buf, sizeof buf), "ta_tensor_free") == 0, "a free error's origin is '%s'", buf);
    ta_error_free(e);

    /* A CUDA-only mask for host operands. */
    {
        ta_submit o = on_runtime(rt);
        o.backends = 1u << TA_BACKEND_CUDA;
        ta_event *ev = NULL;
        e = NULL;
        CHECK_STATUS(ta_scale(t, real(2.0), &o, &ev, &e), TA_STATUS_NO_BACKEND);
        CHECK(ev == NULL, "no event");
        CHECK(e && strstr(err_message(e, msg, sizeof msg), "host"), "message '%s'", msg);
        CHECK(e && strcmp(err_origin(e, buf, sizeof buf), "ta_scale") == 0, "origin '%s'", buf);
        ta_error_free(e);
        /* Allowing the native backend too runs it. */
        o.backends |= 1u << TA_BACKEND_NATIVE;
        CHECK_STATUS(ta_scale(t, real(2.0), &o, &ev, NULL), TA_STATUS_OK);
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        ta_event_free(ev);
    }

    /* Messages without Rust notation. */
    {
        ta_blocks *bl = NULL;
        size_t ranks[2] = { 1, 1 }, exts[2] = { 2, 3 };
        MUST(ta_blocks_new_list(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ranks, exts, TA_ORDER_ROW_MAJOR, &bl, NULL));
        ta_tensor *v = NULL;
        e = NULL;
        CHECK_STATUS(ta_blocks_coalesce_range(bl, 0, 2, &v, &e), TA_STATUS_OUT_OF_RANGE);
        err_message(e, msg, sizeof msg);
        CHECK(strstr(msg, "..") == NULL && strstr(msg, "inclusive") != NULL, "message '%s'", msg);
        ta_error_free(e);
        CHECK_STATUS(ta_blocks_coalesce_range(bl, 0, 1, &v, NULL), TA_STATUS_OK);
        ta_tensor_free(v);
        ta_blocks_free(bl);
    }

    /* More than 64 accesses: 100 disjoint elements of one tensor... */
    {
        enum { K = 100 };
        ta_tensor *big = zeros1(TA_DTYPE_F64, K), *el[K];
        ta_access acc[K];
        for (int k = 0; k < K; k++) {
            ta_slice s = { k, k + 1, 1, 1 };
            MUST(ta_tensor_slice(big, &s, 1, &el[k], NULL));
            acc[k].tensor = el[k];
            acc[k].mode = TA_MODE_UPDATE;
        }
        ta_submit o = on_runtime(rt);
        ta_event *ev = NULL;
        e = NULL;
        CHECK_STATUS(ta_kernel_submit(add_index, NULL, "hundred", acc, K, &o, &ev, &e), TA_STATUS_OK);
        if (e) printf("message: %s\n", err_message(e, msg, sizeof msg));
        ta_error_free(e);
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        ta_event_free(ev);
        double got[K];
        read_back(big, rt, got, K);
        int ok = 1;
        for (int k = 0; k < K; k++) ok &= got[k] == k;
        CHECK(ok, "each of the 100 views was updated once (got[99] = %g)", got[K - 1]);
        for (int k = 0; k < K; k++) ta_tensor_free(el[k]);
        ta_tensor_free(big);
    }
    /* ...and 70 separate tensors, read by one kernel and updated by another. */
    {
        enum { K = 70 };
        ta_tensor *ts[K];
        ta_access acc[K];
        for (int k = 0; k < K; k++) {
            ts[k] = zeros(TA_DTYPE_F64, 0, NULL);
            acc[k].tensor = ts[k];
            acc[k].mode = TA_MODE_UPDATE;
        }
        ta_submit o = on_runtime(rt);
        ta_event *ev = NULL;
        CHECK_STATUS(ta_kernel_submit(add_index, NULL, "seventy", acc, K, &o, &ev, NULL), TA_STATUS_OK);
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        ta_event_free(ev);
        double v = -1;
        read_back(ts[K - 1], rt, &v, 1);
        CHECK(v == K - 1, "the 70th tensor holds %g", v);
        for (int k = 0; k < K; k++) ta_tensor_free(ts[k]);
    }
    ta_tensor_free(t);
    ta_tensor_free(ti);
    ta_runtime_free(rt);
    return finish("test_api_details");
}
