package tensorasync

// The cgo layer. Build flags come from pkg-config (the tensorasync.pc that
// `make -C examples-c install` installs); for the in-tree build, point
// PKG_CONFIG_PATH at a .pc naming include/ and target/release (scripts/test-go.sh
// writes one). The C declarations are the header itself: cgo checks every call
// against include/tensorasync.h, and zz_generated.go (from internal/gen) holds
// the header's constants.
//
// Handles (ta_tensor *, ta_event *, ...) are opaque 64-bit values whose top
// byte is the handle kind, never addresses: the library never hands out
// pointers into its memory, and such values are far outside the address range
// of the Go heap, so keeping them in Go pointer-typed fields is safe for the
// garbage collector.

/*
#cgo pkg-config: tensorasync
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tensorasync.h>

// Defined in export.go (Go), called by the library on a worker thread.
extern ta_status goTaKernel(ta_view *views, size_t nviews, uintptr_t handle, ta_kernel_ctx *ctx);

static ta_status ta_go_kernel_trampoline(const ta_view *views, size_t nviews, void *userdata,
                                         ta_kernel_ctx *ctx) {
	return goTaKernel((ta_view *)views, nviews, (uintptr_t)userdata, ctx);
}

// The cgo.Handle travels as the kernel's userdata: an integer cast to a
// pointer in C, never a Go pointer.
ta_status ta_go_kernel_submit(uintptr_t handle, const char *name, const ta_access *accesses,
                                     size_t naccesses, const ta_submit *opts, ta_event **event_out,
                                     ta_error **error) {
	return ta_kernel_submit(ta_go_kernel_trampoline, (void *)handle, name, accesses, naccesses,
	                        opts, event_out, error);
}
*/
import "C"

import (
	"sync"
	"unsafe"
)

// cstrings interns C copies of operation names: the library keeps a kernel's
// name until the operation completes, so names live for the process.
var cstrings sync.Map // string -> *C.char

func internCString(s string) *C.char {
	if p, ok := cstrings.Load(s); ok {
		return p.(*C.char)
	}
	mine := C.CString(s)
	p, loaded := cstrings.LoadOrStore(s, mine)
	if loaded {
		// Another goroutine stored it first; keep theirs.
		C.free(unsafe.Pointer(mine))
	}
	return p.(*C.char)
}

// cSizes converts Go ints to a C size_t array held in Go memory (for
// synchronous calls only: the library copies extents and axes at the call).
func cSizes(xs []int) []C.size_t {
	out := make([]C.size_t, len(xs))
	for i, x := range xs {
		out[i] = C.size_t(x)
	}
	return out
}

func cStrides(xs []int) []C.ptrdiff_t {
	out := make([]C.ptrdiff_t, len(xs))
	for i, x := range xs {
		out[i] = C.ptrdiff_t(x)
	}
	return out
}

// firstSize returns a pointer to the first element, or nil for an empty slice.
func firstSize(xs []C.size_t) *C.size_t {
	if len(xs) == 0 {
		return nil
	}
	return &xs[0]
}

func firstStride(xs []C.ptrdiff_t) *C.ptrdiff_t {
	if len(xs) == 0 {
		return nil
	}
	return &xs[0]
}

// cBuffer is C memory the library may use after the submitting call returns
// (Go memory may not be kept by C code on Go 1.19, which has no runtime.Pinner).
type cBuffer struct {
	p     unsafe.Pointer
	bytes int
}

func newCBuffer(bytes int) cBuffer {
	n := bytes
	if n == 0 {
		n = 1
	}
	return cBuffer{C.calloc(1, C.size_t(n)), bytes}
}

func (b cBuffer) free() { C.free(b.p) }

func goString(f func(buf *C.char, cap C.size_t, length *C.size_t) C.ta_status) string {
	var buf [256]C.char
	var n C.size_t
	if f(&buf[0], C.size_t(len(buf)), &n) != C.TA_STATUS_OK {
		return ""
	}
	if int(n) < len(buf) {
		return C.GoStringN(&buf[0], C.int(n))
	}
	big := make([]C.char, int(n)+1)
	if f(&big[0], C.size_t(len(big)), &n) != C.TA_STATUS_OK {
		return ""
	}
	return C.GoStringN(&big[0], C.int(n))
}

// cFlag is a Go bool as the C API's int32_t flags take it (1 or 0).
func cFlag(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}
