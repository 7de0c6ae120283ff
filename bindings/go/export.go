package tensorasync

// This file only exports the kernel trampoline: a file with //export may
// declare but not define C functions in its preamble.

// #include <stdint.h>
// #include <tensorasync.h>
import "C"

//export goTaKernel
func goTaKernel(views *C.ta_view, nviews C.size_t, handle C.uintptr_t, ctx *C.ta_kernel_ctx) C.ta_status {
	return runKernel(views, nviews, handle, ctx)
}
