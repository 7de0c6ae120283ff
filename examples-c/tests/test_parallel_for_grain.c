/*
 * test_parallel_for_grain: ta_kernel_parallel_for honours its grain.
 *
 * Header: "run range(begin, end, userdata) over pieces of [begin, end) of at
 * least `grain` items". So with a range of 10 items and grain 4, every piece
 * has at least 4 items (one piece may be all 10), and a range of 1000 with
 * grain 100 has at most 10 pieces.
 *
 * The splitting used to halve while a range was longer than `grain`,
 * making pieces smaller than documented; this test keeps the minimum.
 */
#include "check.h"

#define MAXP 2048

static size_t sizes[MAXP];
static long npieces;

static void rec(size_t b, size_t e, void *ud) {
    (void)ud;
    long k = atomic_inc(&npieces) - 1;
    if (k < MAXP) sizes[k] = e - b;
}

struct req {
    size_t end, grain;
    ta_status st;
};

static ta_status kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n;
    struct req *r = ud;
    r->st = ta_kernel_parallel_for(ctx, 0, r->end, r->grain, rec, NULL);
    return TA_STATUS_OK;
}

int main(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_tensor *t = zeros1(TA_DTYPE_F64, 1);
    const struct req cases[] = { { 10, 4, 0 }, { 1000, 100, 0 }, { 1000, 300, 0 } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct req r = cases[c];
        atomic_set(&npieces, 0);
        ta_submit o = on_runtime(rt);
        ta_access a = { t, TA_MODE_UPDATE };
        ta_event *ev = NULL;
        MUST(ta_kernel_submit(kernel, &r, "kernel", &a, 1, &o, &ev, NULL));
        MUST(wait_event(ev, 60));
        ta_event_free(ev);
        CHECK_STATUS(r.st, TA_STATUS_OK);
        long np = atomic_get(&npieces), small = 0;
        size_t total = 0, smallest = (size_t)-1;
        printf("[0, %zu) grain %zu: %ld pieces of", r.end, r.grain, np);
        for (long k = 0; k < np && k < MAXP; k++) {
            total += sizes[k];
            if (sizes[k] < smallest) smallest = sizes[k];
            if (sizes[k] < r.grain) small++;
            if (k < 12) printf(" %zu", sizes[k]);
        }
        printf("%s\n", np > 12 ? " ..." : "");
        CHECK(total == r.end, "pieces cover %zu items, want %zu", total, r.end);
        CHECK(small == 0, "[0, %zu) grain %zu: %ld pieces have fewer than %zu items (smallest %zu)", r.end, r.grain,
              small, r.grain, smallest);
    }
    ta_tensor_free(t);
    MUST(ta_runtime_free(rt));
    return finish("test_parallel_for_grain");
}
