/*
 * test_stale_kernel_ctx: a kernel's ctx must not be usable once that kernel
 * has returned, also not while a later kernel runs on the same thread.
 *
 * Header (ta_kernel_set_error): "ctx ... is valid only during that call and
 * on that thread (TA_STATUS_INVALID_HANDLE otherwise)". SPEC §3: a stale
 * handle yields a status.
 *
 * A ctx used to be checked against the addresses of the active contexts,
 * which repeat between kernels run at the same stack depth; contexts are now
 * unique tokens, and this test keeps a stale one rejected.
 */
#include "check.h"

static ta_kernel_ctx *k1_ctx;
static ta_status stale_set = 0xffff, stale_pfor = 0xffff;
static long pieces;

static void count_piece(size_t b, size_t e, void *ud) { (void)b; (void)e; (void)ud; atomic_inc(&pieces); }

static ta_status k1(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud;
    k1_ctx = ctx; /* kept past the call: a bug in the caller, which the library must catch */
    return TA_STATUS_OK;
}

static ta_status k2(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud;
    stale_set = ta_kernel_set_error(k1_ctx, "message set through k1's stale ctx");
    stale_pfor = ta_kernel_parallel_for(k1_ctx, 0, 4, 1, count_piece, NULL);
    (void)ctx;
    return 3; /* k2 fails, without setting a message of its own */
}

int main(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(1, &rt, NULL)); /* one worker: k1 and k2 run on the same thread */
    ta_tensor *t = zeros1(TA_DTYPE_F64, 1);
    ta_submit o = on_runtime(rt);
    ta_access a = { t, TA_MODE_UPDATE };
    ta_event *e1 = NULL, *e2 = NULL;
    MUST(ta_kernel_submit(k1, NULL, "k1", &a, 1, &o, &e1, NULL));
    MUST(ta_kernel_submit(k2, NULL, "k2", &a, 1, &o, &e2, NULL));
    CHECK_STATUS(wait_event(e1, 60), TA_STATUS_OK);
    CHECK_STATUS(wait_event(e2, 60), TA_STATUS_KERNEL_FAILED);

    printf("inside k2, ta_kernel_set_error(k1's ctx) -> %s, ta_kernel_parallel_for(k1's ctx) -> %s\n",
           ta_status_name(stale_set), ta_status_name(stale_pfor));
    CHECK_STATUS(stale_set, TA_STATUS_INVALID_HANDLE);
    CHECK_STATUS(stale_pfor, TA_STATUS_INVALID_HANDLE);
    ta_error *e = event_error(e2);
    char msg[128];
    err_message(e, msg, sizeof msg);
    printf("k2's error message: '%s'\n", msg);
    CHECK(strstr(msg, "stale") == NULL, "k2's error carries the message set through k1's ctx: '%s'", msg);
    ta_error_free(e);

    ta_event_free(e1);
    ta_event_free(e2);
    ta_tensor_free(t);
    MUST(ta_runtime_free(rt));
    return finish("test_stale_kernel_ctx");
}
