/*
 * Arguments at the edges of what the header allows: each gives the
 * documented status and message, names the C function that was called
 * (ta_error_origin), and never crashes (SPEC §3).
 *
 *   - slice steps far past the axis (up to INT64_MAX and INT64_MIN)
 *   - strides whose byte offsets do not fit a pointer offset (wrap,
 *     new_copy, copy_in, DLPack import), which were accepted and then read
 *     outside any allocation
 *   - the 64-axis limit at every entry (DLPack import, list block arrays,
 *     a contraction's result)
 *   - a runtime of SIZE_MAX threads (refused at once, not started thread by
 *     thread)
 *   - unknown submission flags: the message names only the unknown bits
 *   - the origins of the integer fills and scales, the `_t` products and
 *     ta_blocks_all; ta_blocks_all on an array of no tiles
 *   - messages in the C API's words (a reshape's order)
 */
#include "check.h"

#include <stddef.h>

static ta_tensor *f64_tensor(size_t rank, const size_t *ext) {
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, rank, ext, TA_ORDER_ROW_MAJOR, &t, NULL));
    return t;
}

/* `call` fails with `want`; its error names `origin` and its message holds `part`. */
#define EXPECT_ERROR(call, want, origin, part)                                                        \
    do {                                                                                              \
        ta_error *e_ = NULL;                                                                          \
        char m_[512], o_[128];                                                                        \
        CHECK_STATUS((call), (want));                                                                 \
        CHECK(e_ != NULL, "no error object");                                                         \
        if (e_) {                                                                                     \
            CHECK(!strcmp(err_origin(e_, o_, sizeof o_), (origin)), "origin %s, want %s", o_, origin); \
            CHECK(strstr(err_message(e_, m_, sizeof m_), (part)) != NULL, "message: %s", m_);         \
        }                                                                                             \
        ta_error_free(e_);                                                                            \
    } while (0)

static void slice_steps(void) {
    size_t ext[1] = {8};
    double vals[8] = {10, 11, 12, 13, 14, 15, 16, 17};
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, ext, NULL, TA_ORDER_ROW_MAJOR, vals, &t, NULL));
    const struct {
        int64_t start, stop, step;
        double first; /* the one element selected */
    } cases[] = {
        {0, 8, 8, 10},          {0, 8, INT64_MAX / 2, 10}, {0, 8, INT64_MAX - 6, 10}, {0, 8, INT64_MAX, 10},
        {3, 8, INT64_MAX, 13},  {7, -1, -8, 17},           {7, -1, INT64_MIN + 1, 17}, {7, -1, INT64_MIN, 17},
        {2, -1, INT64_MIN, 12},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ta_slice s = {cases[k].start, cases[k].stop, cases[k].step, 0};
        ta_tensor *v = NULL;
        ta_error *err = NULL;
        if (!CHECK_STATUS(ta_tensor_slice(t, &s, 1, &v, &err), TA_STATUS_OK)) {
            ta_error_free(err);
            continue;
        }
        size_t n = 0;
        MUST(ta_tensor_extents(v, &n, 1));
        double got = -1;
        ta_event *ev = NULL;
        MUST(ta_copy_out(v, &got, 1, NULL, NULL, &ev, NULL));
        MUST(ta_event_wait(ev, TA_WAIT_FOREVER));
        MUST(ta_event_free(ev));
        CHECK(n == 1 && got == cases[k].first, "slice {%lld, %lld, %lld}: extent %zu, element %g (want 1, %g)",
              (long long)cases[k].start, (long long)cases[k].stop, (long long)cases[k].step, n, got,
              cases[k].first);
        MUST(ta_tensor_free(v));
    }
    MUST(ta_tensor_free(t));
}

static void far_strides(void) {
    double mem[2] = {1, 2};
    size_t ext[1] = {2};
    /* Element 1 lies 2^63 bytes (2^60 doubles) on, or as far below. */
    const ptrdiff_t strides[] = {(ptrdiff_t)1 << 60, (ptrdiff_t)1 << 61, PTRDIFF_MAX, PTRDIFF_MIN,
                                 -((ptrdiff_t)1 << 60)};
    for (size_t k = 0; k < sizeof strides / sizeof strides[0]; k++) {
        const ptrdiff_t *st = &strides[k];
        ta_tensor *t = NULL;
        EXPECT_ERROR(ta_tensor_wrap(TA_DTYPE_F64, 1, ext, st, TA_ORDER_ROW_MAJOR, mem, NULL, NULL, &t, &e_),
                     TA_STATUS_INVALID_ARGUMENT, "ta_tensor_wrap", "too large");
        CHECK(t == NULL, "wrap wrote its output on failure");
        EXPECT_ERROR(ta_tensor_new_copy(TA_DTYPE_F64, 1, ext, st, TA_ORDER_ROW_MAJOR, mem, &t, &e_),
                     TA_STATUS_INVALID_ARGUMENT, "ta_tensor_new_copy", "offsets overflow");
        CHECK(t == NULL, "new_copy wrote its output on failure");
        ta_tensor *dst = f64_tensor(1, ext);
        EXPECT_ERROR(ta_copy_in(dst, mem, 1, ext, st, NULL, NULL, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_copy_in",
                     "offsets overflow");
        MUST(ta_tensor_free(dst));

        int64_t shape[1] = {2}, dl_strides[1] = {(int64_t)*st};
        ta_dl_managed_tensor m;
        memset(&m, 0, sizeof m);
        m.dl_tensor.data = mem;
        m.dl_tensor.device.device_type = TA_DL_DEVICE_CPU;
        m.dl_tensor.ndim = 1;
        m.dl_tensor.dtype.code = 2; /* kDLFloat */
        m.dl_tensor.dtype.bits = 64;
        m.dl_tensor.dtype.lanes = 1;
        m.dl_tensor.shape = shape;
        m.dl_tensor.strides = dl_strides;
        EXPECT_ERROR(ta_tensor_from_dlpack_legacy(&m, &t, &e_), TA_STATUS_INVALID_ARGUMENT,
                     "ta_tensor_from_dlpack_legacy", "too large");
        CHECK(t == NULL, "DLPack import wrote its output on failure");
    }
    /* The largest stride that fits still works (element 1 never read: extent 1). */
    ta_tensor *t = NULL;
    size_t one[1] = {1};
    ptrdiff_t big[1] = {PTRDIFF_MAX};
    MUST(ta_tensor_wrap(TA_DTYPE_F64, 1, one, big, TA_ORDER_ROW_MAJOR, mem, NULL, NULL, &t, NULL));
    MUST(ta_tensor_free(t));
}

static void ranks(void) {
    /* DLPack import of 65 axes of extent 1. */
    int64_t shape[65];
    for (int k = 0; k < 65; k++) shape[k] = 1;
    double x = 3;
    ta_dl_managed_tensor m;
    memset(&m, 0, sizeof m);
    m.dl_tensor.data = &x;
    m.dl_tensor.device.device_type = TA_DL_DEVICE_CPU;
    m.dl_tensor.ndim = 65;
    m.dl_tensor.dtype.code = 2;
    m.dl_tensor.dtype.bits = 64;
    m.dl_tensor.dtype.lanes = 1;
    m.dl_tensor.shape = shape;
    ta_tensor *t = NULL;
    EXPECT_ERROR(ta_tensor_from_dlpack_legacy(&m, &t, &e_), TA_STATUS_INVALID_ARGUMENT,
                 "ta_tensor_from_dlpack_legacy", "at most 64 axes");
    m.dl_tensor.ndim = 64; /* the limit itself is accepted */
    MUST(ta_tensor_from_dlpack_legacy(&m, &t, NULL));
    ta_slice s[64];
    for (int k = 0; k < 64; k++) s[k] = (ta_slice){0, 1, 1, 0};
    ta_tensor *v = NULL;
    MUST(ta_tensor_slice(t, s, 64, &v, NULL));
    MUST(ta_tensor_free(v));
    MUST(ta_tensor_free(t));

    /* A list block of 65 axes. */
    size_t r[2] = {2, 65}, ext[67];
    for (int k = 0; k < 67; k++) ext[k] = 1;
    ta_blocks *b = NULL;
    EXPECT_ERROR(ta_blocks_new_list(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, r, ext, TA_ORDER_ROW_MAJOR, &b, &e_),
                 TA_STATUS_INVALID_ARGUMENT, "ta_blocks_new_list", "extents of block 1");
    CHECK(b == NULL, "blocks_new_list wrote its output on failure");

    /* An outer product of two 33-axis tensors would have 66 axes; 32 and 32 make 64. */
    size_t e33[33];
    for (int k = 0; k < 33; k++) e33[k] = 1;
    ta_tensor *a = f64_tensor(33, e33), *a32 = f64_tensor(32, e33), *c = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &c, NULL));
    ta_scalar one = {1, 0};
    EXPECT_ERROR(ta_contract(c, one, a, a, 0, NULL, NULL, NULL, NULL, NULL, &e_), TA_STATUS_INVALID_ARGUMENT,
                 "ta_contract", "at most 64");
    MUST(ta_contract(c, one, a32, a32, 0, NULL, NULL, NULL, NULL, NULL, NULL));
    MUST(ta_tensor_wait(c, TA_WAIT_FOREVER, NULL));
    size_t rank = 0;
    MUST(ta_tensor_rank(c, &rank));
    CHECK(rank == 64, "outer product of 32 + 32 axes has rank %zu", rank);
    MUST(ta_tensor_free(a));
    MUST(ta_tensor_free(a32));
    MUST(ta_tensor_free(c));
}

static void runtime_threads(void) {
    ta_runtime *rt = NULL;
    double t0 = now_s();
    EXPECT_ERROR(ta_runtime_new(SIZE_MAX, &rt, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_runtime_new", "at most 4096");
    EXPECT_ERROR(ta_runtime_new(4097, &rt, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_runtime_new", "at most 4096");
    CHECK(rt == NULL, "runtime_new wrote its output on failure");
    CHECK(now_s() - t0 < 5, "refusing took %.1f s", now_s() - t0);
}

static void flags(void) {
    size_t ext[1] = {2};
    ta_tensor *t = f64_tensor(1, ext);
    ta_scalar one = {1, 0};
    ta_submit_ex ex;
    memset(&ex, 0, sizeof ex);
    ex.struct_size = sizeof ex;
    ex.submit.flags = TA_SUBMIT_EXTENDED | 0x100;
    EXPECT_ERROR(ta_fill(t, one, &ex.submit, NULL, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_fill", "unknown flags 0x100");
    ta_error *err = NULL;
    char msg[256];
    CHECK_STATUS(ta_fill(t, one, &ex.submit, NULL, &err), TA_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(err_message(err, msg, sizeof msg), "0x102") == NULL, "a known flag named unknown: %s", msg);
    ta_error_free(err);
    MUST(ta_tensor_free(t));
}

static void origins(void) {
    size_t ext[2] = {2, 2};
    ta_tensor *u8 = NULL, *a = f64_tensor(2, ext), *c = f64_tensor(2, ext), *s32 = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_U8, TA_DOMAIN_HOST, 2, ext, TA_ORDER_ROW_MAJOR, &u8, NULL));
    MUST(ta_tensor_new_zeros(TA_DTYPE_F32, TA_DOMAIN_HOST, 0, NULL, TA_ORDER_ROW_MAJOR, &s32, NULL));
    EXPECT_ERROR(ta_fill_i64(u8, -1, NULL, NULL, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_fill_i64", "not representable");
    EXPECT_ERROR(ta_fill_u64(u8, 1000, NULL, NULL, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_fill_u64",
                 "not representable");
    EXPECT_ERROR(ta_scale_i64(u8, -1, NULL, NULL, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_scale_i64",
                 "not representable");
    EXPECT_ERROR(ta_scale_u64(u8, 1000, NULL, NULL, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_scale_u64",
                 "not representable");
    ta_scalar two = {2, 0};
    MUST(ta_fill(a, two, NULL, NULL, NULL));
    EXPECT_ERROR(ta_gemm_t(c, s32, a, a, s32, NULL, NULL, &e_), TA_STATUS_DTYPE_MISMATCH, "ta_gemm_t", "f32");
    EXPECT_ERROR(ta_assign_product_t(c, s32, a, a, NULL, NULL, &e_), TA_STATUS_DTYPE_MISMATCH,
                 "ta_assign_product_t", "f32");
    EXPECT_ERROR(ta_add_product_t(c, s32, a, a, NULL, NULL, &e_), TA_STATUS_DTYPE_MISMATCH, "ta_add_product_t",
                 "f32");
    EXPECT_ERROR(ta_gemm(c, two, a, u8, two, NULL, NULL, &e_), TA_STATUS_DTYPE_MISMATCH, "ta_gemm", "");

    /* A reshape's message names the order as the C API does. */
    ta_tensor *tr = NULL, *o = NULL;
    size_t flat[1] = {4};
    MUST(ta_tensor_transpose(a, &tr, NULL));
    EXPECT_ERROR(ta_tensor_reshape(tr, 1, flat, TA_ORDER_ROW_MAJOR, &o, &e_), TA_STATUS_NOT_CONTIGUOUS,
                 "ta_tensor_reshape", "dense in row-major order");
    MUST(ta_tensor_free(tr));

    /* ta_blocks_all: an array of no tiles gives an empty tensor; its own errors name it. */
    size_t none[2] = {0, 4}, tile[2] = {2, 2};
    ta_blocks *b = NULL;
    MUST(ta_blocks_new_tiled(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, none, tile, TA_ORDER_COL_MAJOR, &b, NULL));
    ta_tensor *all = NULL;
    MUST(ta_blocks_all(b, &all, NULL));
    size_t got[2] = {9, 9};
    MUST(ta_tensor_extents(all, got, 2));
    CHECK(got[0] == 0 && got[1] == 4, "all of a 0 x 4 array has extents %zu x %zu", got[0], got[1]);
    MUST(ta_fill(all, two, NULL, NULL, NULL));
    MUST(ta_tensor_wait(all, TA_WAIT_FOREVER, NULL));
    MUST(ta_tensor_free(all));
    MUST(ta_blocks_free(b));
    size_t r[2] = {2, 2}, le[4] = {1, 2, 1, 3}; /* 1 x 2 over 1 x 3: they do not stack */
    MUST(ta_blocks_new_list(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, r, le, TA_ORDER_ROW_MAJOR, &b, NULL));
    EXPECT_ERROR(ta_blocks_all(b, &all, &e_), TA_STATUS_NOT_CONTIGUOUS, "ta_blocks_all", "do not stack");
    MUST(ta_blocks_free(b));
    MUST(ta_blocks_new_list(TA_DTYPE_F64, TA_DOMAIN_HOST, 0, NULL, NULL, TA_ORDER_ROW_MAJOR, &b, NULL));
    EXPECT_ERROR(ta_blocks_all(b, &all, &e_), TA_STATUS_INVALID_ARGUMENT, "ta_blocks_all", "no blocks");
    MUST(ta_blocks_free(b));

    MUST(ta_tensor_free(u8));
    MUST(ta_tensor_free(a));
    MUST(ta_tensor_free(c));
    MUST(ta_tensor_free(s32));
}

int main(void) {
    slice_steps();
    far_strides();
    ranks();
    runtime_threads();
    flags();
    origins();
    size_t live = 1;
    MUST(ta_handles_live(&live));
    CHECK(live == 0, "%zu handles live", live);
    return finish("test_boundary_args");
}
