// Package cbench runs the benchmark patterns of the Go binding's benchmarks
// as plain C loops against the library, for a side-by-side per-op cost.
package cbench

/*
#cgo pkg-config: tensorasync
#include <tensorasync.h>

// n dependent ta_scale submissions on one 1-element f64 tensor, then a wait:
// the pattern of BenchmarkScaleChain in the Go package.
static ta_status ta_bench_scale_chain(ta_tensor *x, long n) {
	ta_scalar one = {1.0, 0.0};
	for (long i = 0; i < n; i++) {
		ta_status st = ta_scale(x, one, NULL, NULL, NULL);
		if (st != TA_STATUS_OK) return st;
	}
	return ta_tensor_wait(x, TA_WAIT_FOREVER, NULL);
}

static ta_status ta_bench_new_tensor(ta_tensor **x) {
	size_t n = 1;
	return ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, x, NULL);
}
*/
import "C"

import "fmt"

// ScaleChain submits n dependent scales of a fresh 1-element tensor from C
// and waits for them.
func ScaleChain(n int) error {
	var x *C.ta_tensor
	if st := C.ta_bench_new_tensor(&x); st != C.TA_STATUS_OK {
		return fmt.Errorf("ta_tensor_new_zeros: status %d", st)
	}
	defer C.ta_tensor_free(x)
	if st := C.ta_bench_scale_chain(x, C.long(n)); st != C.TA_STATUS_OK {
		return fmt.Errorf("scale chain: status %d", st)
	}
	return nil
}
