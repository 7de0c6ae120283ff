/*
 * test_empty_views: operations on views that select no element.
 *
 * Slices with a zero extent (start == stop, on either axis of a matrix, and a
 * strided one) are valid views: every operation on them succeeds at once and
 * touches nothing. Fills, scales, copies (in, out and tensor to tensor),
 * kernels and waits on them succeed, the rest of the tensor keeps its values,
 * and they order nothing: an empty view's writer does not wait for a gated
 * writer of the whole tensor. The C tests run under valgrind too
 * (`make -C examples-c check-valgrind`), which checks that no uninitialised
 * memory is read on the way.
 */
#include "check.h"

static ta_runtime *rt;
static long kernel_calls;
static size_t kernel_len = 99;

static ta_status count_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)ud; (void)ctx;
    size_t len = 1;
    for (size_t a = 0; a < v[0].rank; a++) len *= v[0].extents[a];
    for (size_t k = 1; k < n; k++) (void)v[k];
    atomic_set((long *)&kernel_len, (long)len);
    atomic_inc(&kernel_calls);
    return TA_STATUS_OK;
}

static ta_tensor *slice2(const ta_tensor *t, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t cstep) {
    ta_slice s[2] = { { r0, r1, 1, 0 }, { c0, c1, cstep, 0 } };
    ta_tensor *v = NULL;
    MUST(ta_tensor_slice(t, s, 2, &v, NULL));
    return v;
}

/* `s` is the submission's status; `*ev` its event (read after the call). */
static ta_status run_wait(ta_status s, ta_event **ev) {
    if (s == TA_STATUS_OK) s = wait_event(*ev, 60);
    ta_event_free(*ev);
    *ev = NULL;
    return s;
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    size_t ext[2] = { 4, 5 };
    ta_tensor *t = zeros(TA_DTYPE_F64, 2, ext);
    double init[20];
    for (int i = 0; i < 20; i++) init[i] = i + 1;
    {
        ta_submit o = on_runtime(rt);
        ta_event *ev = NULL;
        CHECK_STATUS(run_wait(ta_copy_in(t, init, 2, ext, NULL, &o, &ev, NULL), &ev), TA_STATUS_OK);
    }
    ta_tensor *empties[4] = {
        slice2(t, 0, 4, 2, 2, 1), /* 4x0 */
        slice2(t, 3, 3, 0, 5, 1), /* 0x5 */
        slice2(t, 1, 1, 1, 1, 1), /* 0x0 */
        slice2(t, 0, 4, 4, 4, 2), /* 4x0, strided */
    };
    for (int k = 0; k < 4; k++) {
        ta_tensor *v = empties[k];
        size_t n = 7, ve[2] = { 9, 9 };
        MUST(ta_tensor_rank(v, &n));
        MUST(ta_tensor_extents(v, ve, 2));
        CHECK(n == 2 && ve[0] * ve[1] == 0, "view %d: rank %zu, extents %zux%zu", k, n, ve[0], ve[1]);
        ta_submit o = on_runtime(rt);
        ta_event *ev = NULL;
        /* Each kind of operation on the empty view. */
        CHECK_STATUS(run_wait(ta_fill(v, real(-1.0), &o, &ev, NULL), &ev), TA_STATUS_OK);
        ev = NULL;
        CHECK_STATUS(run_wait(ta_scale(v, real(3.0), &o, &ev, NULL), &ev), TA_STATUS_OK);
        ev = NULL;
        double none[1] = { 0 };
        CHECK_STATUS(run_wait(ta_copy_in(v, none, 2, ve, NULL, &o, &ev, NULL), &ev), TA_STATUS_OK);
        ev = NULL;
        double out[1] = { 42.0 };
        CHECK_STATUS(run_wait(ta_copy_out(v, out, 1, NULL, &o, &ev, NULL), &ev), TA_STATUS_OK);
        CHECK(out[0] == 42.0, "view %d: copy_out of nothing wrote %g", k, out[0]);
        ev = NULL;
        ta_tensor *dst = NULL;
        MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &dst, NULL));
        CHECK_STATUS(run_wait(ta_copy(dst, v, &o, &ev, NULL), &ev), TA_STATUS_OK);
        size_t de[2] = { 9, 9 };
        MUST(ta_tensor_extents(dst, de, 2));
        CHECK(de[0] == ve[0] && de[1] == ve[1], "view %d: copy constructs %zux%zu", k, de[0], de[1]);
        ev = NULL;
        ta_access acc = { v, TA_MODE_UPDATE };
        long before = atomic_get(&kernel_calls);
        CHECK_STATUS(run_wait(ta_kernel_submit(count_kernel, NULL, "empty", &acc, 1, &o, &ev, NULL), &ev), TA_STATUS_OK);
        CHECK(atomic_get(&kernel_calls) == before + 1 && atomic_get((long *)&kernel_len) == 0,
              "view %d: the kernel ran once on 0 elements (%ld calls, %ld elements)", k,
              atomic_get(&kernel_calls) - before, atomic_get((long *)&kernel_len));
        CHECK_STATUS(ta_tensor_wait(v, SECONDS(60), NULL), TA_STATUS_OK);
        ta_tensor_free(dst);
    }
    /* The tensor's elements are untouched. */
    double got[20];
    read_back(t, rt, got, 20);
    int same = 1;
    for (int i = 0; i < 20; i++) same &= got[i] == init[i];
    CHECK(same, "operations on empty views left the tensor as it was");

    /* An empty view's writer orders nothing: it completes while a writer
     * of the whole tensor is held at a gate. */
    {
        gate g;
        gate_init(&g);
        ta_submit o = on_runtime(rt);
        ta_access acc = { t, TA_MODE_UPDATE };
        ta_event *blocker = NULL, *ev = NULL;
        MUST(ta_kernel_submit(gate_kernel, &g, "gate", &acc, 1, &o, &blocker, NULL));
        CHECK(gate_await_entered(&g, 1, 60), "the gated writer started");
        CHECK_STATUS(run_wait(ta_fill(empties[0], real(7.0), &o, &ev, NULL), &ev), TA_STATUS_OK);
        CHECK_STATUS(ta_event_poll(blocker), TA_STATUS_PENDING);
        gate_open(&g);
        CHECK_STATUS(wait_event(blocker, 60), TA_STATUS_OK);
        ta_event_free(blocker);
        gate_destroy(&g);
    }
    for (int k = 0; k < 4; k++) ta_tensor_free(empties[k]);
    ta_tensor_free(t);
    ta_runtime_free(rt);
    return finish("test_empty_views");
}
