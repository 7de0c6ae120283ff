package tensorasync

// #include <tensorasync.h>
import "C"

import "runtime"

// Operations. Each one is enrolled on its operands' epoch queues when it is
// called and runs later on a worker; the returned error is a submission-time
// failure (dtype, known shape, read-only output, alias, bad handle), which
// enrolls nothing. Run-time failures poison the outputs and reach later
// readers, Wait and events. Pass WithEvent(&ev) for the operation's Event.
//
// Scalars are complex128 so that one signature serves every dtype; untyped
// constants convert (t.Scale(2)), and real dtypes need a zero imaginary part.

// callOut holds a call's out-parameters: one allocation, since cgo makes
// every pointer passed to C escape.
type callOut struct {
	ev  *C.ta_event
	err *C.ta_error
}

// Fill sets every element to v (an overwrite: it cleans a poisoned tensor).
// v must be representable in t's dtype. A complex128 names every integer only
// up to 2^53 in magnitude (Go rounds a larger constant such as 1<<62 + 1 when
// it converts it): for exact 64-bit integers use FillInt64 or FillUint64.
func (t *Tensor) Fill(v complex128, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_fill(t.h, scalar(v), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(t)
	return err
}

// Scale sets t = alpha·t. For exact 64-bit integer factors (beyond 2^53)
// use ScaleInt64 or ScaleUint64.
func (t *Tensor) Scale(alpha complex128, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_scale(t.h, scalar(alpha), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(t)
	return err
}

// FillInt64 is Fill with an exact 64-bit signed integer (ta_fill_i64): an
// integer tensor takes v exactly if its dtype holds it (ErrInvalidArgument
// otherwise); a floating-point or complex tensor takes the nearest value.
func (t *Tensor) FillInt64(v int64, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_fill_i64(t.h, C.int64_t(v), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(t)
	return err
}

// FillUint64 is Fill with an exact 64-bit unsigned integer (ta_fill_u64),
// as FillInt64.
func (t *Tensor) FillUint64(v uint64, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_fill_u64(t.h, C.uint64_t(v), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(t)
	return err
}

// ScaleInt64 is Scale with an exact 64-bit signed integer factor
// (ta_scale_i64; integer arithmetic wraps), checked as FillInt64 checks its
// value.
func (t *Tensor) ScaleInt64(alpha int64, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_scale_i64(t.h, C.int64_t(alpha), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(t)
	return err
}

// ScaleUint64 is Scale with an exact 64-bit unsigned integer factor
// (ta_scale_u64), as ScaleInt64.
func (t *Tensor) ScaleUint64(alpha uint64, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_scale_u64(t.h, C.uint64_t(alpha), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(t)
	return err
}

// Axpy sets y = alpha·x + y.
func Axpy(y *Tensor, alpha complex128, x *Tensor, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_axpy(y.h, scalar(alpha), x.h, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(y)
	runtime.KeepAlive(x)
	return err
}

// Copy sets dst = src element by element (constructing an unconstructed dst).
func Copy(dst, src *Tensor, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_copy(dst.h, src.h, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(dst)
	runtime.KeepAlive(src)
	return err
}

// Gemm sets C = alpha·A·B + beta·C (C must have the product's shape).
func Gemm(c *Tensor, alpha complex128, a, b *Tensor, beta complex128, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_gemm(c.h, scalar(alpha), a.h, b.h, scalar(beta), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(c)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return err
}

// AssignProduct sets C = alpha·A·B, constructing or reshaping C.
func AssignProduct(c *Tensor, alpha complex128, a, b *Tensor, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_assign_product(c.h, scalar(alpha), a.h, b.h, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(c)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return err
}

// AddProduct sets C = alpha·A·B + C.
func AddProduct(c *Tensor, alpha complex128, a, b *Tensor, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_add_product(c.h, scalar(alpha), a.h, b.h, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(c)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return err
}

// Contract is tensordot: axes aAxes[k] of A and bAxes[k] of B are summed in
// pairs; C's axes are A's remaining axes then B's. With beta nil it is an
// overwrite that constructs C; otherwise C = alpha·(A·B) + (*beta)·C.
func Contract(c *Tensor, alpha complex128, a, b *Tensor, aAxes, bAxes []int, beta *complex128, opts ...Option) error {
	if len(aAxes) != len(bAxes) {
		return &Error{Status: StatusInvalidArgument, Code: int64(StatusInvalidArgument), Origin: "Contract",
			Message: "aAxes and bAxes differ in length"}
	}
	aa, err := sizeArgs("Contract", "axis", aAxes)
	if err != nil {
		return err
	}
	bb, err := sizeArgs("Contract", "axis", bAxes)
	if err != nil {
		return err
	}
	var cb *C.ta_scalar
	var bs C.ta_scalar
	if beta != nil {
		bs = scalar(*beta)
		cb = &bs
	}
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_contract(c.h, scalar(alpha), a.h, b.h, C.size_t(len(aa)), firstSize(aa), firstSize(bb), cb, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(c)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return err
}

// PermuteInto sets dst = src with axes reordered (axis k of dst is axis
// perm[k] of src), materialised. For a view without copying, see Permute.
func PermuteInto(dst, src *Tensor, perm []int, opts ...Option) error {
	p, err := sizeArgs("PermuteInto", "axis", perm)
	if err != nil {
		return err
	}
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_permute(dst.h, src.h, C.size_t(len(p)), firstSize(p), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(dst)
	runtime.KeepAlive(src)
	return err
}

// ConjInto sets dst = conj(src), materialised. For a lazy view, see Conj.
func ConjInto(dst, src *Tensor, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_conj(dst.h, src.h, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(dst)
	runtime.KeepAlive(src)
	return err
}

// Sum sums x over axes into out, a tensor of x's remaining axes. nil axes
// sum every element into a 0-d out; an empty, non-nil slice ([]int{}) sums
// over no axis, so out gets x's shape and elements (as the C API tells a
// NULL axes from naxes == 0).
func Sum(out, x *Tensor, axes []int, opts ...Option) error {
	ax, err := sizeArgs("Sum", "axis", axes)
	if err != nil {
		return err
	}
	var p *C.size_t // NULL: every element
	if axes != nil {
		if len(ax) > 0 {
			p = &ax[0]
		} else {
			p = new(C.size_t) // not NULL: no axis
		}
	}
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_sum(out.h, x.h, C.size_t(len(ax)), p, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(out)
	runtime.KeepAlive(x)
	runtime.KeepAlive(ax)
	return err
}

// Dot sets a 0-d out to sum(conj(x)·y) if conjugate, else sum(x·y).
func Dot(out, x, y *Tensor, conjugate bool, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_dot(out.h, x.h, y.h, cFlag(conjugate), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(out)
	runtime.KeepAlive(x)
	runtime.KeepAlive(y)
	return err
}

// Norm2 sets a 0-d out (of the real dtype) to the Euclidean norm of x.
func Norm2(out, x *Tensor, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_norm2(out.h, x.h, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(out)
	runtime.KeepAlive(x)
	return err
}

// Potrf factorises a square matrix in place (Cholesky, one triangle).
func Potrf(a *Tensor, uplo Uplo, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_potrf(a.h, C.ta_uplo(uplo), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(a)
	return err
}

// Trsm solves op(A)·X = alpha·B (SideLeft) or X·op(A) = alpha·B (SideRight),
// X overwriting B.
func Trsm(b *Tensor, side Side, uplo Uplo, diag Diag, alpha complex128, a *Tensor, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_trsm(b.h, C.ta_side(side), C.ta_uplo(uplo), C.ta_diag(diag), scalar(alpha), a.h, sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(b)
	runtime.KeepAlive(a)
	return err
}

// Syrk sets one triangle of C = alpha·A·A^H + beta·C.
func Syrk(c *Tensor, uplo Uplo, alpha complex128, a *Tensor, beta complex128, opts ...Option) error {
	sc, err := configure(opts)
	if err != nil {
		return err
	}
	r := new(callOut)
	st := C.ta_syrk(c.h, C.ta_uplo(uplo), scalar(alpha), a.h, scalar(beta), sc.ptr(), sc.eventOut(&r.ev), &r.err)
	err = sc.finish(st, r.ev, r.err)
	runtime.KeepAlive(sc.keep)
	runtime.KeepAlive(c)
	runtime.KeepAlive(a)
	return err
}
