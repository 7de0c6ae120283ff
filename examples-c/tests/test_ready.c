/* ta_tensor_ready: a non-blocking event for everything enrolled on a tensor
 * so far, whose status is what ta_tensor_wait reports. */
#include "check.h"

static ta_status fail_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews; (void)userdata;
    ta_kernel_set_error(ctx, "ready test failure");
    return 7;
}

static ta_event *gated_update(const ta_tensor *t, gate *g) {
    ta_access a = { t, TA_MODE_UPDATE };
    ta_event *ev = NULL;
    MUST(ta_kernel_submit(gate_kernel, g, "gated", &a, 1, NULL, &ev, NULL));
    return ev;
}

int main(void) {
    /* An idle tensor: the event is complete at once. */
    ta_tensor *t = zeros1(TA_DTYPE_F64, 4);
    ta_event *r = NULL;
    CHECK_STATUS(ta_tensor_ready(t, &r, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_event_poll(r), TA_STATUS_OK);
    ta_event_free(r);

    /* Pending while a writer holds the tensor; later submissions are not waited for. */
    gate g1, g2;
    gate_init(&g1);
    gate_init(&g2);
    ta_event *w1 = gated_update(t, &g1);
    CHECK(gate_await_entered(&g1, 1, 60), "the first writer started");
    CHECK_STATUS(ta_tensor_ready(t, &r, NULL), TA_STATUS_OK);
    ta_event *w2 = gated_update(t, &g2);
    CHECK_STATUS(ta_event_poll(r), TA_STATUS_PENDING);
    gate_open(&g1);
    CHECK_STATUS(wait_event(r, 60), TA_STATUS_OK);
    CHECK(gate_await_entered(&g2, 1, 60), "the second writer started");
    CHECK_STATUS(ta_event_poll(w2), TA_STATUS_PENDING);
    ta_event_free(r);
    gate_open(&g2);
    CHECK_STATUS(wait_event(w2, 60), TA_STATUS_OK);
    CHECK_STATUS(wait_event(w1, 60), TA_STATUS_OK);
    ta_event_free(w1);
    ta_event_free(w2);

    /* A view waits only for the elements it touches. */
    ta_slice lo = { 0, 2, 1, 0 }, hi = { 2, 4, 1, 0 };
    ta_tensor *vlo = NULL, *vhi = NULL;
    MUST(ta_tensor_slice(t, &lo, 1, &vlo, NULL));
    MUST(ta_tensor_slice(t, &hi, 1, &vhi, NULL));
    gate g3;
    gate_init(&g3);
    ta_event *w3 = gated_update(vhi, &g3);
    CHECK(gate_await_entered(&g3, 1, 60), "the writer of the upper half started");
    CHECK_STATUS(ta_tensor_ready(vlo, &r, NULL), TA_STATUS_OK);
    CHECK_STATUS(wait_event(r, 60), TA_STATUS_OK);
    ta_event_free(r);
    ta_event *rhi = NULL, *rall = NULL;
    CHECK_STATUS(ta_tensor_ready(vhi, &rhi, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_tensor_ready(t, &rall, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_event_poll(rhi), TA_STATUS_PENDING);
    CHECK_STATUS(ta_event_poll(rall), TA_STATUS_PENDING);
    gate_open(&g3);
    CHECK_STATUS(wait_event(rhi, 60), TA_STATUS_OK);
    CHECK_STATUS(wait_event(rall, 60), TA_STATUS_OK);
    ta_event_free(rhi);
    ta_event_free(rall);
    ta_event_free(w3);

    /* A poisoned tensor: the failure's status and the very same error object. */
    ta_access a = { vlo, TA_MODE_WRITE };
    ta_event *fe = NULL;
    MUST(ta_kernel_submit(fail_kernel, NULL, "failing", &a, 1, NULL, &fe, NULL));
    CHECK_STATUS(ta_tensor_ready(t, &r, NULL), TA_STATUS_OK);
    CHECK_STATUS(wait_event(r, 60), TA_STATUS_KERNEL_FAILED);
    ta_error *e_op = event_error(fe), *e_ready = event_error(r);
    CHECK(e_op && e_ready && err_same(e_op, e_ready) == 1, "ready reports the failing operation's error object");
    char msg[128];
    CHECK(strcmp(err_message(e_ready, msg, sizeof msg), "ready test failure") == 0, "message: %s", msg);
    ta_error_free(e_op);
    ta_error_free(e_ready);
    ta_event_free(r);
    /* The clean half is still ready with OK. */
    CHECK_STATUS(ta_tensor_ready(vhi, &r, NULL), TA_STATUS_OK);
    CHECK_STATUS(wait_event(r, 60), TA_STATUS_OK);
    ta_event_free(r);
    ta_event_free(fe);

    /* A block view over several blocks: one event for all of them. */
    size_t ext[2] = { 4, 4 }, tile[2] = { 2, 2 }, z[2] = { 0, 0 }, two[2] = { 2, 2 }, one[2] = { 1, 1 };
    ta_blocks *b = NULL;
    MUST(ta_blocks_new_tiled(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ext, tile, TA_ORDER_ROW_MAJOR, &b, NULL));
    ta_tensor *all = NULL, *t11 = NULL;
    MUST(ta_blocks_coalesce(b, 2, z, two, &all, NULL));
    MUST(ta_blocks_tile(b, 2, one, &t11, NULL));
    gate g4;
    gate_init(&g4);
    ta_event *w4 = gated_update(t11, &g4);
    CHECK(gate_await_entered(&g4, 1, 60), "the writer of tile (1,1) started");
    CHECK_STATUS(ta_tensor_ready(all, &r, NULL), TA_STATUS_OK);
    CHECK_STATUS(ta_event_poll(r), TA_STATUS_PENDING);
    gate_open(&g4);
    CHECK_STATUS(wait_event(r, 60), TA_STATUS_OK);
    ta_event_free(r);
    ta_event_free(w4);

    /* Unconstructed; and handle problems. */
    ta_tensor *u = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F32, TA_DOMAIN_HOST, &u, NULL));
    CHECK_STATUS(ta_tensor_ready(u, &r, NULL), TA_STATUS_OK);
    CHECK_STATUS(wait_event(r, 60), TA_STATUS_UNCONSTRUCTED);
    ta_event_free(r);
    CHECK_STATUS(ta_tensor_ready(u, NULL, NULL), TA_STATUS_NULL_POINTER);
    CHECK_STATUS(ta_tensor_ready(NULL, &r, NULL), TA_STATUS_NULL_HANDLE);
    ta_tensor_free(u);
    CHECK_STATUS(ta_tensor_ready(u, &r, NULL), TA_STATUS_STALE_HANDLE);

    ta_tensor_free(all);
    ta_tensor_free(t11);
    ta_blocks_free(b);
    ta_tensor_free(vlo);
    ta_tensor_free(vhi);
    ta_tensor_free(t);
    gate_destroy(&g1);
    gate_destroy(&g2);
    gate_destroy(&g3);
    gate_destroy(&g4);
    return finish("test_ready");
}
