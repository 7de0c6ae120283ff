/* Instructions per small operation through the C ABI (issue 20 item 4).
 *
 *   cc -O2 -Iinclude docs/perf-notes/capi-small-callgrind.c -Ltarget/release -ltensorasync -o /tmp/small-cg
 *   LD_LIBRARY_PATH=target/release valgrind --tool=callgrind --toggle-collect=ta_gemm /tmp/small-cg gemm 4
 *
 * OP is gemm (n x n f64 matrices, C = A*B with beta 0), fill, axpy or copy
 * (1-d f64 tensors of n elements); 20000 calls on one output, NULL event_out,
 * with a wait on the output after every 100.
 * Toggle-collect the C function for the submission, or the worker-side body
 * (see capi.md for the symbol). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensorasync.h"

#define CALLS 20000

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s gemm|fill|axpy|copy N\n", argv[0]); return 2; }
    const char *op = argv[1];
    size_t n = (size_t)atol(argv[2]);
    ta_runtime *rt;
    if (ta_runtime_new(2, &rt, NULL)) return 2;
    ta_submit o; memset(&o, 0, sizeof o); o.runtime = rt;
    int gemm = strcmp(op, "gemm") == 0;
    size_t ext[2] = { n, n };
    size_t rank = gemm ? 2 : 1;
    ta_tensor *x, *y, *z;
    if (ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, rank, ext, TA_ORDER_ROW_MAJOR, &x, NULL)) return 3;
    if (ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, rank, ext, TA_ORDER_ROW_MAJOR, &y, NULL)) return 3;
    if (ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, rank, ext, TA_ORDER_ROW_MAJOR, &z, NULL)) return 3;
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 }, half = { 0.5, 0.0 };
    for (int i = 0; i < CALLS; i++) {
        ta_status s;
        if (gemm) s = ta_gemm(x, one, y, z, zero, &o, NULL, NULL);
        else if (strcmp(op, "fill") == 0) s = ta_fill(x, one, &o, NULL, NULL);
        else if (strcmp(op, "axpy") == 0) s = ta_axpy(x, half, y, &o, NULL, NULL);
        else if (strcmp(op, "copy") == 0) s = ta_copy(x, y, &o, NULL, NULL);
        else { fprintf(stderr, "unknown op %s\n", op); return 2; }
        if (s != TA_STATUS_OK) { fprintf(stderr, "%s failed: %s\n", op, ta_status_name(s)); return 1; }
        /* Under valgrind the worker falls far behind: without this the
         * inputs' queues grow by thousands of readers, and their
         * reallocations make the count vary from run to run. */
        if (i % 100 == 99) ta_tensor_wait(x, -1, NULL);
    }
    ta_runtime_wait_idle(rt, -1, NULL);
    ta_tensor_free(x); ta_tensor_free(y); ta_tensor_free(z); ta_runtime_free(rt);
    return 0;
}
