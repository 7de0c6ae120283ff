package tensorasync

// #include <tensorasync.h>
import "C"

import (
	"context"
	"runtime"
)

// Tensor is a handle to an asynchronous tensor or to a view of one. Close it
// when done; a finalizer closes forgotten handles (closing never blocks:
// pending operations keep the data alive). Using a closed Tensor gives
// ErrNullHandle.
type Tensor struct {
	h *C.ta_tensor
}

func newTensor(h *C.ta_tensor) *Tensor {
	t := &Tensor{h: h}
	runtime.SetFinalizer(t, (*Tensor).Close)
	return t
}

// Close frees the handle. Idempotent.
func (t *Tensor) Close() error {
	if t == nil || t.h == nil {
		return nil
	}
	h := t.h
	t.h = nil
	runtime.SetFinalizer(t, nil)
	return check(C.ta_tensor_free(h))
}

// dims converts a shape for the C API (rank, extents, and the slice to keep
// alive), refusing negative extents with ErrInvalidArgument.
func dims(op string, shape []int) (C.size_t, *C.size_t, []C.size_t, error) {
	ext, err := sizeArgs(op, "extent", shape)
	if err != nil {
		return 0, nil, nil, err
	}
	return C.size_t(len(shape)), firstSize(ext), ext, nil
}

// New makes an unconstructed host tensor of dtype dt: an overwrite (Write,
// Copy, AssignProduct, ...) gives it its shape.
func New(dt DType) (*Tensor, error) { return NewIn(dt, DomainHost) }

// NewIn is New in a domain (DomainHost or a CUDA device ordinal).
func NewIn(dt DType, domain int) (*Tensor, error) {
	var h *C.ta_tensor
	var cerr *C.ta_error
	if err := takeError(C.ta_tensor_new(C.ta_dtype(dt), C.ta_domain(domain), &h, &cerr), cerr); err != nil {
		return nil, err
	}
	return newTensor(h), nil
}

// Zeros makes a zero-filled row-major host tensor.
func Zeros(dt DType, shape ...int) (*Tensor, error) {
	return ZerosIn(dt, DomainHost, OrderRowMajor, shape...)
}

// ZerosIn makes a zero-filled tensor in a domain and order.
func ZerosIn(dt DType, domain int, order Order, shape ...int) (*Tensor, error) {
	var h *C.ta_tensor
	var cerr *C.ta_error
	rank, ext, keep, err := dims("Zeros", shape)
	if err != nil {
		return nil, err
	}
	st := C.ta_tensor_new_zeros(C.ta_dtype(dt), C.ta_domain(domain), rank, ext, C.ta_order(order), &h, &cerr)
	runtime.KeepAlive(keep)
	if err := takeError(st, cerr); err != nil {
		return nil, err
	}
	return newTensor(h), nil
}

// DType is the tensor's element type.
func (t *Tensor) DType() (DType, error) {
	var d C.ta_dtype
	err := check(C.ta_tensor_dtype(t.h, &d))
	runtime.KeepAlive(t)
	return DType(d), err
}

// Shape is the tensor's extents as known at submission (ErrUnconstructed
// before it has a shape).
func (t *Tensor) Shape() ([]int, error) {
	var r C.size_t
	if err := check(C.ta_tensor_rank(t.h, &r)); err != nil {
		runtime.KeepAlive(t)
		return nil, err
	}
	ext := make([]C.size_t, int(r)+1)
	err := check(C.ta_tensor_extents(t.h, &ext[0], C.size_t(len(ext))))
	runtime.KeepAlive(t)
	out := make([]int, int(r))
	for i := range out {
		out[i] = int(ext[i])
	}
	return out, err
}

// Strides is the tensor's strides in elements.
func (t *Tensor) Strides() ([]int, error) {
	var r C.size_t
	if err := check(C.ta_tensor_rank(t.h, &r)); err != nil {
		runtime.KeepAlive(t)
		return nil, err
	}
	s := make([]C.ptrdiff_t, int(r)+1)
	err := check(C.ta_tensor_strides(t.h, &s[0], C.size_t(len(s))))
	runtime.KeepAlive(t)
	out := make([]int, int(r))
	for i := range out {
		out[i] = int(s[i])
	}
	return out, err
}

// Len is the number of elements.
func (t *Tensor) Len() (int, error) {
	s, err := t.Shape()
	if err != nil {
		return 0, err
	}
	n := 1
	for _, e := range s {
		n *= e
	}
	return n, nil
}

// IsView reports whether t is a view of another tensor.
func (t *Tensor) IsView() (bool, error) {
	var v C.int32_t
	err := check(C.ta_tensor_is_view(t.h, &v))
	runtime.KeepAlive(t)
	return v != 0, err
}

// IsReadOnly reports whether writes to t are rejected.
func (t *Tensor) IsReadOnly() (bool, error) {
	var v C.int32_t
	err := check(C.ta_tensor_is_read_only(t.h, &v))
	runtime.KeepAlive(t)
	return v != 0, err
}

// Share returns a second handle to the same tensor (same data and queue).
func (t *Tensor) Share() (*Tensor, error) {
	var h *C.ta_tensor
	err := check(C.ta_tensor_share(t.h, &h))
	runtime.KeepAlive(t)
	if err != nil {
		return nil, err
	}
	return newTensor(h), nil
}

// Clone deep-copies a whole tensor onto a fresh queue (a scheduled copy that
// sees every earlier write); for a view it gives the same view back.
func (t *Tensor) Clone(opts ...Option) (*Tensor, error) {
	c, err := configure(opts)
	if err != nil {
		return nil, err
	}
	var h *C.ta_tensor
	var ev *C.ta_event
	var cerr *C.ta_error
	st := C.ta_tensor_clone(t.h, c.ptr(), &h, c.eventOut(&ev), &cerr)
	runtime.KeepAlive(t)
	runtime.KeepAlive(c.keep)
	if err := c.finish(st, ev, cerr); err != nil {
		return nil, err
	}
	return newTensor(h), nil
}

// WaitBlocking waits (blocking this goroutine's OS thread) for everything
// enrolled on the tensor so far; timeoutNs < 0 waits forever. Prefer Wait.
func (t *Tensor) WaitBlocking(timeoutNs int64) error {
	var cerr *C.ta_error
	st := C.ta_tensor_wait(t.h, C.int64_t(timeoutNs), &cerr)
	runtime.KeepAlive(t)
	return takeError(st, cerr)
}

// Wait waits until everything enrolled on the tensor so far has completed, or
// ctx ends, and returns the tensor's state: nil for a clean value, the error
// that poisoned it, or ctx.Err(). Inside a Go kernel it waits as Event.Wait
// says (ErrWouldDeadlock at once for a tensor the kernel accesses).
func (t *Tensor) Wait(ctx context.Context) error {
	return t.wait(ctx)
}
