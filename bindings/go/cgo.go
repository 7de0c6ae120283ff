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

// How many Go kernels are running on this thread (nested ones when a wait
// inside a kernel runs another). The goroutine of a kernel stays locked to
// the worker thread during the callback, and no other goroutine runs on that
// thread meanwhile, so a goroutine that sees a non-zero count here is inside
// a kernel: its waits must go through the library (see Event.Wait).
static __thread int ta_go_kernel_depth;

static ta_status ta_go_kernel_trampoline(const ta_view *views, size_t nviews, void *userdata,
                                         ta_kernel_ctx *ctx) {
	ta_go_kernel_depth++;
	ta_status st = goTaKernel((ta_view *)views, nviews, (uintptr_t)userdata, ctx);
	ta_go_kernel_depth--;
	return st;
}

// ta_event_poll, with bit 32 set when the caller runs inside a Go kernel on
// this thread (one cgo call for Event.Wait's first look).
uint64_t ta_go_event_poll(const ta_event *event) {
	uint64_t st = ta_event_poll(event);
	if (ta_go_kernel_depth > 0) {
		st |= (uint64_t)1 << 32;
	}
	return st;
}

// ta_event_wait on this thread, for a wait inside a kernel: the library
// refuses a wait that would deadlock (reading the error object from this
// thread's last error is safe here: the goroutine is locked to the thread)
// and runs queued work while it waits.
ta_status ta_go_event_wait_here(const ta_event *event, int64_t timeout_ns, ta_error **error) {
	ta_status st = ta_event_wait(event, timeout_ns);
	if (st == TA_STATUS_WOULD_DEADLOCK) {
		ta_last_error(error);
	}
	return st;
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
	"fmt"
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

// sizeArgs is cSizes for arguments from the caller (extents, indices, axes),
// refusing negative values: converted to size_t they would reach the library
// as huge numbers and fail with misleading statuses (OUT_OF_MEMORY, an
// overflow, a huge index). what names the argument in the message.
func sizeArgs(op, what string, xs []int) ([]C.size_t, error) {
	for i, x := range xs {
		if x < 0 {
			return nil, negativeArg(op, what, x, i, xs)
		}
	}
	return cSizes(xs), nil
}

// sizeArg is sizeArgs for one value.
func sizeArg(op, what string, x int) (C.size_t, error) {
	if x < 0 {
		return 0, &Error{Status: StatusInvalidArgument, Code: int64(StatusInvalidArgument), Origin: op,
			Message: fmt.Sprintf("negative %s %d", what, x)}
	}
	return C.size_t(x), nil
}

func negativeArg(op, what string, x, i int, xs []int) error {
	return &Error{Status: StatusInvalidArgument, Code: int64(StatusInvalidArgument), Origin: op,
		Message: fmt.Sprintf("negative %s %d (entry %d of %v)", what, x, i, xs)}
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
