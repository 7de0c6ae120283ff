/* An access to no element (through an empty view) is still enrolled: a wait
 * on the tensor waits for it, and freeing the view's handle keeps the view
 * until that access has run. Before the fix, barriers skipped such accesses:
 * the release freed the view while its operation was still queued (a
 * heap-use-after-free found by the C ABI fuzzer under AddressSanitizer), and a
 * zero-timeout wait on the tensor returned OK with the operation pending. */
#include "check.h"

static long empty_runs;

static ta_status empty_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)ud; (void)ctx;
    if (n == 1 && v[0].rank == 1 && v[0].extents[0] == 0) atomic_inc(&empty_runs);
    return TA_STATUS_OK;
}

int main(void) {
    ta_runtime *rt;
    MUST(ta_runtime_new(1, &rt, NULL));
    ta_submit opts = on_runtime(rt);
    for (int round = 0; round < 20; round++) {
        gate g;
        gate_init(&g);
        ta_tensor *other = zeros1(TA_DTYPE_F64, 1), *t = zeros1(TA_DTYPE_F64, 8), *empty;
        /* Hold the only worker, so the empty-view kernel stays queued. */
        ta_access ga = {other, TA_MODE_UPDATE};
        MUST(ta_kernel_submit(gate_kernel, &g, "gate", &ga, 1, &opts, NULL, NULL));
        CHECK(gate_await_entered(&g, 1, 10.0), "the gate kernel started");
        ta_slice s = {3, 3, 1, 0};
        MUST(ta_tensor_slice(t, &s, 1, &empty, NULL));
        ta_access ea = {empty, TA_MODE_WRITE};
        ta_event *ev;
        MUST(ta_kernel_submit(empty_kernel, NULL, "empty", &ea, 1, &opts, &ev, NULL));
        MUST(ta_tensor_free(empty));                         /* released with its access pending */
        CHECK_STATUS(ta_tensor_wait(t, 0, NULL), TA_STATUS_TIMEOUT);  /* the empty access is enrolled */
        CHECK_STATUS(ta_event_poll(ev), TA_STATUS_PENDING);
        gate_open(&g);
        CHECK_STATUS(ta_event_wait(ev, SECONDS(10)), TA_STATUS_OK);
        CHECK_STATUS(ta_tensor_wait(t, SECONDS(10), NULL), TA_STATUS_OK);
        ta_event_free(ev);
        ta_tensor_free(t);
        ta_tensor_free(other);
        gate_destroy(&g);
    }
    CHECK(atomic_get(&empty_runs) == 20, "the empty-view kernel ran %ld times, want 20", atomic_get(&empty_runs));
    MUST(ta_runtime_free(rt));
    return finish("test_empty_view_release");
}
