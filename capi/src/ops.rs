//! Submitting operations: fill, scale, axpy, copies.

use std::ffi::c_void;
use std::marker::PhantomData;

use super::args::{array_arg, layout_arg};
use super::handles::{self, Borrows};
use super::{arg, borrowed, guard, need, put, raw};
use super::{ta_error, ta_event, ta_scalar, ta_status, ta_submit, ta_tensor};
use ta::ops::{self, Completion, Detached, Evented, Submit};
use ta::Order;
use ta::Selector;
use ta::{CompletionQueue, Event, Runtime};
use ta::{Error, Status};
use ta::{Imm, Scalar};

struct SendPtr(*mut c_void);
// SAFETY: the userdata pointer is only handed back to the user's callback,
// which the user declared callable from any thread.
unsafe impl Send for SendPtr {}

/// Submission options decoded from a `ta_submit`; the runtime is owned
/// (`R = Runtime`) or borrowed from the handle table (`R = &Runtime`, see
/// [`submit_in`]).
pub(crate) struct Opts<R = Runtime> {
    runtime: Option<R>,
    cq: Option<(CompletionQueue, u64)>,
    callback: Option<ta::Callback>,
    selector: Selector,
    transfer: bool,
    priority: i32,
    defer: bool,
}

/// How [`Opts`] holds its runtime.
pub(crate) trait RuntimeRef {
    fn runtime(&self) -> &Runtime;
}

impl RuntimeRef for Runtime {
    fn runtime(&self) -> &Runtime {
        self
    }
}

impl RuntimeRef for &Runtime {
    fn runtime(&self) -> &Runtime {
        self
    }
}

impl Opts {
    pub(crate) fn decode(opts: *const ta_submit, origin: &'static str) -> Result<Opts, Error> {
        Opts::decode_with(opts, origin, arg)
    }
}

impl<R: RuntimeRef> Opts<R> {
    fn decode_with(
        opts: *const ta_submit,
        origin: &'static str,
        lookup: impl FnOnce(*const super::ta_runtime, &'static str, &str) -> Result<R, Error>,
    ) -> Result<Opts<R>, Error> {
        if opts.is_null() {
            return Ok(Opts {
                runtime: None,
                cq: None,
                callback: None,
                selector: Selector::AUTO,
                transfer: false,
                priority: 0,
                defer: false,
            });
        }
        // SAFETY: a non-NULL `opts` points to a readable `ta_submit` by the C contract.
        let o = unsafe { *opts };
        let runtime = if o.runtime.is_null() { None } else { Some(lookup(o.runtime, origin, "opts.runtime")?) };
        let cq = if o.cq.is_null() { None } else { Some((arg(o.cq, origin, "opts.cq")?, o.cq_tag)) };
        let selector = crate::domain::selector_from_c(o.backends).ok_or_else(|| {
            Error::new(Status::InvalidArgument, origin, format!("unknown backend bits {:#x}", o.backends))
        })?;
        let callback = o.callback.map(|f| {
            let ud = SendPtr(o.callback_userdata);
            Box::new(move |r: &ta::Result<()>| {
                let ud = &ud;
                let status = match r {
                    Ok(()) => Status::Ok,
                    Err(e) => e.status(),
                };
                // SAFETY: the user's callback, called once with its own userdata.
                unsafe { f(crate::status::to_c(status), ud.0) }
            }) as ta::Callback
        });
        let unknown = o.flags & !(super::TA_SUBMIT_TRANSFER | super::TA_SUBMIT_EXTENDED | super::TA_SUBMIT_DEFER);
        if unknown != 0 {
            return Err(Error::new(Status::InvalidArgument, origin, format!("unknown flags {unknown:#x}")));
        }
        let priority =
            if o.flags & super::TA_SUBMIT_EXTENDED != 0 { super::submit_ex::priority(opts, origin)? } else { 0 };
        Ok(Opts {
            runtime,
            cq,
            callback,
            selector,
            transfer: o.flags & super::TA_SUBMIT_TRANSFER != 0,
            priority,
            defer: o.flags & super::TA_SUBMIT_DEFER != 0,
        })
    }

    fn submit<C: Completion>(&mut self) -> Submit<'_, C> {
        Submit {
            runtime: self.runtime.as_ref().map(|r| r.runtime()),
            callback: self.callback.take(),
            cq: self.cq.as_ref().map(|(q, t)| (q, *t)),
            selector: self.selector,
            transfer: self.transfer,
            priority: self.priority,
            defer: self.defer,
            completion: PhantomData,
        }
    }
}

/// Evaluate `$body` with `$form` bound to the completion form that
/// `$event_out` asks for: [`Detached`] where it is NULL (no event is made and
/// no handle slot taken), [`Evented`] otherwise. The body is instantiated
/// once per form (closures cannot be generic); the helpers below take the
/// form as their first argument.
macro_rules! per_form {
    ($event_out:expr, |$form:ident| $body:expr) => {
        if $event_out.is_null() {
            let $form = ::ta::ops::Detached;
            $body
        } else {
            let $form = ::ta::ops::Evented;
            $body
        }
    };
}
pub(crate) use per_form;

/// How a completion form reaches `event_out` (see [`per_form`]).
pub(crate) trait Deliver: Completion + Copy {
    /// What is set aside before the operation is enrolled.
    type Slot;
    fn reserve(origin: &'static str) -> Result<Self::Slot, Error>;
    fn deliver(event_out: *mut *mut ta_event, out: Self::Output, slot: Self::Slot);
}

/// `event_out` is not NULL: it receives a handle for the event.
impl Deliver for Evented {
    type Slot = handles::Reserved;
    /// The handle slot is taken before the operation is enrolled: once it
    /// is, the submission cannot fail (see [`handles::reserve`]).
    #[inline]
    fn reserve(origin: &'static str) -> Result<handles::Reserved, Error> {
        handles::reserve().ok_or_else(|| Error::new(Status::OutOfMemory, origin, "the handle table is full"))
    }
    #[inline]
    fn deliver(event_out: *mut *mut ta_event, ev: Event, slot: handles::Reserved) {
        put(event_out, super::fill_handle(slot, ev));
    }
}

/// `event_out` is NULL: nothing to set aside or deliver.
impl Deliver for Detached {
    type Slot = ();
    #[inline]
    fn reserve(_: &'static str) -> Result<(), Error> {
        Ok(())
    }
    #[inline]
    fn deliver(_: *mut *mut ta_event, (): (), (): ()) {}
}

/// Decode options, run the submission, and store the event handle if asked
/// (`form` from [`per_form`]).
pub(crate) fn submit_with<C: Deliver>(
    _form: C,
    origin: &'static str,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    f: impl FnOnce(Submit<'_, C>) -> ta::Result<C::Output>,
) -> Result<(), Error> {
    let mut o = Opts::decode(opts, origin)?;
    let slot = C::reserve(origin)?;
    let out = f(o.submit())?;
    C::deliver(event_out, out, slot);
    Ok(())
}

/// What [`submit_with`] checks before it submits, for a call that schedules
/// nothing (the event slot taken goes back to the table).
pub(crate) fn check_submission(
    origin: &'static str,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
) -> Result<(), Error> {
    Opts::decode(opts, origin)?;
    if !event_out.is_null() {
        Evented::reserve(origin)?;
    }
    Ok(())
}

/// As [`submit_with`], with the runtime looked up in `b` (which must have
/// locked the shard of `opts.runtime`: see [`lock_runtime`]), and returning
/// what the operation returns: the caller makes the event's handle once it
/// has let `b` go (see [`super::handles::Borrows`]).
pub(crate) fn submit_in<C: Completion>(
    _form: C,
    b: &Borrows,
    origin: &'static str,
    opts: *const ta_submit,
    f: impl FnOnce(Submit<'_, C>) -> ta::Result<C::Output>,
) -> Result<C::Output, Error> {
    let mut o = Opts::decode_with(opts, origin, |h, origin, what| borrowed(b, h, origin, what))?;
    f(o.submit())
}

/// Run a submission (`body`, which looks its handles up in the `Borrows` it
/// is given and calls [`submit_in`]) with the shards of `tensors` and of
/// `opts.runtime` read-locked, one lock per shard (no reference counts
/// taken per call), then give `event_out` the event's handle once the
/// table's locks are let go. `body` runs with the locks held, so it must
/// not create or free handles or run user code (operations only enroll; see
/// [`Borrows`]). Inlined into each caller, like the lookups it serves
/// (out of line: 50 more instructions per `ta_kernel_submit`, callgrind).
#[inline(always)]
pub(crate) fn submit_borrowing<C: Deliver>(
    _form: C,
    origin: &'static str,
    tensors: impl IntoIterator<Item = *const ta_tensor>,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    body: impl FnOnce(&Borrows) -> Result<C::Output, Error>,
) -> Result<(), Error> {
    // Before the shards are read-locked: taking the slot write-locks this
    // thread's shard.
    let slot = C::reserve(origin)?;
    let out = {
        let mut b = Borrows::new();
        for h in tensors {
            b.lock(raw(h));
        }
        lock_runtime(&mut b, opts);
        body(&b)?
    };
    C::deliver(event_out, out, slot);
    Ok(())
}

/// [`submit_borrowing`] for a fixed list of tensors (handle, argument name),
/// looked up in order and passed to `f` with the submission options.
pub(crate) fn submit_on<C: Deliver, const N: usize>(
    form: C,
    origin: &'static str,
    tensors: [(*const ta_tensor, &str); N],
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    f: impl FnOnce([&ta::Tensor; N], Submit<'_, C>) -> ta::Result<C::Output>,
) -> Result<(), Error> {
    submit_borrowing(form, origin, tensors.map(|(h, _)| h), opts, event_out, |b| {
        let mut found: [Option<&ta::Tensor>; N] = [None; N];
        for (slot, (h, what)) in found.iter_mut().zip(&tensors) {
            *slot = Some(borrowed(b, *h, origin, what)?);
        }
        let ts = found.map(|t| t.expect("every operand was looked up"));
        submit_in(form, b, origin, opts, |s| f(ts, s))
    })
}

/// Lock the shard of `opts.runtime` in `b` (for [`submit_in`]).
fn lock_runtime(b: &mut Borrows, opts: *const ta_submit) {
    if !opts.is_null() {
        // SAFETY: a non-NULL `opts` points to a readable `ta_submit` by the C contract.
        b.lock(super::raw(unsafe { (*opts).runtime }));
    }
}

fn scalar(s: ta_scalar) -> Scalar {
    Scalar::complex(s.re, s.im)
}

/// Set every element of `tensor` to `value` (an overwrite: the elements it
/// writes become clean). `value` must be representable in the dtype: real
/// dtypes need `im == 0`, integer dtypes an integral `re` the dtype holds
/// (every such double is exact; for 64-bit values no double names use
/// `ta_fill_i64`/`ta_fill_u64`), otherwise `TA_STATUS_INVALID_ARGUMENT`.
/// `opts` may be NULL; `event_out` (may be NULL) receives an event for the
/// operation. A submission that returns an error fires no callback, queues
/// no completion entry and returns no event (this holds for every
/// operation).
#[no_mangle]
pub extern "C" fn ta_fill(
    tensor: *const ta_tensor,
    value: ta_scalar,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_fill";
    guard(O, error, || {
        per_form!(event_out, |form| submit_on(form, O, [(tensor, "tensor")], opts, event_out, |[t], s| ops::fill(
            t,
            scalar(value),
            s
        )))
    })
}

/// `x = alpha * x` (an update: a poisoned `x` fails the operation).
/// `alpha` is checked as `ta_fill` checks its value. Integer arithmetic
/// wraps (two's complement), in this and every other operation.
#[no_mangle]
pub extern "C" fn ta_scale(
    x: *const ta_tensor,
    alpha: ta_scalar,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_scale";
    guard(O, error, || {
        per_form!(event_out, |form| submit_on(form, O, [(x, "x")], opts, event_out, |[t], s| ops::scale(
            t,
            scalar(alpha),
            s
        )))
    })
}

/// `ta_fill` with an exact 64-bit signed integer (a double cannot name every
/// one): an integer tensor takes `value` exactly if its dtype holds it
/// (otherwise `TA_STATUS_INVALID_ARGUMENT`); a floating-point or complex
/// tensor takes the nearest value of its dtype.
#[no_mangle]
pub extern "C" fn ta_fill_i64(
    tensor: *const ta_tensor,
    value: i64,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_fill_i64";
    guard(O, error, || {
        per_form!(event_out, |form| submit_on(form, O, [(tensor, "tensor")], opts, event_out, |[t], s| ops::fill(
            t,
            Imm::int(value),
            s
        )))
    })
}

/// `ta_fill` with an exact 64-bit unsigned integer, as `ta_fill_i64`.
#[no_mangle]
pub extern "C" fn ta_fill_u64(
    tensor: *const ta_tensor,
    value: u64,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_fill_u64";
    guard(O, error, || {
        per_form!(event_out, |form| submit_on(form, O, [(tensor, "tensor")], opts, event_out, |[t], s| ops::fill(
            t,
            Imm::uint(value),
            s
        )))
    })
}

/// `ta_scale` with an exact 64-bit signed integer `alpha`, checked as
/// `ta_fill_i64` checks its value (integer products wrap).
#[no_mangle]
pub extern "C" fn ta_scale_i64(
    x: *const ta_tensor,
    alpha: i64,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_scale_i64";
    guard(O, error, || {
        per_form!(event_out, |form| submit_on(form, O, [(x, "x")], opts, event_out, |[t], s| ops::scale(
            t,
            Imm::int(alpha),
            s
        )))
    })
}

/// `ta_scale` with an exact 64-bit unsigned integer `alpha`, as `ta_scale_i64`.
#[no_mangle]
pub extern "C" fn ta_scale_u64(
    x: *const ta_tensor,
    alpha: u64,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_scale_u64";
    guard(O, error, || {
        per_form!(event_out, |form| submit_on(form, O, [(x, "x")], opts, event_out, |[t], s| ops::scale(
            t,
            Imm::uint(alpha),
            s
        )))
    })
}

/// `y = alpha * x + y`. Shapes and dtypes must match; `x` and `y` must be
/// different values (`TA_STATUS_ALIAS`).
#[no_mangle]
pub extern "C" fn ta_axpy(
    y: *const ta_tensor,
    alpha: ta_scalar,
    x: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_axpy";
    guard(O, error, || {
        per_form!(event_out, |form| submit_on(form, O, [(y, "y"), (x, "x")], opts, event_out, |[ty, tx], s| ops::axpy(
            ty,
            scalar(alpha),
            tx,
            s
        )))
    })
}

/// `dst = src` element by element, for any strides of either. Constructs an
/// unconstructed `dst` (dense row-major); a constructed `dst` must have
/// `src`'s extents (`TA_STATUS_SHAPE_MISMATCH`). Cleans the poison of what it
/// writes. Moves data across domains (host and CUDA devices, either way)
/// without `TA_SUBMIT_TRANSFER`.
#[no_mangle]
pub extern "C" fn ta_copy(
    dst: *const ta_tensor,
    src: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_copy";
    guard(O, error, || {
        per_form!(event_out, |form| submit_on(form, O, [(dst, "dst"), (src, "src")], opts, event_out, |[d, s], o| {
            ops::copy(d, s, o)
        }))
    })
}

/// Copy host memory into `dst` asynchronously. `src` is the address of
/// element `[0, 0, ...]` of `rank` extents of elements placed by
/// `src_strides` (elements; negative ones reach below `src`; NULL for dense
/// row-major). An
/// unconstructed `dst` is constructed with these extents; a constructed one
/// must have them (`TA_STATUS_SHAPE_MISMATCH`). The memory at `src` must stay
/// valid and unmodified until the operation completes (its event, callback or
/// completion entry).
#[no_mangle]
pub extern "C" fn ta_copy_in(
    dst: *const ta_tensor,
    src: *const c_void,
    rank: usize,
    extents: *const usize,
    src_strides: *const isize,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_copy_in";
    guard(O, error, || {
        let layout = layout_arg(rank, extents, src_strides, Order::RowMajor, O)?;
        // SAFETY: forwarded C contract: `src` stays valid until completion.
        per_form!(event_out, |form| submit_on(form, O, [(dst, "dst")], opts, event_out, |[d], s| unsafe {
            ops::copy_in(d, src.cast(), layout, s)
        }))
    })
}

/// Copy `src` out to host memory asynchronously. `dst` is where element
/// `[0, 0, ...]` goes; `dst_strides` (elements, one per axis of `src`; NULL for
/// dense row-major; negative ones reach below `dst`) place the others.
/// `capacity` is the number of elements the buffer holds from the lowest to
/// the highest address written: `TA_STATUS_BUFFER_TOO_SMALL` if the layout
/// needs more. The memory at `dst` must stay valid, and must not be read or
/// written by the caller, until the operation completes.
#[no_mangle]
pub extern "C" fn ta_copy_out(
    src: *const ta_tensor,
    dst: *mut c_void,
    capacity: usize,
    dst_strides: *const isize,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_copy_out";
    guard(O, error, || {
        need(dst, O, "dst")?;
        per_form!(event_out, |form| submit_on(form, O, [(src, "src")], opts, event_out, |[s], o| {
            let strides = if dst_strides.is_null() {
                None
            } else {
                let rank = s.layout().map(|l| l.rank()).unwrap_or(0);
                Some(array_arg(dst_strides, rank, O, "dst_strides")?)
            };
            // SAFETY: forwarded C contract: `dst` stays valid until completion.
            unsafe { ops::copy_out(s, dst.cast(), capacity, strides, o) }
        }))
    })
}
