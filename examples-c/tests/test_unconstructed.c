/*
 * test_unconstructed: reading an unconstructed tensor is
 * TA_STATUS_UNCONSTRUCTED at submission, for every operation and every
 * operand position that is read (table-driven). The error names the
 * problem ("unconstructed"), its origin is the C function called, no event
 * is returned, and the unconstructed tensor stays unconstructed. Outputs that
 * are only written (ta_assign_product's C, ta_permute's and ta_conj's dst,
 * the reductions' out, ta_copy's dst) may be unconstructed: those
 * submissions succeed and construct them.
 */
#include "check.h"

static ta_runtime *rt;

typedef struct ops_ {
    ta_tensor *A, *B, *C, *S, *X, *Y, *U;
} ops_;

static ta_status ok_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud; (void)ctx;
    return TA_STATUS_OK;
}

/* Case k: submit with U in one position; `name` receives a description. */
static ta_status submit_case(int k, const ops_ *o, ta_event **ev, ta_error **e, const char **name, const char **origin, int *writes_only) {
    ta_submit s = on_runtime(rt);
    ta_scalar one = real(1.0), zero = real(0.0);
    const ta_tensor *A = o->A, *B = o->B, *C = o->C, *S = o->S, *X = o->X, *Y = o->Y, *U = o->U;
    size_t ax0[1] = { 1 }, ax1[1] = { 0 }, perm[2] = { 1, 0 }, sumax[1] = { 0 };
    double buf[4];
    *writes_only = 0;
#define CASE(n, org, call) case n: *name = #call; *origin = org; return call
#define WCASE(n, org, call) case n: *name = #call; *origin = org; *writes_only = 1; return call
    switch (k) {
        CASE(0, "ta_gemm", ta_gemm(U, one, A, B, zero, &s, ev, e));
        CASE(1, "ta_gemm", ta_gemm(C, one, U, B, zero, &s, ev, e));
        CASE(2, "ta_gemm", ta_gemm(C, one, A, U, zero, &s, ev, e));
        CASE(3, "ta_gemm", ta_gemm_t(C, U, A, B, S, &s, ev, e));
        CASE(4, "ta_gemm", ta_gemm_t(C, S, A, B, U, &s, ev, e));
        CASE(5, "ta_gemm", ta_gemm_t(C, S, U, B, S, &s, ev, e));
        CASE(6, "ta_assign_product", ta_assign_product(C, one, U, B, &s, ev, e));
        CASE(7, "ta_assign_product", ta_assign_product(C, one, A, U, &s, ev, e));
        CASE(8, "ta_assign_product", ta_assign_product_t(C, U, A, B, &s, ev, e));
        CASE(9, "ta_add_product", ta_add_product(U, one, A, B, &s, ev, e));
        CASE(10, "ta_add_product", ta_add_product(C, one, U, B, &s, ev, e));
        CASE(11, "ta_add_product", ta_add_product(C, one, A, U, &s, ev, e));
        CASE(12, "ta_add_product", ta_add_product_t(C, U, A, B, &s, ev, e));
        CASE(13, "ta_contract", ta_contract(C, one, U, B, 1, ax0, ax1, NULL, &s, ev, e));
        CASE(14, "ta_contract", ta_contract(C, one, A, U, 1, ax0, ax1, NULL, &s, ev, e));
        CASE(15, "ta_contract", ta_contract(U, one, A, B, 1, ax0, ax1, &zero, &s, ev, e));
        CASE(16, "ta_permute", ta_permute(C, U, 2, perm, &s, ev, e));
        CASE(17, "ta_conj", ta_conj(C, U, &s, ev, e));
        CASE(18, "ta_sum", ta_sum(S, U, 0, NULL, &s, ev, e));
        CASE(19, "ta_sum", ta_sum(X, U, 1, sumax, &s, ev, e));
        CASE(20, "ta_dot", ta_dot(S, U, Y, 0, &s, ev, e));
        CASE(21, "ta_dot", ta_dot(S, X, U, 1, &s, ev, e));
        CASE(22, "ta_norm2", ta_norm2(S, U, &s, ev, e));
        CASE(23, "ta_potrf", ta_potrf(U, TA_UPLO_LOWER, &s, ev, e));
        CASE(24, "ta_trsm", ta_trsm(U, TA_SIDE_LEFT, TA_UPLO_LOWER, TA_DIAG_NON_UNIT, one, A, &s, ev, e));
        CASE(25, "ta_trsm", ta_trsm(B, TA_SIDE_LEFT, TA_UPLO_LOWER, TA_DIAG_NON_UNIT, one, U, &s, ev, e));
        CASE(26, "ta_syrk", ta_syrk(U, TA_UPLO_LOWER, one, A, zero, &s, ev, e));
        CASE(27, "ta_syrk", ta_syrk(C, TA_UPLO_UPPER, one, U, zero, &s, ev, e));
        CASE(28, "ta_axpy", ta_axpy(U, one, X, &s, ev, e));
        CASE(29, "ta_axpy", ta_axpy(X, one, U, &s, ev, e));
        CASE(30, "ta_scale", ta_scale(U, one, &s, ev, e));
        CASE(31, "ta_scale", ta_scale_i64(U, 2, &s, ev, e));
        CASE(32, "ta_copy", ta_copy(C, U, &s, ev, e));
        CASE(33, "ta_copy_out", ta_copy_out(U, buf, 4, NULL, &s, ev, e));
        case 34: {
            ta_access acc[2] = { { X, TA_MODE_UPDATE }, { U, TA_MODE_READ } };
            *name = "ta_kernel_submit(READ of U)"; *origin = "ta_kernel_submit";
            return ta_kernel_submit(ok_kernel, NULL, "k", acc, 2, &s, ev, e);
        }
        case 35: {
            ta_access acc[1] = { { U, TA_MODE_UPDATE } };
            *name = "ta_kernel_submit(UPDATE of U)"; *origin = "ta_kernel_submit";
            return ta_kernel_submit(ok_kernel, NULL, "k", acc, 1, &s, ev, e);
        }
        CASE(36, "ta_fill", ta_fill(U, one, &s, ev, e));
        /* Write-only outputs may be unconstructed. */
        WCASE(37, "", ta_assign_product(U, one, A, B, &s, ev, e));
        WCASE(38, "", ta_permute(U, A, 2, perm, &s, ev, e));
        WCASE(39, "", ta_conj(U, A, &s, ev, e));
        WCASE(40, "", ta_sum(U, A, 0, NULL, &s, ev, e));
        WCASE(41, "", ta_dot(U, X, Y, 0, &s, ev, e));
        WCASE(42, "", ta_norm2(U, X, &s, ev, e));
        WCASE(43, "", ta_copy(U, A, &s, ev, e));
        WCASE(44, "", ta_contract(U, one, A, B, 1, ax0, ax1, NULL, &s, ev, e));
        default: return (ta_status)-1;
    }
#undef CASE
#undef WCASE
}

int main(void) {
    MUST(ta_runtime_new(2, &rt, NULL));
    size_t e2[2] = { 2, 2 }, two = 2;
    const double spd[4] = { 4, 1, 1, 3 };
    ops_ o;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 2, e2, NULL, TA_ORDER_ROW_MAJOR, spd, &o.A, NULL));
    o.B = zeros(TA_DTYPE_F64, 2, e2);
    o.C = zeros(TA_DTYPE_F64, 2, e2);
    o.S = zeros(TA_DTYPE_F64, 0, NULL);
    o.X = zeros1(TA_DTYPE_F64, two);
    o.Y = zeros1(TA_DTYPE_F64, two);
    int cases = 0, refused = 0, constructed = 0;
    for (int k = 0;; k++) {
        MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &o.U, NULL));
        ta_event *ev = NULL;
        ta_error *e = NULL;
        const char *name = "", *origin = "";
        int writes_only = 0;
        ta_status s = submit_case(k, &o, &ev, &e, &name, &origin, &writes_only);
        if (s == (ta_status)-1) {
            ta_tensor_free(o.U);
            break;
        }
        cases++;
        size_t rank = 99;
        ta_status rs = ta_tensor_rank(o.U, &rank);
        if (writes_only) {
            CHECK(s == TA_STATUS_OK, "%s: %s (an unconstructed output is constructed)", name, ta_status_name(s));
            if (s == TA_STATUS_OK) {
                CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
                CHECK(rs == TA_STATUS_OK, "%s: the output is constructed (rank: %s)", name, ta_status_name(rs));
                constructed++;
            }
        } else {
            char msg[256], org[64];
            CHECK(s == TA_STATUS_UNCONSTRUCTED, "%s: %s, expected TA_STATUS_UNCONSTRUCTED (message '%s')", name,
                  ta_status_name(s), err_message(e, msg, sizeof msg));
            CHECK(ev == NULL, "%s: no event for a refused submission", name);
            CHECK(e && strstr(err_message(e, msg, sizeof msg), "unconstructed"), "%s: message '%s'", name, msg);
            CHECK(e && strncmp(err_origin(e, org, sizeof org), origin, strlen(origin)) == 0, "%s: origin '%s', expected %s", name, org, origin);
            CHECK(rs == TA_STATUS_UNCONSTRUCTED, "%s: U stays unconstructed (rank: %s)", name, ta_status_name(rs));
            refused += s == TA_STATUS_UNCONSTRUCTED;
        }
        ta_error_free(e);
        ta_event_free(ev);
        ta_tensor_free(o.U);
    }
    printf("%d cases: %d refused as unconstructed, %d constructed their output\n", cases, refused, constructed);
    CHECK(cases == 45, "%d cases ran", cases);
    ta_tensor_free(o.A); ta_tensor_free(o.B); ta_tensor_free(o.C); ta_tensor_free(o.S); ta_tensor_free(o.X); ta_tensor_free(o.Y);
    ta_runtime_free(rt);
    return finish("test_unconstructed");
}
