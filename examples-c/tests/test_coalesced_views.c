/*
 * Views of coalesced block views (ta_blocks_coalesce): a slice, transpose,
 * permutation or reshape of one is a coalesced view ordered on the same
 * tiles, as is its conjugate.
 *
 * A 6 x 6 column-major f64 array in 2 x 2 tiles, values v(i, j) = 10 i + j:
 *   - the transposed panel of tile rows 0..2 by tile columns 1..3 reads
 *     v(j, i + 2), and a strided, reversed slice of it reads its elements;
 *   - a gemm C = P^T P with P that transposed panel matches a product
 *     computed here;
 *   - a kernel that writes through a slice of the transposed panel (while a
 *     gate holds it) is seen by a later read of a tile it covers, and not
 *     before the gate opens;
 *   - the conjugate of a coalesced c128 panel reads the conjugated elements
 *     of its tiles, and its conjugate the original ones; it is read-only
 *     (a fill through it gives READ_ONLY, naming the conjugate); the
 *     conjugate of the real transposed panel reads the same values and is
 *     read-only too;
 *   - slices out of range give their status; a reshape that is not dense
 *     gives NOT_CONTIGUOUS.
 */
#include "check.h"

#define N 6
#define T 2

static double v(int i, int j) { return 10.0 * i + j; }

/* The elements of `t` (rank 2, r x c), row-major in `out`. */
static void read2(ta_tensor *t, size_t r, size_t c, double *out) {
    size_t ext[2] = {0, 0};
    MUST(ta_tensor_extents(t, ext, 2));
    CHECK(ext[0] == r && ext[1] == c, "extents %zu x %zu, want %zu x %zu", ext[0], ext[1], r, c);
    ta_event *ev = NULL;
    MUST(ta_copy_out(t, out, r * c, NULL, NULL, &ev, NULL));
    MUST(ta_event_wait(ev, TA_WAIT_FOREVER));
    MUST(ta_event_free(ev));
}

/* z(i, j) = (10 i + j) + (i - 2 j) I, stored as (re, im) pairs. */
static double zre(int i, int j) { return 10.0 * i + j; }
static double zim(int i, int j) { return (double)i - 2.0 * j; }

/* The conjugate of a coalesced c128 panel: tile columns 1..3 of a 4 x 6
 * column-major array in 2 x 2 tiles (columns 2..6). */
static void conjugate_of_a_complex_panel(ta_submit *o) {
    enum { R = 4, C = 6 };
    size_t ext[2] = {R, C}, tile[2] = {T, T};
    ta_blocks *b = NULL;
    MUST(ta_blocks_new_tiled(TA_DTYPE_C128, TA_DOMAIN_HOST, 2, ext, tile, TA_ORDER_COL_MAJOR, &b, NULL));
    ta_tensor *all = NULL;
    MUST(ta_blocks_all(b, &all, NULL));
    double host[2 * R * C]; /* column-major (re, im) pairs */
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            host[2 * (i + j * R)] = zre(i, j);
            host[2 * (i + j * R) + 1] = zim(i, j);
        }
    ptrdiff_t cs[2] = {1, R};
    MUST(ta_copy_in(all, host, 2, ext, cs, o, NULL, NULL));
    size_t lo[2] = {0, 1}, hi[2] = {2, 3};
    ta_tensor *panel = NULL, *pc = NULL, *pcc = NULL;
    MUST(ta_blocks_coalesce(b, 2, lo, hi, &panel, NULL));
    MUST(ta_tensor_conj(panel, &pc, NULL));
    MUST(ta_tensor_conj(pc, &pcc, NULL));
    int32_t ro = -1;
    MUST(ta_tensor_is_read_only(pc, &ro));
    CHECK(ro == 1, "the conjugate of a coalesced view is read-only (got %d)", ro);
    MUST(ta_tensor_is_read_only(panel, &ro));
    CHECK(ro == 0, "the coalesced view itself is writable (got %d)", ro);
    double got[2 * R * 4], back[2 * R * 4];
    ta_event *ev = NULL;
    MUST(ta_copy_out(pc, got, R * 4, NULL, o, &ev, NULL)); /* row-major 4 x 4 */
    MUST(ta_event_wait(ev, TA_WAIT_FOREVER));
    MUST(ta_event_free(ev));
    MUST(ta_copy_out(pcc, back, R * 4, NULL, o, &ev, NULL));
    MUST(ta_event_wait(ev, TA_WAIT_FOREVER));
    MUST(ta_event_free(ev));
    int bad = 0;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < 4; j++) {
            int k = 2 * (i * 4 + j);
            bad += got[k] != zre(i, j + 2) || got[k + 1] != -zim(i, j + 2);
            bad += back[k] != zre(i, j + 2) || back[k + 1] != zim(i, j + 2);
        }
    CHECK(bad == 0, "%d elements of the conjugated panel (or its conjugate) wrong", bad);
    ta_error *err = NULL;
    char msg[256];
    ta_scalar zero = {0, 0};
    CHECK_STATUS(ta_fill(pc, zero, o, NULL, &err), TA_STATUS_READ_ONLY);
    CHECK(strstr(err_message(err, msg, sizeof msg), "conj") != NULL, "message: %s", msg);
    ta_error_free(err);
    MUST(ta_tensor_free(pcc));
    MUST(ta_tensor_free(pc));
    MUST(ta_tensor_free(panel));
    MUST(ta_tensor_free(all));
    MUST(ta_blocks_free(b));
}

static gate g_gate;

/* Sets every element of its one view to -1, after the gate opens. */
static ta_status gated_write(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)nviews;
    (void)userdata;
    (void)ctx;
    gate_pass(&g_gate);
    const ta_view *w = &views[0];
    for (size_t i = 0; i < w->extents[0]; i++)
        for (size_t j = 0; j < w->extents[1]; j++)
            ((double *)w->data)[(ptrdiff_t)i * w->strides[0] + (ptrdiff_t)j * w->strides[1]] = -1;
    return TA_STATUS_OK;
}

int main(void) {
    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_submit o = {0};
    o.runtime = rt;
    size_t ext[2] = {N, N}, tile[2] = {T, T};
    ta_blocks *b = NULL;
    MUST(ta_blocks_new_tiled(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, ext, tile, TA_ORDER_COL_MAJOR, &b, NULL));
    ta_tensor *all = NULL;
    MUST(ta_blocks_all(b, &all, NULL));
    double host[N * N]; /* column-major */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) host[i + j * N] = v(i, j);
    size_t ce[2] = {N, N};
    ptrdiff_t cs[2] = {1, N};
    MUST(ta_copy_in(all, host, 2, ce, cs, &o, NULL, NULL));

    /* Tile rows 0..2 (rows 0..4), tile columns 1..3 (columns 2..6): 4 x 4. */
    size_t lo[2] = {0, 1}, hi[2] = {2, 3};
    ta_tensor *panel = NULL, *pt = NULL;
    MUST(ta_blocks_coalesce(b, 2, lo, hi, &panel, NULL));
    CHECK_STATUS(ta_tensor_transpose(panel, &pt, NULL), TA_STATUS_OK);
    double got[16];
    read2(pt, 4, 4, got);
    int bad = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) bad += got[i * 4 + j] != v(j, i + 2);
    CHECK(bad == 0, "%d elements of the transposed panel wrong", bad);

    /* Rows 3, 1 of the transposed panel, columns 0, 2: v(j, i + 2) there. */
    ta_slice s[2] = {{3, -1, -2, 0}, {0, 4, 2, 0}};
    ta_tensor *ps = NULL;
    MUST(ta_tensor_slice(pt, s, 2, &ps, NULL));
    double g4[4];
    read2(ps, 2, 2, g4);
    CHECK(g4[0] == v(0, 5) && g4[1] == v(2, 5) && g4[2] == v(0, 3) && g4[3] == v(2, 3),
          "slice of the transposed panel: %g %g %g %g", g4[0], g4[1], g4[2], g4[3]);
    size_t perm[2] = {1, 0};
    ta_tensor *pp = NULL;
    MUST(ta_tensor_permute(pt, perm, 2, &pp, NULL));
    read2(pp, 4, 4, got);
    bad = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) bad += got[i * 4 + j] != v(i, j + 2);
    CHECK(bad == 0, "%d elements of the permuted-back panel wrong", bad);

    /* C = P^T P with P the transposed panel (4 x 4), against loops. */
    ta_tensor *c = NULL;
    size_t e4[2] = {4, 4};
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, e4, TA_ORDER_ROW_MAJOR, &c, NULL));
    ta_scalar one = {1, 0}, zero = {0, 0};
    MUST(ta_gemm(c, one, panel, pt, zero, &o, NULL, NULL));
    read2(c, 4, 4, got);
    bad = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double want = 0; /* (panel * panel^T)(i, j) = sum_k v(i, k + 2) v(j, k + 2) */
            for (int k = 0; k < 4; k++) want += v(i, k + 2) * v(j, k + 2);
            bad += got[i * 4 + j] != want;
        }
    CHECK(bad == 0, "%d elements of panel * panel^T wrong", bad);

    /* Ordering: a gated write through rows 1..3 of the transposed panel
     * (columns 3, 4 of the array, rows 0..4) holds a later read of tile (1, 2). */
    gate_init(&g_gate);
    ta_slice rows[2] = {{1, 3, 1, 0}, {0, 4, 1, 0}};
    ta_tensor *pw = NULL;
    MUST(ta_tensor_slice(pt, rows, 2, &pw, NULL));
    ta_access a = {pw, TA_MODE_UPDATE};
    MUST(ta_kernel_submit(gated_write, NULL, "gated_write", &a, 1, &o, NULL, NULL));
    size_t idx[2] = {1, 2};
    ta_tensor *t12 = NULL; /* rows 2..4, columns 4..6 */
    MUST(ta_blocks_tile(b, 2, idx, &t12, NULL));
    double t4[4] = {0, 0, 0, 0};
    ta_event *ev = NULL;
    MUST(ta_copy_out(t12, t4, 4, NULL, &o, &ev, NULL));
    CHECK(gate_await_entered(&g_gate, 1, 10.0), "the gated write did not start");
    CHECK_STATUS(ta_event_wait(ev, 0), TA_STATUS_TIMEOUT);
    gate_open(&g_gate);
    MUST(ta_event_wait(ev, TA_WAIT_FOREVER));
    MUST(ta_event_free(ev));
    /* Row-major 2 x 2 of rows 2, 3 and columns 4, 5: column 4 was written. */
    CHECK(t4[0] == -1 && t4[1] == v(2, 5) && t4[2] == -1 && t4[3] == v(3, 5), "tile (1, 2) after the write: %g %g %g %g",
          t4[0], t4[1], t4[2], t4[3]);
    gate_destroy(&g_gate);

    /* Conjugates: of the real transposed panel (the same values,
     * read-only), and of a complex panel. */
    ta_tensor *ptc = NULL;
    MUST(ta_tensor_conj(pt, &ptc, NULL));
    int32_t ro = -1;
    MUST(ta_tensor_is_read_only(ptc, &ro));
    CHECK(ro == 1, "the conjugate of a real coalesced view is read-only (got %d)", ro);
    double plain[16]; /* the gated write above changed some: read them again */
    read2(pt, 4, 4, plain);
    read2(ptc, 4, 4, got);
    bad = 0;
    for (int k = 0; k < 16; k++) bad += got[k] != plain[k];
    CHECK(bad == 0, "%d elements of the real panel's conjugate differ from the panel's", bad);
    MUST(ta_tensor_free(ptc));
    conjugate_of_a_complex_panel(&o);

    /* Refusals. */
    ta_tensor *x = NULL;
    ta_slice out[2] = {{0, 5, 1, 0}, {0, 4, 1, 0}};
    CHECK_STATUS(ta_tensor_slice(pt, out, 2, &x, NULL), TA_STATUS_OUT_OF_RANGE);
    size_t flat[1] = {16};
    CHECK_STATUS(ta_tensor_reshape(pt, 1, flat, TA_ORDER_ROW_MAJOR, &x, NULL), TA_STATUS_NOT_CONTIGUOUS);
    CHECK(x == NULL, "an output written on failure");

    MUST(ta_tensor_free(t12));
    MUST(ta_tensor_free(pw));
    MUST(ta_tensor_free(c));
    MUST(ta_tensor_free(pp));
    MUST(ta_tensor_free(ps));
    MUST(ta_tensor_free(pt));
    MUST(ta_tensor_free(panel));
    MUST(ta_tensor_free(all));
    MUST(ta_blocks_free(b));
    MUST(ta_runtime_free(rt));
    size_t live = 1;
    MUST(ta_handles_live(&live));
    CHECK(live == 0, "%zu handles live", live);
    return finish("test_coalesced_views");
}
