/*
 * Poison through strided views is tracked per element (ta_tensor_slice:
 * "a failed write through a view poisons only the elements it wrote, and a
 * later overwrite cleans exactly what it writes").
 *
 * For pairs of slices S and W of a 6 x 6 tensor, with steps of 1 to 4 and
 * negative steps: a failing kernel updates T through S, a fill overwrites
 * T through W, and then every element is waited on through its own 1 x 1
 * view. The element must report the kernel's failure exactly when it lies
 * in S and not in W, by the sets the slices select, computed here.
 */
#include "check.h"

#define N 6

typedef struct {
    ta_slice rows, cols;
    int transpose; /* the kernel or fill goes through the transposed view */
} slice2;

static ta_status failing(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views;
    (void)nviews;
    (void)userdata;
    ta_kernel_set_error(ctx, "strided failure");
    return TA_STATUS_KERNEL_FAILED;
}

/* Whether index i is one of start, start + step, ... before stop. */
static int selects(ta_slice s, long i) {
    if (s.step > 0) return i >= s.start && i < s.stop && (i - s.start) % s.step == 0;
    return i <= s.start && i > s.stop && (s.start - i) % (-s.step) == 0;
}

static int in(const slice2 *s, int i, int j) { return selects(s->rows, i) && selects(s->cols, j); }

static ta_tensor *view_of(ta_tensor *t, const slice2 *s) {
    ta_slice sl[2] = {s->rows, s->cols};
    ta_tensor *v = NULL, *tv = NULL;
    MUST(ta_tensor_slice(t, sl, 2, &v, NULL));
    if (!s->transpose) return v;
    MUST(ta_tensor_transpose(v, &tv, NULL));
    MUST(ta_tensor_free(v));
    return tv;
}

static void run_pair(ta_runtime *rt, const slice2 *bad, const slice2 *fill, int fill_on) {
    size_t ext[2] = {N, N};
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ext, TA_ORDER_ROW_MAJOR, &t, NULL));
    ta_submit o = {0};
    o.runtime = rt;

    ta_tensor *vb = view_of(t, bad);
    ta_access a = {vb, TA_MODE_UPDATE};
    ta_event *ev = NULL;
    MUST(ta_kernel_submit(failing, NULL, "strided_kernel", &a, 1, &o, &ev, NULL));
    CHECK_STATUS(ta_event_wait(ev, TA_WAIT_FOREVER), TA_STATUS_KERNEL_FAILED);
    MUST(ta_event_free(ev));
    if (fill_on) {
        ta_tensor *vf = view_of(t, fill);
        ta_scalar one = {1.0, 0.0};
        MUST(ta_fill(vf, one, &o, NULL, NULL));
        MUST(ta_tensor_free(vf));
    }

    int wrong = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            ta_slice cell[2] = {{i, i + 1, 1, 0}, {j, j + 1, 1, 0}};
            ta_tensor *c = NULL;
            MUST(ta_tensor_slice(t, cell, 2, &c, NULL));
            int poisoned = in(bad, i, j) && !(fill_on && in(fill, i, j));
            ta_error *err = NULL;
            ta_status s = ta_tensor_wait(c, TA_WAIT_FOREVER, &err);
            ta_status want = poisoned ? TA_STATUS_KERNEL_FAILED : TA_STATUS_OK;
            if (s != want && wrong++ < 3)
                fprintf(stderr, "  element (%d, %d): %s, want %s\n", i, j, ta_status_name(s), ta_status_name(want));
            if (s == TA_STATUS_KERNEL_FAILED && err) {
                char origin[64];
                CHECK(!strcmp(err_origin(err, origin, sizeof origin), "strided_kernel"), "origin %s", origin);
            }
            ta_error_free(err);
            MUST(ta_tensor_free(c));
        }
    CHECK(wrong == 0,
          "%d elements wrong: kernel through rows %ld:%ld:%ld cols %ld:%ld:%ld%s, fill %s rows %ld:%ld:%ld cols "
          "%ld:%ld:%ld%s",
          wrong, (long)bad->rows.start, (long)bad->rows.stop, (long)bad->rows.step, (long)bad->cols.start,
          (long)bad->cols.stop, (long)bad->cols.step, bad->transpose ? " (transposed)" : "", fill_on ? "on" : "off",
          (long)fill->rows.start, (long)fill->rows.stop, (long)fill->rows.step, (long)fill->cols.start,
          (long)fill->cols.stop, (long)fill->cols.step, fill->transpose ? " (transposed)" : "");
    MUST(ta_tensor_free(vb));
    MUST(ta_tensor_free(t));
}

int main(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    const slice2 views[] = {
        {{1, 5, 2, 0}, {0, 6, 3, 0}, 0},  /* rows 1, 3; columns 0, 3 */
        {{0, 6, 2, 0}, {0, 6, 1, 0}, 0},  /* even rows */
        {{0, 6, 1, 0}, {1, 6, 2, 0}, 1},  /* odd columns, through the transpose */
        {{5, -1, -2, 0}, {4, 0, -3, 0}, 0}, /* rows 5, 3, 1; columns 4, 1 */
        {{0, 6, 3, 0}, {0, 6, 4, 0}, 0},  /* rows 0, 3; columns 0, 4 */
        {{1, 6, 4, 0}, {0, 6, 1, 0}, 1},  /* rows 1, 5 */
        {{0, 6, 1, 0}, {0, 6, 1, 0}, 0},  /* everything */
        {{2, 4, 1, 0}, {1, 6, 2, 0}, 0},  /* rows 2, 3; columns 1, 3, 5 */
    };
    const int nv = (int)(sizeof views / sizeof views[0]);
    for (int b = 0; b < nv; b++) {
        run_pair(rt, &views[b], &views[0], 0);
        for (int f = 0; f < nv; f++) run_pair(rt, &views[b], &views[f], 1);
    }
    MUST(ta_runtime_free(rt));
    size_t live = 1;
    MUST(ta_handles_live(&live));
    CHECK(live == 0, "%zu handles live", live);
    return finish("test_strided_poison");
}
