package tensorasync

// #include <string.h>
// #include <tensorasync.h>
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"
)

// Host data and the cgo pointer rules. Go 1.19 has no runtime.Pinner, so C
// code may not keep a Go pointer after a call returns. The library's
// asynchronous copies (ta_copy_in, ta_copy_out) keep their buffer until the
// operation completes, so Go slices never go to them directly:
//   - FromSlice copies the Go slice during the call (ta_tensor_new_copy);
//   - Write copies it into C memory at once, and the library copies from
//     there; the staging buffer is freed when the copy completes;
//   - Read copies out into C memory and from there into the Go slice.
// Zero-copy access goes the other way: library-owned memory seen from Go as
// a slice, valid while the library grants it (kernel views, mappings).

func elemsOf[T Elem](data []T) (unsafe.Pointer, int) {
	var z T
	if len(data) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(&data[0]), len(data) * int(unsafe.Sizeof(z))
}

func product(shape []int) int {
	n := 1
	for _, e := range shape {
		n *= e
	}
	return n
}

// FromSlice makes a row-major host tensor of the given shape holding a copy
// of data (len(data) must be the product of shape; no shape means 1-d).
func FromSlice[T Elem](data []T, shape ...int) (*Tensor, error) {
	return FromSliceOrder(data, OrderRowMajor, shape...)
}

// FromSliceOrder is FromSlice with data laid out (and stored) in order.
func FromSliceOrder[T Elem](data []T, order Order, shape ...int) (*Tensor, error) {
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	rank, ext, keep, err := dims("FromSlice", shape)
	if err != nil {
		return nil, err
	}
	if product(shape) != len(data) {
		return nil, &Error{Status: StatusShapeMismatch, Code: int64(StatusShapeMismatch),
			Origin: "FromSlice", Message: fmt.Sprintf("%d elements for shape %v", len(data), shape)}
	}
	p, _ := elemsOf(data)
	var h *C.ta_tensor
	var cerr *C.ta_error
	// ta_tensor_new_copy copies before it returns: Go memory is allowed.
	st := C.ta_tensor_new_copy(C.ta_dtype(DTypeOf[T]()), rank, ext, nil, C.ta_order(order), p, &h, &cerr)
	runtime.KeepAlive(data)
	runtime.KeepAlive(keep)
	if err := takeError(st, cerr); err != nil {
		return nil, err
	}
	return newTensor(h), nil
}

// Write overwrites t (constructing an unconstructed t) with data in row-major
// order and the given shape (t's own shape if none is given, else 1-d). data
// is copied before Write returns, so the caller may reuse it at once.
func Write[T Elem](t *Tensor, data []T, shape []int, opts ...Option) error {
	if err := checkDType[T](t, "Write"); err != nil {
		return err
	}
	if shape == nil {
		if s, err := t.Shape(); err == nil {
			shape = s
		} else {
			shape = []int{len(data)}
		}
	}
	rank, ext, keep, err := dims("Write", shape)
	if err != nil {
		return err
	}
	if product(shape) != len(data) {
		return &Error{Status: StatusShapeMismatch, Code: int64(StatusShapeMismatch),
			Origin: "Write", Message: fmt.Sprintf("%d elements for shape %v", len(data), shape)}
	}
	c, err := configure(opts)
	if err != nil {
		return err
	}
	p, bytes := elemsOf(data)
	buf := newCBuffer(bytes)
	if bytes > 0 {
		C.memcpy(buf.p, p, C.size_t(bytes))
	}
	runtime.KeepAlive(data)
	var ev *C.ta_event
	var cerr *C.ta_error
	st := C.ta_copy_in(t.h, buf.p, rank, ext, nil, c.ptr(), &ev, &cerr)
	runtime.KeepAlive(t)
	runtime.KeepAlive(c.keep)
	runtime.KeepAlive(keep)
	if err := takeError(st, cerr); err != nil {
		buf.free()
		return err
	}
	if err := whenDone(ev, func(error) { buf.free() }); err != nil {
		// Not expected; the buffer must outlive the copy, so leak it.
		C.ta_event_free(ev)
		return err
	}
	if c.event != nil {
		*c.event = newEvent(ev)
	} else {
		C.ta_event_free(ev)
	}
	return nil
}

// Read waits for t's pending writes (or ctx) and returns its elements in
// row-major order. T must be t's element type.
func Read[T Elem](ctx context.Context, t *Tensor) ([]T, error) {
	if err := checkDType[T](t, "Read"); err != nil {
		return nil, err
	}
	n, err := t.Len()
	if err != nil {
		return nil, err
	}
	out := make([]T, n)
	return out, readInto(ctx, t, out)
}

// ReadInto is Read into dst: len(dst) must be t's element count (a shorter
// dst fails with ErrBufferTooSmall, a longer one with ErrShapeMismatch).
func ReadInto[T Elem](ctx context.Context, t *Tensor, dst []T) error {
	if err := checkDType[T](t, "Read"); err != nil {
		return err
	}
	n, err := t.Len()
	if err != nil {
		return err
	}
	if len(dst) != n {
		st := StatusShapeMismatch
		if len(dst) < n {
			st = StatusBufferTooSmall
		}
		return &Error{Status: st, Code: int64(st), Origin: "ReadInto",
			Message: fmt.Sprintf("dst holds %d elements; the tensor has %d", len(dst), n)}
	}
	return readInto(ctx, t, dst)
}

// readInto copies t out into dst (dtype and length checked by the caller).
func readInto[T Elem](ctx context.Context, t *Tensor, dst []T) error {
	var z T
	size := int(unsafe.Sizeof(z))
	buf := newCBuffer(len(dst) * size)
	var ev *C.ta_event
	var cerr *C.ta_error
	st := C.ta_copy_out(t.h, buf.p, C.size_t(len(dst)), nil, nil, &ev, &cerr)
	runtime.KeepAlive(t)
	if err := takeError(st, cerr); err != nil {
		buf.free()
		return err
	}
	e := newEvent(ev)
	defer e.Close()
	if err := e.Wait(ctx); err != nil {
		if done, _ := e.Poll(); !done {
			// The wait ended first (ctx, or a wait refused inside a
			// kernel): the copy may still write the buffer, so free it
			// once the copy has completed.
			if whenDone(ev, func(error) { buf.free() }) != nil {
				// Leak rather than free memory the library may write.
				return err
			}
			return err
		}
		buf.free()
		return err
	}
	if len(dst) > 0 {
		p, bytes := elemsOf(dst)
		C.memcpy(p, buf.p, C.size_t(bytes))
	}
	buf.free()
	return nil
}

// checkDType refuses Go element types other than the tensor's: the library's
// copies take untyped memory.
func checkDType[T Elem](t *Tensor, op string) error {
	dt, err := t.DType()
	if err != nil {
		return err
	}
	if want := DTypeOf[T](); dt != want {
		return &Error{Status: StatusDtypeMismatch, Code: int64(StatusDtypeMismatch), Origin: op,
			Message: fmt.Sprintf("a %v tensor accessed as %v", dt, want)}
	}
	return nil
}
