package tensorasync

// #include <tensorasync.h>
import "C"

import "runtime"

// Runtime is a pool of worker threads. Operations go to the default runtime
// unless WithRuntime names another.
type Runtime struct {
	h *C.ta_runtime
}

// NewRuntime creates a runtime with the given number of workers (0: one per core).
func NewRuntime(threads int) (*Runtime, error) {
	var h *C.ta_runtime
	var cerr *C.ta_error
	if err := takeError(C.ta_runtime_new(C.size_t(threads), &h, &cerr), cerr); err != nil {
		return nil, err
	}
	// No finalizer: freeing a runtime drains it, which blocks, and
	// finalizers must not block. Close it.
	return &Runtime{h: h}, nil
}

// DefaultRuntime is a handle to the process-wide default runtime.
func DefaultRuntime() (*Runtime, error) {
	var h *C.ta_runtime
	if err := check(C.ta_runtime_default(&h)); err != nil {
		return nil, err
	}
	rt := &Runtime{h: h}
	runtime.SetFinalizer(rt, (*Runtime).Close)
	return rt, nil
}

// Threads is the number of workers.
func (r *Runtime) Threads() (int, error) {
	var n C.size_t
	err := check(C.ta_runtime_threads(r.h, &n))
	runtime.KeepAlive(r)
	return int(n), err
}

// SmallInPlace reports whether small library operations whose tensors are
// idle run on the submitting goroutine's thread before the call returns
// (the default), instead of on a worker.
func (r *Runtime) SmallInPlace() (bool, error) {
	var on C.int32_t
	err := check(C.ta_runtime_small_in_place(r.h, &on))
	runtime.KeepAlive(r)
	return on != 0, err
}

// SetSmallInPlace lets small operations run in place (true) or sends every
// operation to the workers (false). Such an operation (fill, scale, axpy,
// copy, conj, dot, norm2, a full sum of at most 256 elements per operand; a
// gemm of at most 8x8) costs less to run than to hand over; it never blocks.
func (r *Runtime) SetSmallInPlace(on bool) error {
	st := C.ta_runtime_set_small_in_place(r.h, cFlag(on))
	runtime.KeepAlive(r)
	return check(st)
}

// Shutdown stops accepting work and drains or cancels (blocking until every
// submitted operation has completed).
func (r *Runtime) Shutdown(mode ShutdownMode) error {
	var cerr *C.ta_error
	st := C.ta_runtime_shutdown(r.h, C.ta_shutdown(mode), &cerr)
	runtime.KeepAlive(r)
	return takeError(st, cerr)
}

// WaitIdle blocks until every operation submitted to the runtime so far has
// completed (timeoutNs < 0: forever).
func (r *Runtime) WaitIdle(timeoutNs int64) error {
	var cerr *C.ta_error
	st := C.ta_runtime_wait_idle(r.h, C.int64_t(timeoutNs), &cerr)
	runtime.KeepAlive(r)
	return takeError(st, cerr)
}

// Close drains and stops a runtime made by NewRuntime and frees the handle
// (for the default runtime only the handle is freed). Idempotent.
func (r *Runtime) Close() error {
	if r == nil || r.h == nil {
		return nil
	}
	h := r.h
	r.h = nil
	runtime.SetFinalizer(r, nil)
	return check(C.ta_runtime_free(h))
}
