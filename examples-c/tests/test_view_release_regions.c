/*
 * Freeing a view handle while work on its tensor is pending holds up only
 * later work on the view's own elements.
 *
 * A read mapping of t[0:4] is held. Work goes through a view of t[4:8]
 * (a wait, a fill, an acquire), and that view handle is freed while the
 * mapping still holds t's queue non-idle. A new view of t[4:8] must then be
 * writable at once (a write acquire with a 5 s timeout is granted), and its
 * values are those written. Before, the freed view's release waited behind
 * every element of t, the held mapping included, and the write timed out.
 *
 * An empty view freed in the same state still lets go of its handle after
 * the work on it (ta_handles_live reaches 0).
 */
#include "check.h"

static ta_tensor *slice1(ta_tensor *t, int64_t lo, int64_t hi) {
    ta_slice s = {lo, hi, 1, 0};
    ta_tensor *v = NULL;
    MUST(ta_tensor_slice(t, &s, 1, &v, NULL));
    return v;
}

int main(void) {
    size_t n = 8;
    double init[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, init, &t, NULL));
    ta_tensor *lo = slice1(t, 0, 4);
    ta_mapping *held = NULL;
    MUST(ta_tensor_acquire(lo, TA_MODE_READ, TA_WAIT_FOREVER, &held, NULL));

    for (int pre = 0; pre < 3; pre++) {
        ta_tensor *hi = slice1(t, 4, 8);
        ta_scalar v = {10.0 + pre, 0};
        if (pre == 0) MUST(ta_tensor_wait(hi, SECONDS(5), NULL));
        if (pre == 1) {
            ta_event *ev = NULL;
            MUST(ta_fill(hi, v, NULL, &ev, NULL));
            MUST(ta_event_wait(ev, SECONDS(5)));
            MUST(ta_event_free(ev));
        }
        if (pre == 2) {
            ta_mapping *m = NULL;
            MUST(ta_tensor_acquire(hi, TA_MODE_UPDATE, SECONDS(5), &m, NULL));
            ta_view view;
            MUST(ta_mapping_view(m, &view));
            for (size_t i = 0; i < 4; i++) ((double *)view.data)[i * (size_t)view.strides[0]] = v.re;
            MUST(ta_mapping_free(m));
        }
        MUST(ta_tensor_free(hi)); /* t's queue is not idle: the held read of t[0:4] */

        ta_tensor *again = slice1(t, 4, 8);
        ta_mapping *w = NULL;
        CHECK_STATUS(ta_tensor_acquire(again, TA_MODE_WRITE, SECONDS(5), &w, NULL), TA_STATUS_OK);
        if (w) {
            ta_view view;
            MUST(ta_mapping_view(w, &view));
            for (size_t i = 0; i < 4; i++) ((double *)view.data)[i * (size_t)view.strides[0]] = 100.0 * pre + (double)i;
            MUST(ta_mapping_free(w));
        }
        double got[4] = {-1, -1, -1, -1};
        ta_event *ev = NULL;
        MUST(ta_copy_out(again, got, 4, NULL, NULL, &ev, NULL));
        MUST(ta_event_wait(ev, SECONDS(5)));
        MUST(ta_event_free(ev));
        CHECK(got[0] == 100.0 * pre && got[3] == 100.0 * pre + 3, "pre %d: t[4:8] = %g %g %g %g", pre, got[0], got[1],
              got[2], got[3]);
        MUST(ta_tensor_free(again));
    }

    /* An empty view, used and freed while the mapping is held. */
    ta_tensor *none = slice1(t, 5, 5);
    ta_scalar one = {1, 0};
    MUST(ta_fill(none, one, NULL, NULL, NULL));
    MUST(ta_tensor_free(none));

    MUST(ta_mapping_free(held));
    MUST(ta_tensor_wait(t, SECONDS(5), NULL));
    double all[8];
    ta_event *ev = NULL;
    MUST(ta_copy_out(t, all, 8, NULL, NULL, &ev, NULL));
    MUST(ta_event_wait(ev, SECONDS(5)));
    MUST(ta_event_free(ev));
    CHECK(all[0] == 0 && all[3] == 3 && all[4] == 200 && all[7] == 203, "t = %g %g %g %g %g %g %g %g", all[0], all[1],
          all[2], all[3], all[4], all[5], all[6], all[7]);
    MUST(ta_tensor_free(lo));
    MUST(ta_tensor_free(t));
    size_t live = 1;
    for (int k = 0; k < 500 && live; k++) {
        MUST(ta_handles_live(&live));
        if (live) sleep_ms(10);
    }
    CHECK(live == 0, "%zu handles live", live);
    return finish("test_view_release_regions");
}
