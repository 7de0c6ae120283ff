package tensorasync

// #include <stdlib.h>
// #include <tensorasync.h>
// ta_status ta_go_kernel_submit(uintptr_t handle, const char *name, const ta_access *accesses,
//                               size_t naccesses, const ta_submit *opts, ta_event **event_out,
//                               ta_error **error);
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// Access is one operand of a user kernel: a tensor and how the kernel uses it.
type Access struct {
	Tensor *Tensor
	Mode   Mode
}

// Reads, Writes and Updates make Accesses.
func Reads(t *Tensor) Access   { return Access{t, ModeRead} }
func Writes(t *Tensor) Access  { return Access{t, ModeWrite} }
func Updates(t *Tensor) Access { return Access{t, ModeUpdate} }

// View is the resolved view of one kernel operand: library-owned memory,
// valid only during the kernel call. Element (i0, i1, ...) is at offset
// sum(ik * Strides[k]) elements from Data.
type View struct {
	Data    unsafe.Pointer
	Shape   []int
	Strides []int
	DType   DType
	Mode    Mode
	Conj    bool // reads must conjugate (complex dtypes)
}

// Array is a typed view of strided library-owned memory: Data covers the
// elements from the lowest to the highest address the view reaches, and
// element (i0, i1, ...) is Data[Base + sum(ik*Strides[k])].
type Array[T Elem] struct {
	Data    []T
	Base    int
	Shape   []int
	Strides []int
}

// ArrayOf gives the typed array of a kernel view; T must be the view's dtype.
// The slice aliases library memory and is valid only during the kernel call.
func ArrayOf[T Elem](v View) (Array[T], error) {
	if dt := DTypeOf[T](); dt != v.DType {
		return Array[T]{}, &Error{Status: StatusDtypeMismatch, Code: int64(StatusDtypeMismatch), Origin: "ArrayOf",
			Message: fmt.Sprintf("view of %v read as %v", v.DType, dt)}
	}
	lo, hi := 0, 0
	for k, e := range v.Shape {
		if e == 0 {
			return Array[T]{Shape: v.Shape, Strides: v.Strides}, nil
		}
		d := (e - 1) * v.Strides[k]
		if d < 0 {
			lo += d
		} else {
			hi += d
		}
	}
	base := (*T)(unsafe.Add(v.Data, lo*int(unsafe.Sizeof(*new(T)))))
	return Array[T]{Data: unsafe.Slice(base, hi-lo+1), Base: -lo, Shape: v.Shape, Strides: v.Strides}, nil
}

// Offset is the index in Data of element idx.
func (a Array[T]) Offset(idx ...int) int {
	o := a.Base
	for k, i := range idx {
		o += i * a.Strides[k]
	}
	return o
}

// At is element idx.
func (a Array[T]) At(idx ...int) T { return a.Data[a.Offset(idx...)] }

// Set stores v at idx.
func (a Array[T]) Set(v T, idx ...int) { a.Data[a.Offset(idx...)] = v }

// Len is the number of elements.
func (a Array[T]) Len() int { return product(a.Shape) }

// Contiguous returns the elements as one slice in row-major order when the
// view is dense row-major.
func (a Array[T]) Contiguous() ([]T, bool) {
	want := 1
	for k := len(a.Shape) - 1; k >= 0; k-- {
		if a.Shape[k] != 1 && a.Strides[k] != want {
			return nil, false
		}
		want *= a.Shape[k]
	}
	return a.Data[a.Base : a.Base+want], true
}

// KernelFunc is a user kernel written in Go. It runs once on a library worker
// thread, after its accesses are granted, with one View per Access, in order.
// It must not keep the views (or slices of them) after it returns, and should
// not block for long (it holds a worker). A non-nil error (or a panic, nil
// values included) fails the operation with ErrKernelFailed and poisons every
// operand it writes; the error's text is the message, and a *KernelError's
// Code is kept as the error code (otherwise the code is 1).
//
// A kernel may submit operations. Waiting inside a Submit kernel
// (Event.Wait, Tensor.Wait, Read, Map) on an operation that needs the kernel
// to finish, such as one on a tensor it accesses, fails at once with
// ErrWouldDeadlock; a wait on other work blocks the worker in the library,
// which runs queued work meanwhile (so a runtime of one worker does not
// deadlock), checking ctx between short slices. Event.Done channels are not
// such waits: do not block on them in a kernel. (A SubmitGoroutine kernel
// runs on no worker: its waits are ordinary ones, and one on its own
// operands lasts until its ctx ends.)
//
// A kernel run by Submit must not call runtime.Goexit (t.FailNow, t.Fatal,
// t.SkipNow and the like do): the kernel runs in a cgo callback on a library
// worker, which the Go runtime cannot leave that way, and the process dies
// with a message saying so. Return an error or panic instead (a panic
// is caught). A SubmitGoroutine kernel may call it: the operation then fails.
type KernelFunc func(views []View) error

// KernelError lets a kernel choose the code of its failure (not 0); the
// operation fails with ErrKernelFailed carrying it.
type KernelError struct {
	Code    uint32
	Message string
}

func (e *KernelError) Error() string { return e.Message }

// Submit submits a Go kernel over the accesses. name names the operation in
// error objects; names are kept (as C strings) for the life of the process,
// since the library holds them until their operations complete, so use a
// fixed set of names rather than one per call.
//
// The kernel travels to C as a cgo.Handle (an integer, never a Go pointer)
// and comes back through an exported trampoline; the handle is deleted once
// the operation has completed, whether or not the kernel ran.
func Submit(name string, kernel KernelFunc, accesses []Access, opts ...Option) error {
	acc := make([]C.ta_access, len(accesses))
	for i, a := range accesses {
		acc[i] = C.ta_access{tensor: a.Tensor.h, mode: C.ta_mode(a.Mode)}
	}
	c, err := configure(opts)
	if err != nil {
		return err
	}
	h := cgo.NewHandle(kernel)
	var ev *C.ta_event
	var cerr *C.ta_error
	var p *C.ta_access
	if len(acc) > 0 {
		p = &acc[0]
	}
	st := C.ta_go_kernel_submit(C.uintptr_t(h), internCString(name), p, C.size_t(len(acc)), c.ptr(), &ev, &cerr)
	runtime.KeepAlive(accesses)
	runtime.KeepAlive(c.keep)
	if err := takeError(st, cerr); err != nil {
		h.Delete()
		return err
	}
	if err := whenDone(ev, func(error) { h.Delete() }); err != nil {
		C.ta_event_free(ev)
		return err // the handle stays: the kernel may still run
	}
	if c.event != nil {
		*c.event = newEvent(ev)
	} else {
		C.ta_event_free(ev)
	}
	return nil
}

// runKernel is called by the trampoline (export.go).
func runKernel(views *C.ta_view, n C.size_t, handle C.uintptr_t, ctx *C.ta_kernel_ctx) C.ta_status {
	k := cgo.Handle(handle).Value().(KernelFunc)
	returned := false
	defer func() {
		if !returned {
			// Only runtime.Goexit leaves callKernel without returning (it
			// recovers panics). The Go runtime cannot unwind a cgo callback
			// that way; the process is about to die, so say why.
			panic("tensorasync: a kernel run by Submit called runtime.Goexit (t.FailNow, t.Fatal, ...), " +
				"which a library worker cannot survive; return an error instead (or use SubmitGoroutine)")
		}
	}()
	code, msg := callKernel(k, goViews(unsafe.Slice(views, int(n))))
	returned = true
	if code != 0 {
		cmsg := C.CString(msg)
		C.ta_kernel_set_error(ctx, cmsg)
		C.free(unsafe.Pointer(cmsg))
	}
	return C.ta_status(code)
}

// goViews converts resolved C views (copying their extents and strides).
func goViews(cv []C.ta_view) []View {
	vs := make([]View, len(cv))
	for i, v := range cv {
		r := int(v.rank)
		vs[i] = View{Data: v.data, Shape: make([]int, r), Strides: make([]int, r),
			DType: DType(v.dtype), Mode: Mode(v.mode), Conj: v.conj != 0}
		if r == 0 {
			continue
		}
		ext := unsafe.Slice(v.extents, r)
		str := unsafe.Slice(v.strides, r)
		for j := 0; j < r; j++ {
			vs[i].Shape[j] = int(ext[j])
			vs[i].Strides[j] = int(str[j])
		}
	}
	return vs
}

// callKernel runs k and gives the failure code (0 for success) and message.
// A Go panic must not unwind into the library's frames: it becomes a failure,
// whatever its value (recover gives nil for panic(nil) on Go 1.19, so the
// kernel's normal return is what tells success apart). It does not return if
// k calls runtime.Goexit.
func callKernel(k KernelFunc, vs []View) (code uint32, msg string) {
	returned := false
	defer func() {
		if returned {
			return
		}
		r := recover()
		if r == nil {
			// panic(nil), or runtime.Goexit (which goes on unwinding: the
			// callers handle it).
			code, msg = 1, "panic(nil)"
			return
		}
		code, msg = 1, fmt.Sprint("panic: ", r)
	}()
	err := k(vs)
	returned = true
	if err != nil {
		var ke *KernelError
		if errors.As(err, &ke) && ke.Code != 0 {
			return ke.Code, err.Error()
		}
		return 1, err.Error()
	}
	return 0, ""
}

// SubmitGoroutine submits a Go kernel that runs in a goroutine of its own
// instead of on a library worker (ta_external_submit): once its accesses are
// granted (awaited through the dispatcher, blocking no thread) the kernel
// runs with the views, and the operation completes when it returns. It may
// block, wait on channels or do I/O while holding its accesses, without
// occupying a worker. No C code calls into Go for it.
func SubmitGoroutine(name string, kernel KernelFunc, accesses []Access, opts ...Option) error {
	acc := make([]C.ta_access, len(accesses))
	for i, a := range accesses {
		acc[i] = C.ta_access{tensor: a.Tensor.h, mode: C.ta_mode(a.Mode)}
	}
	var p *C.ta_access
	if len(acc) > 0 {
		p = &acc[0]
	}
	c, err := configure(opts)
	if err != nil {
		return err
	}
	out := new(struct {
		tok     *C.ta_token
		started *C.ta_event
		ev      *C.ta_event
		err     *C.ta_error
	})
	st := C.ta_external_submit(p, C.size_t(len(acc)), internCString(name), c.ptr(), &out.tok, &out.started, &out.ev, &out.err)
	runtime.KeepAlive(accesses)
	runtime.KeepAlive(c.keep)
	if err := takeError(st, out.err); err != nil {
		return err
	}
	tok, started := out.tok, newEvent(out.started)
	n := len(acc)
	go func() {
		defer started.Close()
		finished := false
		defer func() {
			if !finished {
				// The kernel called runtime.Goexit (t.FailNow, ...): the
				// goroutine is ending without callKernel returning. Fail
				// the operation so that its dependents do not wait forever.
				finishToken(tok, 1, "the kernel called runtime.Goexit (t.FailNow, t.Fatal, ...) without returning")
			}
		}()
		if err := started.Wait(context.Background()); err != nil {
			finished = true
			// An input was poisoned: the operation has failed already and
			// the token only needs finishing.
			C.ta_token_finish(tok, C.TA_STATUS_CANCELLED, nil)
			return
		}
		cv := make([]C.ta_view, n+1)
		var cnt C.size_t
		if st := C.ta_token_views(tok, &cv[0], C.size_t(n), &cnt); st != C.TA_STATUS_OK {
			finished = true
			finishToken(tok, uint32(st), "ta_token_views: "+Status(st).Name())
			return
		}
		code, msg := callKernel(kernel, goViews(cv[:int(cnt)]))
		finished = true
		if code != 0 && name != "" && finishTokenWithCode(tok, code, name, msg) {
			return
		}
		if code == uint32(C.TA_STATUS_CANCELLED) {
			// ta_token_finish reads CANCELLED's value as a cancellation, not
			// as a failure code: the kernel failed, so say that.
			code = uint32(C.TA_STATUS_KERNEL_FAILED)
		}
		finishToken(tok, code, msg)
	}()
	if c.event != nil {
		*c.event = newEvent(out.ev)
	} else {
		C.ta_event_free(out.ev)
	}
	return nil
}

// finishTokenWithCode fails the token's operation with KERNEL_FAILED
// carrying code exactly (CANCELLED's value included), named name; false
// (the token untouched) if the error object cannot be made.
func finishTokenWithCode(tok *C.ta_token, code uint32, name, msg string) bool {
	cname, cmsg := C.CString(name), C.CString(msg)
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(cmsg))
	var e *C.ta_error
	if C.ta_error_new(C.TA_STATUS_KERNEL_FAILED, C.int64_t(code), cname, cmsg, &e) != C.TA_STATUS_OK {
		return false
	}
	C.ta_token_finish_error(tok, e)
	C.ta_error_free(e)
	return true
}

func finishToken(tok *C.ta_token, code uint32, msg string) {
	if code == 0 {
		C.ta_token_finish(tok, C.TA_STATUS_OK, nil)
		return
	}
	cmsg := C.CString(msg)
	C.ta_token_finish(tok, C.ta_status(code), cmsg)
	C.free(unsafe.Pointer(cmsg))
}
