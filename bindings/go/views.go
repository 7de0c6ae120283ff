package tensorasync

// #include <tensorasync.h>
import "C"

import "runtime"

// Range selects indices of one axis for Slice, like a Go slice expression
// s[Start:Stop] with a step: Start, Start+Step, ... before Stop. With a
// negative Step, Start is the highest index and Stop the one below the last
// (-1 runs through index 0). A Range made by At drops its axis.
type Range struct {
	Start, Stop, Step int
	drop              bool
	all               bool
}

// All selects the whole axis (like s[:]).
func All() Range { return Range{Step: 1, all: true} }

// Span selects [start, stop) (like s[start:stop]).
func Span(start, stop int) Range { return Range{Start: start, Stop: stop, Step: 1} }

// Step selects start, start+step, ... before stop.
func Step(start, stop, step int) Range { return Range{Start: start, Stop: stop, Step: step} }

// Rev selects the whole axis in reverse order.
func Rev() Range { return Range{Step: -1, all: true} }

// At selects index i and drops the axis.
func At(i int) Range { return Range{Start: i, Stop: i + 1, Step: 1, drop: true} }

func newView(st C.ta_status, h *C.ta_tensor, cerr *C.ta_error) (*Tensor, error) {
	if err := takeError(st, cerr); err != nil {
		return nil, err
	}
	return newTensor(h), nil
}

// Slice returns a view of the elements selected by one Range per axis. It
// shares t's epoch queue, keeps the storage alive, and writes through it
// update t; operations on disjoint slices run concurrently.
func (t *Tensor) Slice(ranges ...Range) (*Tensor, error) {
	specs := make([]C.ta_slice, len(ranges))
	var shape []int
	for i, r := range ranges {
		if r.all {
			if shape == nil {
				s, err := t.Shape()
				if err != nil {
					return nil, err
				}
				shape = s
			}
			if i >= len(shape) {
				break // the library reports the rank mismatch
			}
			if r.Step < 0 {
				r.Start, r.Stop = shape[i]-1, -1
			} else {
				r.Start, r.Stop = 0, shape[i]
			}
		}
		specs[i] = C.ta_slice{start: C.int64_t(r.Start), stop: C.int64_t(r.Stop), step: C.int64_t(r.Step)}
		if r.drop {
			specs[i].drop = 1
		}
	}
	var h *C.ta_tensor
	var cerr *C.ta_error
	var p *C.ta_slice
	if len(specs) > 0 {
		p = &specs[0]
	}
	st := C.ta_tensor_slice(t.h, p, C.size_t(len(specs)), &h, &cerr)
	runtime.KeepAlive(t)
	return newView(st, h, cerr)
}

// Permute returns a view with axes reordered: axis j is axis perm[j] of t.
func (t *Tensor) Permute(perm ...int) (*Tensor, error) {
	p, err := sizeArgs("Permute", "axis", perm)
	if err != nil {
		return nil, err
	}
	var h *C.ta_tensor
	var cerr *C.ta_error
	st := C.ta_tensor_permute(t.h, firstSize(p), C.size_t(len(p)), &h, &cerr)
	runtime.KeepAlive(t)
	return newView(st, h, cerr)
}

// T returns the transposed view (axes reversed).
func (t *Tensor) T() (*Tensor, error) {
	var h *C.ta_tensor
	var cerr *C.ta_error
	st := C.ta_tensor_transpose(t.h, &h, &cerr)
	runtime.KeepAlive(t)
	return newView(st, h, cerr)
}

// Conj returns a read-only lazy conjugate view (the identity for real dtypes).
func (t *Tensor) Conj() (*Tensor, error) {
	var h *C.ta_tensor
	var cerr *C.ta_error
	st := C.ta_tensor_conj(t.h, &h, &cerr)
	runtime.KeepAlive(t)
	return newView(st, h, cerr)
}

// Reshape returns a view with new extents over the same elements read in
// row-major order (the elements must be dense).
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	return t.ReshapeOrder(OrderRowMajor, shape...)
}

// ReshapeOrder is Reshape reading the elements in order.
func (t *Tensor) ReshapeOrder(order Order, shape ...int) (*Tensor, error) {
	var h *C.ta_tensor
	var cerr *C.ta_error
	rank, ext, keep, err := dims("Reshape", shape)
	if err != nil {
		return nil, err
	}
	st := C.ta_tensor_reshape(t.h, rank, ext, C.ta_order(order), &h, &cerr)
	runtime.KeepAlive(t)
	runtime.KeepAlive(keep)
	return newView(st, h, cerr)
}
