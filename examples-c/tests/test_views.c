/*
 * test_views: views through the C ABI (SPEC §2.3).
 *
 * A view (slice, permutation, transpose, conjugate, reshape) shares its
 * tensor's epoch queue, keeps its storage alive after the tensor's handle is
 * freed, writes through to it, and lets operations on disjoint parts run
 * concurrently while overlapping ones never do. Checks values against plain
 * C loops, orderings with gates, and misuse statuses.
 */
#include "check.h"

#include <complex.h>

static ta_runtime *rt;

static ta_submit opts(void) { return on_runtime(rt); }

static ta_tensor *iota(size_t rows, size_t cols) {
    double *d = malloc(rows * cols * sizeof *d);
    for (size_t i = 0; i < rows * cols; i++) d[i] = (double)i;
    size_t ext[2] = { rows, cols };
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 2, ext, NULL, TA_ORDER_ROW_MAJOR, d, &t, NULL));
    free(d);
    return t;
}

static ta_tensor *slice2(const ta_tensor *t, ta_slice a, ta_slice b) {
    ta_slice s[2] = { a, b };
    ta_tensor *v = NULL;
    MUST(ta_tensor_slice(t, s, 2, &v, NULL));
    return v;
}

static ta_slice rng(int64_t start, int64_t stop, int64_t step) {
    ta_slice s = { start, stop, step, 0 };
    return s;
}

static ta_slice idx(int64_t i) {
    ta_slice s = { i, i + 1, 1, 1 };
    return s;
}

static void lifetime_and_write_through(void) {
    ta_tensor *t = iota(4, 3);
    ta_tensor *row = slice2(t, idx(2), rng(0, 3, 1));
    int is_view = 0;
    MUST(ta_tensor_is_view(row, &is_view));
    CHECK(is_view == 1, "a slice is a view");
    size_t rank = 9, ext[2] = { 0, 0 };
    MUST(ta_tensor_rank(row, &rank));
    MUST(ta_tensor_extents(row, ext, 2));
    CHECK(rank == 1 && ext[0] == 3, "row view has rank %zu extent %zu", rank, ext[0]);

    ta_submit o = opts();
    MUST(ta_scale(t, real(10.0), &o, NULL, NULL));
    MUST(ta_tensor_free(t)); /* the view keeps the storage alive */
    double got[3];
    read_back(row, rt, got, 3);
    CHECK(got[0] == 60 && got[1] == 70 && got[2] == 80, "view after parent freed: %g %g %g", got[0], got[1], got[2]);

    /* Write through a view, read through its parent (via another view). */
    ta_tensor *t2 = iota(2, 4);
    ta_tensor *col = slice2(t2, rng(0, 2, 1), rng(1, 2, 1));
    MUST(ta_fill(col, real(-1.0), &o, NULL, NULL));
    double all[8];
    read_back(t2, rt, all, 8);
    for (int i = 0; i < 8; i++) {
        double want = (i % 4 == 1) ? -1.0 : (double)i;
        CHECK(all[i] == want, "write-through element %d = %g, want %g", i, all[i], want);
    }
    ta_tensor_free(col);
    ta_tensor_free(t2);
    ta_tensor_free(row);
}

static void ordering_parent_then_view(void) {
    gate g;
    gate_init(&g);
    ta_tensor *t = iota(2, 2);
    ta_tensor *v = slice2(t, rng(1, 2, 1), rng(0, 2, 1));
    ta_submit o = opts();
    ta_access a = { t, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(gate_kernel, &g, "held_parent", &a, 1, &o, NULL, NULL));
    MUST(ta_fill(t, real(5.0), &o, NULL, NULL));
    double got[2] = { 0, 0 };
    ta_event *ev = NULL;
    MUST(ta_copy_out(v, got, 2, NULL, &o, &ev, NULL));
    CHECK(gate_await_entered(&g, 1, 30), "the parent's writer started");
    sleep_ms(20);
    CHECK_STATUS(ta_event_poll(ev), TA_STATUS_PENDING);
    gate_open(&g);
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
    CHECK(got[0] == 5 && got[1] == 5, "view read after parent writes: %g %g", got[0], got[1]);
    ta_event_free(ev);
    ta_tensor_free(v);
    ta_tensor_free(t);
    gate_destroy(&g);
}

static void conjugates(void) {
    double complex z[2] = { 1 + 2 * I, -3 + 0.5 * I };
    size_t n = 2;
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_C128, 1, &n, NULL, TA_ORDER_ROW_MAJOR, z, &t, NULL));
    ta_tensor *c = NULL, *cc = NULL;
    MUST(ta_tensor_conj(t, &c, NULL));
    MUST(ta_tensor_conj(c, &cc, NULL));
    double complex got[2];
    read_back(c, rt, got, 2);
    CHECK(got[0] == conj(z[0]) && got[1] == conj(z[1]), "conj view reads conjugates");
    read_back(cc, rt, got, 2);
    CHECK(got[0] == z[0] && got[1] == z[1], "conj of conj reads the original");
    int ro = 0;
    MUST(ta_tensor_is_read_only(c, &ro));
    CHECK(ro == 1, "a conj view is read-only");
    ta_submit o = opts();
    ta_error *e = NULL;
    CHECK_STATUS(ta_fill(c, real(0.0), &o, NULL, &e), TA_STATUS_READ_ONLY);
    ta_error_free(e);

    /* The conj of a real tensor: the identity, read-only. */
    ta_tensor *r = iota(1, 3), *rc = NULL;
    MUST(ta_tensor_conj(r, &rc, NULL));
    double rv[3];
    read_back(rc, rt, rv, 3);
    CHECK(rv[0] == 0 && rv[1] == 1 && rv[2] == 2, "conj of real is the identity");
    MUST(ta_tensor_is_read_only(rc, &ro));
    CHECK(ro == 1, "conj of real is read-only");
    CHECK_STATUS(ta_scale(rc, real(2.0), &o, NULL, NULL), TA_STATUS_READ_ONLY);
    ta_tensor_free(rc);
    ta_tensor_free(r);
    ta_tensor_free(cc);
    ta_tensor_free(c);
    ta_tensor_free(t);
}

static void edge_cases_and_misuse(void) {
    ta_tensor *t = iota(1, 5);
    ta_tensor *row = slice2(t, idx(0), rng(0, 5, 1)); /* rank 1, extent 5 */
    ta_slice s;
    ta_tensor *v = NULL;
    /* Empty slice. */
    s = rng(2, 2, 1);
    MUST(ta_tensor_slice(row, &s, 1, &v, NULL));
    size_t ext = 9;
    MUST(ta_tensor_extents(v, &ext, 1));
    CHECK(ext == 0, "empty slice has extent %zu", ext);
    ta_tensor_free(v);
    /* Negative step: 4, 2, 0. */
    s = rng(4, -1, -2);
    MUST(ta_tensor_slice(row, &s, 1, &v, NULL));
    double got[3];
    read_back(v, rt, got, 3);
    CHECK(got[0] == 4 && got[1] == 2 && got[2] == 0, "negative step: %g %g %g", got[0], got[1], got[2]);
    ta_tensor_free(v);
    /* Out of range. */
    ta_error *e = NULL;
    s = rng(0, 6, 1);
    v = NULL;
    CHECK_STATUS(ta_tensor_slice(row, &s, 1, &v, &e), TA_STATUS_OUT_OF_RANGE);
    CHECK(v == NULL, "no view on failure");
    ta_error_free(e);
    s = rng(0, 5, 0);
    CHECK_STATUS(ta_tensor_slice(row, &s, 1, &v, NULL), TA_STATUS_INVALID_ARGUMENT);
    /* Permute with the wrong rank; reshape of non-contiguous data. */
    size_t perm1[1] = { 0 };
    CHECK_STATUS(ta_tensor_permute(t, perm1, 1, &v, NULL), TA_STATUS_INVALID_ARGUMENT);
    ta_tensor *m = iota(3, 4), *tr = NULL;
    MUST(ta_tensor_transpose(m, &tr, NULL));
    size_t flat = 12;
    CHECK_STATUS(ta_tensor_reshape(tr, 1, &flat, TA_ORDER_ROW_MAJOR, &v, NULL), TA_STATUS_NOT_CONTIGUOUS);
    size_t bad[2] = { 5, 5 };
    CHECK_STATUS(ta_tensor_reshape(m, 2, bad, TA_ORDER_ROW_MAJOR, &v, NULL), TA_STATUS_SHAPE_MISMATCH);
    /* A good reshape and a transpose read right. */
    MUST(ta_tensor_reshape(m, 1, &flat, TA_ORDER_ROW_MAJOR, &v, NULL));
    double f[12];
    read_back(v, rt, f, 12);
    for (int i = 0; i < 12; i++) CHECK(f[i] == i, "reshape element %d = %g", i, f[i]);
    ta_tensor_free(v);
    read_back(tr, rt, f, 12);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) CHECK(f[i * 3 + j] == j * 4 + i, "transpose (%d,%d) = %g", i, j, f[i * 3 + j]);
    /* A view of an unconstructed tensor cannot be made. */
    ta_tensor *u = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
    CHECK_STATUS(ta_tensor_transpose(u, &v, NULL), TA_STATUS_UNCONSTRUCTED);
    /* Overlapping parts of one tensor cannot be input and output together. */
    ta_tensor *top = slice2(m, rng(0, 2, 1), rng(0, 4, 1));
    ta_tensor *mid = slice2(m, rng(1, 3, 1), rng(0, 4, 1));
    ta_tensor *bottom = slice2(m, rng(1, 3, 1), rng(0, 4, 1));
    ta_submit o = opts();
    CHECK_STATUS(ta_copy(top, mid, &o, NULL, NULL), TA_STATUS_ALIAS);
    ta_tensor_free(bottom);
    bottom = slice2(m, rng(2, 3, 1), rng(0, 4, 1));
    ta_tensor *top1 = slice2(m, rng(0, 1, 1), rng(0, 4, 1));
    MUST(ta_copy(top1, bottom, &o, NULL, NULL)); /* disjoint: allowed */
    read_back(m, rt, f, 12);
    for (int j = 0; j < 4; j++) CHECK(f[j] == 8 + j, "copied row element %d = %g", j, f[j]);
    /* A clone of a tensor is a new value; a clone of a view is the view. */
    ta_tensor *cl = NULL;
    ta_event *ev = NULL;
    MUST(ta_tensor_clone(m, &o, &cl, &ev, NULL));
    MUST(ta_fill(m, real(0.0), &o, NULL, NULL));
    CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
    read_back(cl, rt, f, 12);
    CHECK(f[0] == 8 && f[11] == 11, "the clone kept the values from before the later fill");
    ta_event_free(ev);
    ta_tensor *vc = NULL;
    ev = (ta_event *)1; /* must be set to NULL: nothing is scheduled */
    MUST(ta_tensor_clone(top1, &o, &vc, &ev, NULL));
    CHECK(ev == NULL, "cloning a view schedules nothing");
    int is_view = 0;
    MUST(ta_tensor_is_view(vc, &is_view));
    CHECK(is_view == 1, "the clone of a view is a view");
    ta_tensor *all[] = { vc, cl, top1, bottom, mid, top, u, tr, m, row, t };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ta_tensor_free(all[i]);
}

/* Two writers on disjoint halves run at the same time; overlapping ones never do. */
static long inside, max_inside, met;

static ta_status meet_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews; (void)ctx;
    long wait_for_partner = (long)(intptr_t)userdata;
    long now = atomic_inc(&inside);
    long m = atomic_get(&max_inside);
    while (now > m && !__atomic_compare_exchange_n(&max_inside, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    double t0 = now_s();
    if (wait_for_partner) {
        /* Stay until both writers have been inside together, or 5 s. */
        while (!atomic_get(&met) && now_s() - t0 < 5) {
            if (atomic_get(&inside) >= 2) atomic_set(&met, 1);
            sleep_ms(1);
        }
    } else {
        sleep_ms(20);
    }
    atomic_add(&inside, -1);
    return TA_STATUS_OK;
}

static void disjoint_writers_overlap(void) {
    ta_tensor *t = iota(8, 8);
    ta_tensor *left = slice2(t, rng(0, 8, 1), rng(0, 4, 1));
    ta_tensor *right = slice2(t, rng(0, 8, 1), rng(4, 8, 1));
    ta_tensor *middle = slice2(t, rng(0, 8, 1), rng(2, 6, 1));
    ta_submit o = opts();
    ta_access a = { left, TA_MODE_UPDATE }, b = { right, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(meet_kernel, (void *)1, "left", &a, 1, &o, NULL, NULL));
    MUST(ta_kernel_submit(meet_kernel, (void *)1, "right", &b, 1, &o, NULL, NULL));
    MUST(ta_tensor_wait(t, SECONDS(60), NULL));
    CHECK(atomic_get(&max_inside) == 2, "writers of disjoint halves ran together (max %ld inside)", atomic_get(&max_inside));
    atomic_set(&max_inside, 0);
    ta_tensor *seq[4] = { left, middle, right, middle };
    for (int i = 0; i < 4; i++) {
        ta_access x = { seq[i], TA_MODE_UPDATE };
        MUST(ta_kernel_submit(meet_kernel, (void *)0, "overlapping", &x, 1, &o, NULL, NULL));
    }
    MUST(ta_tensor_wait(t, SECONDS(60), NULL));
    CHECK(atomic_get(&max_inside) == 1, "overlapping writers never ran together (max %ld inside)", atomic_get(&max_inside));
    ta_tensor_free(middle);
    ta_tensor_free(right);
    ta_tensor_free(left);
    ta_tensor_free(t);
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    lifetime_and_write_through();
    ordering_parent_then_view();
    conjugates();
    edge_cases_and_misuse();
    disjoint_writers_overlap();
    MUST(ta_runtime_free(rt));
    return finish("test_views");
}
