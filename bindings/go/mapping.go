package tensorasync

// #include <tensorasync.h>
import "C"

import (
	"context"
	"runtime"
	"unsafe"
)

// Mapping is granted host access to a tensor's memory (ta_tensor_acquire):
// the library's memory, seen from Go without a copy, valid until Release.
// A READ mapping lets later readers run and holds later writers back; a
// WRITE or UPDATE mapping holds back every later access.
type Mapping struct {
	h    *C.ta_mapping
	view C.ta_view
}

// Map enrolls one access of mode on t and waits (through the dispatcher, with
// ctx) until it is granted. READ and UPDATE of a poisoned tensor fail with
// its error; WRITE is a pure overwrite. Release the mapping when done.
func (t *Tensor) Map(ctx context.Context, mode Mode) (*Mapping, error) {
	var h *C.ta_mapping
	var ev *C.ta_event
	var cerr *C.ta_error
	st := C.ta_tensor_acquire_async(t.h, C.ta_mode(mode), &h, &ev, &cerr)
	runtime.KeepAlive(t)
	if err := takeError(st, cerr); err != nil {
		return nil, err
	}
	e := newEvent(ev)
	defer e.Close()
	m := &Mapping{h: h}
	if err := e.Wait(ctx); err != nil {
		m.Release() // released as soon as it is granted
		return nil, err
	}
	var v C.ta_view
	if err := check(C.ta_mapping_view(h, &v)); err != nil {
		m.Release()
		return nil, err
	}
	m.view = v
	return m, nil
}

// View is the mapped memory's layout (Data valid until Release).
func (m *Mapping) View() View {
	v := m.view
	r := int(v.rank)
	out := View{Data: v.data, Shape: make([]int, r), Strides: make([]int, r), DType: DType(v.dtype),
		Mode: Mode(v.mode), Conj: v.conj != 0}
	ext := unsafe.Slice(v.extents, r)
	str := unsafe.Slice(v.strides, r)
	for i := 0; i < r; i++ {
		out.Shape[i] = int(ext[i])
		out.Strides[i] = int(str[i])
	}
	return out
}

// MappedArray is the mapping as a typed strided array over the library's
// memory, without a copy; T must be the tensor's element type. Valid until
// m.Release(); write it only through a WRITE or UPDATE mapping.
func MappedArray[T Elem](m *Mapping) (Array[T], error) { return ArrayOf[T](m.View()) }

// Release ends the access; later work waiting behind it runs. Idempotent.
// There is no finalizer: slices of the mapping may outlive the Mapping value,
// so only an explicit Release ends the access (a forgotten mapping holds later
// writers back; it never frees memory still in use).
func (m *Mapping) Release() error {
	if m == nil || m.h == nil {
		return nil
	}
	h := m.h
	m.h = nil
	return check(C.ta_mapping_free(h))
}
