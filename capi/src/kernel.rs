//! User kernels from C.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void, CStr};

use smallvec::SmallVec;

use super::args::list_arg;
use super::handles::Borrows;
use super::ops::{per_form, submit_borrowing, submit_in};
use super::{borrowed, guard, need};
use super::{ta_access, ta_error, ta_event, ta_kernel_ctx, ta_kernel_fn, ta_range_fn, ta_status, ta_submit, ta_view};
use ta::ops::{self, KernelCall, KernelFailure, KernelFn, KernelResult, OpName};
use ta::Mode;
use ta::{Error, Status};

thread_local! {
    /// C kernels running on this thread, innermost last: (context token, call).
    /// A token is never reused on a thread, so a context kept past its kernel
    /// is recognised as stale even when a later kernel's call sits at the same
    /// stack address.
    static ACTIVE: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
    static NEXT_TOKEN: Cell<usize> = const { Cell::new(0) };
}

type CKernel = unsafe extern "C" fn(*const ta_view, usize, *mut c_void, *mut ta_kernel_ctx) -> ta_status;

/// A C kernel and its userdata, stored inline in the kernel (no allocation).
#[derive(Clone, Copy)]
struct CKernelRef {
    f: CKernel,
    userdata: *mut c_void,
}

// SAFETY: the C contract lets a kernel run on any worker thread with its userdata.
unsafe impl Send for CKernelRef {}

/// Calls the C kernel `k`.
fn trampoline(k: CKernelRef, call: &mut KernelCall<'_>) -> KernelResult {
    let f = k.f;
    let mut views: SmallVec<[ta_view; 4]> = SmallVec::new();
    for v in call.views() {
        views.push(ta_view {
            data: v.ptr.cast(),
            extents: v.extents.as_ptr(),
            strides: v.strides.as_ptr(),
            rank: v.extents.len(),
            dtype: v.dtype as u32,
            mode: v.mode as u32,
            domain: crate::domain::to_c(v.domain),
            conj: v.conj as u8,
        });
    }
    let token = NEXT_TOKEN.with(|n| {
        n.set(n.get() + 1);
        // Odd, so it is never mistaken for an aligned pointer.
        (n.get() << 1) | 1
    });
    ACTIVE.with(|a| a.borrow_mut().push((token, call as *mut KernelCall<'_> as usize)));
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.borrow_mut().pop());
        }
    }
    let _pop = Pop;
    // SAFETY: calling the user's kernel with views valid for the call.
    let rc = unsafe { f(views.as_ptr(), views.len(), k.userdata, token as *mut ta_kernel_ctx) };
    if rc == 0 {
        Ok(())
    } else {
        Err(KernelFailure { code: rc as i64, message: None })
    }
}

/// Run `f` with the kernel call behind `ctx`, if `ctx` is a kernel running on this thread.
pub(crate) fn with_ctx<R>(
    ctx: *mut ta_kernel_ctx,
    origin: &'static str,
    f: impl FnOnce(&mut KernelCall<'_>) -> R,
) -> Result<R, Error> {
    if ctx.is_null() {
        return Err(Error::new(Status::NullHandle, origin, "argument `ctx` is NULL"));
    }
    let call = ACTIVE.with(|a| a.borrow().iter().find(|(t, _)| *t == ctx as usize).map(|(_, c)| *c));
    let Some(call) = call else {
        return Err(Error::new(
            Status::InvalidHandle,
            origin,
            "`ctx` is not a kernel context running on this thread (it is only valid during the kernel call)",
        ));
    };
    // SAFETY: the entry is in ACTIVE, so `call` is the KernelCall of a kernel
    // running on this thread right now (its entry is popped before it returns).
    Ok(f(unsafe { &mut *(call as *mut KernelCall<'_>) }))
}

/// Submit a user kernel. `kernel(views, nviews, userdata, ctx)` runs once the
/// accesses are granted, with one resolved view per entry of `accesses`, in
/// order (any number of them; disjoint views of one tensor may be declared
/// together). `name` (may be NULL) names the operation in error objects; it is not
/// copied, so it must stay valid until the operation completes (a string
/// literal always does). A return
/// value other than `TA_STATUS_OK` fails the operation and poisons every
/// operand the kernel writes (`TA_MODE_WRITE` or `TA_MODE_UPDATE`); the
/// message is the one set with `ta_kernel_set_error`, if any. Declaring the
/// same tensor as input and output is rejected with `TA_STATUS_ALIAS`: use one
/// `TA_MODE_UPDATE` access. The kernel may submit operations, but must not
/// wait on a tensor it accesses (that wait fails with `TA_STATUS_WOULD_DEADLOCK`).
#[no_mangle]
pub extern "C" fn ta_kernel_submit(
    kernel: ta_kernel_fn,
    userdata: *mut c_void,
    name: *const c_char,
    accesses: *const ta_access,
    naccesses: usize,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_kernel_submit";
    guard(O, error, || {
        let Some(f) = kernel else {
            return Err(Error::new(Status::NullPointer, O, "argument `kernel` is NULL"));
        };
        let acc = list_arg(accesses, naccesses, O, "accesses")?;
        // The handles are borrowed from the table for the submission (the
        // accesses take the only new references; see `handles::Borrows`).
        per_form!(event_out, |form| submit_borrowing(form, O, acc.iter().map(|a| a.tensor), opts, event_out, |b| {
            let mut operands = Operands::new();
            let name = operands_and_name(b, acc, name, "kernel", O, &mut operands)?;
            let ck = CKernelRef { f, userdata };
            let k = KernelFn::inline(move |call| trampoline(ck, call));
            submit_in(form, b, O, opts, |s| ops::kernel(name, &operands, k, s))
        }))
    })
}

/// The operands of a submission, each with its access mode.
pub(crate) type Operands<'b> = SmallVec<[(&'b ta::Tensor, Mode); 4]>;

/// The operands of a kernel or external submission, looked up in `b` and
/// pushed onto `operands`, and its name: the C string `name`, not copied, or
/// `default` for NULL. Inlined, like the submission path it is part of; the
/// operands are written in place (returned, the list was moved with loads
/// that waited for the stores that had just filled it).
#[inline(always)]
pub(crate) fn operands_and_name<'b>(
    b: &'b Borrows,
    acc: &[ta_access],
    name: *const c_char,
    default: &'static str,
    origin: &'static str,
    operands: &mut Operands<'b>,
) -> Result<OpName, Error> {
    for (i, a) in acc.iter().enumerate() {
        let t = borrowed(b, a.tensor, origin, "accesses[].tensor")?;
        let m = Mode::from_u32(a.mode).ok_or_else(|| {
            Error::new(Status::InvalidArgument, origin, format!("accesses[{i}].mode {} is not a ta_mode", a.mode))
        })?;
        operands.push((t, m));
    }
    let name = if name.is_null() {
        OpName::from(default)
    } else {
        // SAFETY: a non-NULL name is a NUL-terminated string that the C
        // contract keeps valid until the operation completes.
        unsafe { OpName::borrowed(name.cast(), CStr::from_ptr(name).to_bytes().len()) }
    };
    Ok(name)
}

/// Set the message of the error a running kernel is about to return. `ctx`
/// is the context passed to the kernel; it is valid only during that call
/// and on that thread (`TA_STATUS_INVALID_HANDLE` otherwise).
#[no_mangle]
pub extern "C" fn ta_kernel_set_error(ctx: *mut ta_kernel_ctx, message: *const c_char) -> ta_status {
    const O: &str = "ta_kernel_set_error";
    guard(O, std::ptr::null_mut(), || {
        need(message, O, "message")?;
        // SAFETY: a non-NULL message is a NUL-terminated string by the C contract.
        let msg = unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned();
        with_ctx(ctx, O, |c| c.set_message(msg))
    })
}

struct RangeFn {
    f: unsafe extern "C" fn(usize, usize, *mut c_void),
    ud: usize,
}

/// From inside a kernel, run `range(begin, end, userdata)` over pieces of
/// `[begin, end)` of at least `grain` items (fewer only when the whole range
/// is shorter), in parallel on the runtime's own
/// workers, and return when all pieces are done. Parallel kernels written this
/// way share the cores with other tasks instead of oversubscribing them.
/// `range` may run on several threads at once.
#[no_mangle]
pub extern "C" fn ta_kernel_parallel_for(
    ctx: *mut ta_kernel_ctx,
    begin: usize,
    end: usize,
    grain: usize,
    range: ta_range_fn,
    userdata: *mut c_void,
) -> ta_status {
    const O: &str = "ta_kernel_parallel_for";
    guard(O, std::ptr::null_mut(), || {
        let Some(f) = range else {
            return Err(Error::new(Status::NullPointer, O, "argument `range` is NULL"));
        };
        if begin > end {
            return Err(Error::new(Status::InvalidArgument, O, "begin > end"));
        }
        let r = RangeFn { f, ud: userdata as usize };
        with_ctx(ctx, O, |c| {
            c.parallel_for(begin..end, grain, &|piece| {
                // SAFETY: the user's range function with its own userdata.
                unsafe { (r.f)(piece.start, piece.end, r.ud as *mut c_void) }
            })
        })
    })
}
