/* A refused submission changes nothing: an operation whose output would be
 * constructed or given another shape, but which is refused afterwards (here:
 * its input is unconstructed), leaves the output as it was. Before the fix,
 * the output kept the new storage and the old one was freed at once, while an
 * earlier operation still running on it read freed memory (found by the C ABI
 * fuzzer under AddressSanitizer; valgrind shows it here too). */
#include "check.h"

static ta_status sum_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ctx;
    gate_pass((gate *)ud);
    const double *x = v[0].data;
    double s = 0;
    for (size_t i = 0; i < v[0].extents[0]; i++) s += x[i * v[0].strides[0]];
    double *out = v[1].data;
    *out = s;
    return TA_STATUS_OK;
}

int main(void) {
    /* 1. A constructed output with another shape, read by a running kernel. */
    gate g;
    gate_init(&g);
    double init[4] = {1, 2, 3, 4};
    size_t four = 4, one = 1;
    ta_tensor *dst, *src, *res;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &four, NULL, TA_ORDER_ROW_MAJOR, init, &dst, NULL));
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &src, NULL));
    res = zeros(TA_DTYPE_F64, 1, &one);
    ta_access acc[2] = {{dst, TA_MODE_READ}, {res, TA_MODE_WRITE}};
    ta_event *ev;
    MUST(ta_kernel_submit(sum_kernel, &g, "sum_kernel", acc, 2, NULL, &ev, NULL));
    CHECK(gate_await_entered(&g, 1, 10.0), "the kernel started");

    for (int k = 0; k < 3; k++) {
        ta_error *e = NULL;
        CHECK_STATUS(ta_conj(dst, src, NULL, NULL, &e), TA_STATUS_UNCONSTRUCTED);
        ta_error_free(e);
        CHECK_STATUS(ta_permute(dst, src, 0, NULL, NULL, NULL, NULL), TA_STATUS_UNCONSTRUCTED);
        CHECK_STATUS(ta_copy(dst, src, NULL, NULL, NULL), TA_STATUS_UNCONSTRUCTED);
    }
    size_t rank = 0, ext[4] = {0};
    MUST(ta_tensor_rank(dst, &rank));
    MUST(ta_tensor_extents(dst, ext, 4));
    CHECK(rank == 1 && ext[0] == 4, "dst keeps its shape [4] (rank %zu, extent %zu)", rank, ext[0]);

    gate_open(&g);
    CHECK_STATUS(ta_event_wait(ev, SECONDS(10)), TA_STATUS_OK);
    double out[4] = {0}, s = 0;
    ta_event *done;
    MUST(ta_copy_out(res, &s, 1, NULL, NULL, &done, NULL));
    CHECK_STATUS(ta_event_wait(done, SECONDS(10)), TA_STATUS_OK);
    ta_event_free(done);
    CHECK(s == 10.0, "the running kernel read the tensor's own data: sum %g, expected 10", s);
    MUST(ta_copy_out(dst, out, 4, NULL, NULL, &done, NULL));
    CHECK_STATUS(ta_event_wait(done, SECONDS(10)), TA_STATUS_OK);
    ta_event_free(done);
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 3 && out[3] == 4, "dst's data unchanged");

    /* 2. An unconstructed output stays unconstructed after a refused copy. */
    ta_tensor *u;
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
    CHECK_STATUS(ta_conj(u, src, NULL, NULL, NULL), TA_STATUS_UNCONSTRUCTED);
    CHECK_STATUS(ta_copy(u, src, NULL, NULL, NULL), TA_STATUS_UNCONSTRUCTED);
    CHECK_STATUS(ta_tensor_rank(u, &rank), TA_STATUS_UNCONSTRUCTED);

    ta_event_free(ev);
    ta_tensor_free(u);
    ta_tensor_free(dst);
    ta_tensor_free(src);
    ta_tensor_free(res);
    gate_destroy(&g);
    return finish("test_refused_submission");
}
