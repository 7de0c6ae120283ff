//! User kernels: the StarPU codelet equivalent (SPEC §2.5). A function runs
//! with the resolved views of its declared operands; a failure poisons every
//! operand it writes with a message the kernel can set.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::ops::Range;

use ndarray::{ArrayViewD, ArrayViewMutD};
use smallvec::SmallVec;

use super::submit::{submit, Completion, Submit};
use super::{Body, OpName, ResolvedView};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result, Status};
use crate::queue::Mode;
use crate::tensor::handle::Tensor;

/// Why a kernel failed: a raw code (kept in the error object) and an optional message.
///
/// ```
/// use tensorasync::KernelFailure;
/// let f = KernelFailure { code: 3, message: Some("no convergence".into()) };
/// assert_eq!(f.code, 3);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFailure {
    /// The code, kept in the error object (see [`Error::code`]).
    pub code: i64,
    /// The message of the error (a default names the code).
    pub message: Option<String>,
}

/// A library error inside a kernel (a refused view, say) fails the kernel
/// with the error's status as its code and the error's message, so `?` works
/// on [`KernelCall::array`] and friends.
///
/// ```
/// use tensorasync::{Error, KernelFailure, Status};
/// let f = KernelFailure::from(Error::new(Status::DtypeMismatch, "k", "wrong type"));
/// assert_eq!(f.code, Status::DtypeMismatch as i64);
/// assert_eq!(f.message.as_deref(), Some("wrong type"));
/// ```
impl From<Error> for KernelFailure {
    fn from(e: Error) -> KernelFailure {
        KernelFailure { code: e.status() as i64, message: Some(e.message().to_string()) }
    }
}

/// What a kernel returns.
pub type KernelResult = std::result::Result<(), KernelFailure>;

/// A kernel stored inline: a monomorphised caller and the closure's bytes.
type InlineFn = fn(data: &MaybeUninit<[usize; 2]>, call: &mut KernelCall<'_>) -> KernelResult;

/// The body of a user kernel: a closure over the operands' views (see
/// [`KernelCall`]).
///
/// ```
/// use tensorasync::KernelFn;
/// let boxed = KernelFn::new(|c| Ok(()));
/// let inline = KernelFn::inline(|c| Ok(()));
/// # drop((boxed, inline));
/// ```
pub struct KernelFn(Repr);

enum Repr {
    Boxed(Box<dyn FnMut(&mut KernelCall<'_>) -> KernelResult + Send>),
    Inline { f: InlineFn, data: MaybeUninit<[usize; 2]> },
}

impl KernelFn {
    /// A kernel from a Rust closure (boxed: one allocation per kernel).
    ///
    /// ```
    /// use tensorasync::{ops, DType, KernelFn, Mode, Order, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[3], Order::RowMajor, Default::default()).unwrap();
    /// let k = KernelFn::new(|c| {
    ///     c.array_mut::<f64>(0)?.fill(2.0);
    ///     Ok(())
    /// });
    /// ops::kernel("twos", &[(&t, Mode::Write)], k, Submit::default()).unwrap();
    /// assert_eq!(t.to_vec::<f64>().unwrap(), vec![2.0; 3]);
    /// ```
    pub fn new(f: impl FnMut(&mut KernelCall<'_>) -> KernelResult + Send + 'static) -> KernelFn {
        KernelFn(Repr::Boxed(Box::new(f)))
    }

    /// A kernel from a closure that is `Copy` and at most two words (a
    /// function pointer and a context word, say): stored inline, so the
    /// submission allocates nothing for it. A larger closure is boxed.
    ///
    /// ```
    /// use tensorasync::{ops, DType, KernelFn, Mode, Order, Submit, Tensor};
    /// let t = Tensor::zeros(DType::I32, &[2], Order::RowMajor, Default::default()).unwrap();
    /// let step = 5;
    /// let k = KernelFn::inline(move |c| {
    ///     c.array_mut::<i32>(0)?.mapv_inplace(|x| x + step);
    ///     Ok(())
    /// });
    /// ops::kernel("add", &[(&t, Mode::Update)], k, Submit::default()).unwrap();
    /// assert_eq!(t.to_vec::<i32>().unwrap(), vec![5, 5]);
    /// ```
    pub fn inline<F>(f: F) -> KernelFn
    where
        F: Fn(&mut KernelCall<'_>) -> KernelResult + Copy + Send + 'static,
    {
        if std::mem::size_of::<F>() > std::mem::size_of::<[usize; 2]>()
            || std::mem::align_of::<F>() > std::mem::align_of::<[usize; 2]>()
        {
            return KernelFn::new(f);
        }
        fn call_inline<F: Fn(&mut KernelCall<'_>) -> KernelResult>(
            data: &MaybeUninit<[usize; 2]>,
            call: &mut KernelCall<'_>,
        ) -> KernelResult {
            // SAFETY: `data` holds an F written by `inline` (size and
            // alignment checked there); F is Copy, so there is nothing to drop.
            let f = unsafe { &*data.as_ptr().cast::<F>() };
            f(call)
        }
        let mut data = MaybeUninit::<[usize; 2]>::uninit();
        // SAFETY: F fits in `data` and needs no more alignment (checked above).
        unsafe { data.as_mut_ptr().cast::<F>().write(f) };
        KernelFn(Repr::Inline { f: call_inline::<F>, data })
    }
}

impl std::fmt::Debug for KernelFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Repr::Boxed(_) => "KernelFn(boxed)",
            Repr::Inline { .. } => "KernelFn(inline)",
        })
    }
}

/// How a typed view of one operand has been handed out in a call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lent {
    None,
    Shared,
    Mut,
}

/// What a running kernel sees: its operands' views, in declaration order,
/// as typed `ndarray` views ([`KernelCall::array`], [`KernelCall::array_mut`])
/// or raw ([`KernelCall::views`]).
///
/// ```
/// use tensorasync::{ops, KernelFn, Mode, Order, Submit, Tensor};
/// let x = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 2.0, 3.0]).unwrap();
/// let y = Tensor::from_slice(&[3], Order::RowMajor, &[10.0f64, 20.0, 30.0]).unwrap();
/// let k = KernelFn::new(|c| {
///     let x = c.array::<f64>(0)?;
///     let mut y = c.array_mut::<f64>(1)?;
///     y += &x;
///     Ok(())
/// });
/// ops::kernel("add", &[(&x, Mode::Read), (&y, Mode::Update)], k, Submit::default()).unwrap();
/// assert_eq!(y.to_vec::<f64>().unwrap(), vec![11.0, 22.0, 33.0]);
/// ```
pub struct KernelCall<'a> {
    views: &'a [ResolvedView<'a>],
    message: Option<String>,
    deferred: Option<std::sync::Arc<crate::runtime::deferred::TokenInner>>,
    /// Typed views handed out so far, by operand (grown on first use).
    lent: RefCell<SmallVec<[Lent; 4]>>,
}

impl<'a> KernelCall<'a> {
    /// Resolved views of the operands, in the order they were declared (raw
    /// pointers: dereferencing them is `unsafe`; prefer [`KernelCall::array`]).
    ///
    /// ```
    /// use tensorasync::{ops, DType, KernelFn, Mode, Order, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F32, &[2, 5], Order::RowMajor, Default::default()).unwrap();
    /// let k = KernelFn::new(|c| {
    ///     assert_eq!(c.views()[0].extents, &[2, 5]);
    ///     Ok(())
    /// });
    /// ops::kernel("shape", &[(&t, Mode::Read)], k, Submit::default()).unwrap().wait(None).unwrap();
    /// ```
    pub fn views(&self) -> &'a [ResolvedView<'a>] {
        self.views
    }

    /// Operand `i` as a read view of `T`, valid while the kernel runs.
    /// Errors (never UB): `InvalidArgument` for an index out of range, or for
    /// an operand already lent mutably, or a conj view (its elements would be
    /// read raw: declare the conj view's base and conjugate in the kernel);
    /// `DtypeMismatch` unless `T` is the operand's element type.
    ///
    /// ```
    /// use tensorasync::{ops, KernelFn, Mode, Order, SliceSpec, Submit, Tensor};
    /// let t = Tensor::from_slice(&[4], Order::RowMajor, &[1i32, 2, 3, 4]).unwrap();
    /// let rev = t.slice(&[SliceSpec { start: 3, stop: -1, step: -1, drop: false }]).unwrap();
    /// let out = Tensor::from_slice(&[1], Order::RowMajor, &[0i32]).unwrap();
    /// let k = KernelFn::new(|c| {
    ///     let first = c.array::<i32>(0)?[[0]];
    ///     c.array_mut::<i32>(1)?[[0]] = first;
    ///     Ok(())
    /// });
    /// ops::kernel("first", &[(&rev, Mode::Read), (&out, Mode::Write)], k, Submit::default()).unwrap();
    /// assert_eq!(out.to_vec::<i32>().unwrap(), vec![4]);
    /// ```
    pub fn array<T: Element>(&self, i: usize) -> Result<ArrayViewD<'_, T>> {
        let v = self.lend::<T>(i, Lent::Shared)?;
        if v.conj && v.dtype.is_complex() {
            self.lent.borrow_mut()[i] = Lent::None;
            return Err(Error::new(
                Status::InvalidArgument,
                ORIGIN,
                format!("operand {i} is a conj view: a typed view would read its elements unconjugated"),
            ));
        }
        // SAFETY: the task holds the operand's access while the kernel runs
        // (the borrow of `self` ends before it returns), the dtype is T, and
        // no mutable view of the operand is lent (checked in `lend`); other
        // operands never overlap a written one (submission refuses it).
        Ok(unsafe { crate::ndview::view::<T>(v.ptr, v.extents, v.strides) })
    }

    /// Operand `i` as a mutable view of `T` (a `Write` or `Update` operand),
    /// once per call. Errors as for [`KernelCall::array`], and
    /// `InvalidArgument` for a read-only operand, one lent before, or
    /// strides that make elements overlap (a mutable view would alias).
    ///
    /// ```
    /// use tensorasync::{ops, DType, KernelFn, Mode, Order, Submit, Tensor};
    /// let t = Tensor::zeros(DType::U8, &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// let k = KernelFn::new(|c| {
    ///     let mut a = c.array_mut::<u8>(0)?;
    ///     a[[1, 1]] = 9;
    ///     assert!(c.array_mut::<u8>(0).is_err(), "lent once");
    ///     Ok(())
    /// });
    /// ops::kernel("set", &[(&t, Mode::Update)], k, Submit::default()).unwrap();
    /// assert_eq!(t.to_vec::<u8>().unwrap(), vec![0, 0, 0, 9]);
    /// ```
    #[allow(clippy::mut_from_ref)] // lent once per operand, tracked in `lent`
    pub fn array_mut<T: Element>(&self, i: usize) -> Result<ArrayViewMutD<'_, T>> {
        if let Some(v) = self.views.get(i) {
            if !v.mode.writes() {
                return Err(Error::new(Status::InvalidArgument, ORIGIN, format!("operand {i} is declared read-only")));
            }
        }
        let v = self.lend::<T>(i, Lent::Mut)?;
        // SAFETY: as in `array`, and this is the only view of the operand
        // lent in this call (checked in `lend`); `view_mut` refuses aliasing strides.
        let r = unsafe { crate::ndview::view_mut::<T>(v.ptr, v.extents, v.strides, ORIGIN) };
        if r.is_err() {
            self.lent.borrow_mut()[i] = Lent::None;
        }
        r
    }

    /// Record a typed view of operand `i` as lent in `how`, after the checks.
    fn lend<T: Element>(&self, i: usize, how: Lent) -> Result<&'a ResolvedView<'a>> {
        let Some(v) = self.views.get(i) else {
            return Err(Error::new(
                Status::InvalidArgument,
                ORIGIN,
                format!("operand {i} does not exist: the kernel has {}", self.views.len()),
            ));
        };
        crate::ndview::check_dtype::<T>(v.dtype, ORIGIN)?;
        let mut lent = self.lent.borrow_mut();
        if lent.len() < self.views.len() {
            lent.resize(self.views.len(), Lent::None);
        }
        match (lent[i], how) {
            (Lent::Mut, _) | (Lent::Shared, Lent::Mut) => {
                return Err(Error::new(
                    Status::InvalidArgument,
                    ORIGIN,
                    format!("operand {i} is lent mutably, or lent already and asked mutably: the views would alias"),
                ))
            }
            _ => lent[i] = how,
        }
        Ok(v)
    }

    /// Set the message of the error this kernel is about to report.
    ///
    /// ```
    /// use tensorasync::{ops, DType, KernelFailure, KernelFn, Mode, Order, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// let k = KernelFn::new(|c| {
    ///     c.set_message("diverged");
    ///     Err(KernelFailure { code: 7, message: None })
    /// });
    /// ops::kernel("fails", &[(&t, Mode::Update)], k, Submit::default()).unwrap();
    /// assert_eq!(t.wait(None).unwrap_err().message(), "diverged");
    /// ```
    pub fn set_message(&mut self, msg: impl Into<String>) {
        self.message = Some(msg.into());
    }

    /// Defer the operation's completion: it does not complete when the
    /// kernel returns (whatever the kernel returns is then ignored) but when
    /// the returned token is finished, from any thread. Until then it keeps
    /// its accesses and its operands' storage (the views' data pointers stay
    /// valid), without occupying a worker. A second call fails with
    /// `InvalidArgument`.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tensorasync::{ops, DType, KernelFn, Mode, Order, Status, Submit, Tensor, Token};
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// let slot: Arc<Mutex<Option<Token>>> = Default::default();
    /// let s = slot.clone();
    /// let k = KernelFn::new(move |c| {
    ///     *s.lock().unwrap() = Some(c.defer().unwrap());
    ///     Ok(())
    /// });
    /// let ev = ops::kernel("later", &[(&t, Mode::Update)], k, Submit::default()).unwrap();
    /// let token = loop {
    ///     if let Some(tok) = slot.lock().unwrap().take() { break tok; }
    ///     std::thread::yield_now();
    /// };
    /// assert!(!ev.is_complete());
    /// token.finish(Status::Ok, None).unwrap();
    /// ev.wait(None).unwrap();
    /// ```
    pub fn defer(&mut self) -> Result<crate::runtime::Token> {
        self.defer_inner().map(crate::runtime::Token::from_inner)
    }

    pub(crate) fn defer_inner(&mut self) -> Result<std::sync::Arc<crate::runtime::deferred::TokenInner>> {
        if self.deferred.is_some() {
            return Err(Error::new(
                Status::InvalidArgument,
                "ta_kernel_defer",
                "the kernel has deferred its completion already",
            ));
        }
        let t = crate::runtime::deferred::TokenInner::new();
        self.deferred = Some(t.clone());
        Ok(t)
    }

    /// Run `f` over pieces of `range` of at least `grain` items (fewer only
    /// when the whole range is shorter) on the runtime's own workers (so a parallel kernel shares the cores with other
    /// tasks instead of oversubscribing them). Returns when every piece is done.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use tensorasync::{ops, DType, KernelFn, Mode, Order, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// let k = KernelFn::new(|c| {
    ///     let n = AtomicUsize::new(0);
    ///     c.parallel_for(0..1000, 100, &|r| { n.fetch_add(r.len(), Ordering::Relaxed); });
    ///     c.array_mut::<f64>(0)?[[0]] = n.into_inner() as f64;
    ///     Ok(())
    /// });
    /// ops::kernel("count", &[(&t, Mode::Write)], k, Submit::default()).unwrap();
    /// assert_eq!(t.to_vec::<f64>().unwrap(), vec![1000.0]);
    /// ```
    pub fn parallel_for(&self, range: Range<usize>, grain: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
        parallel_for(range, grain.max(1), f)
    }
}

const ORIGIN: &str = "kernel_view";

/// Split `range` recursively with rayon's `join` on the current pool (halves
/// are split only while both keep at least `grain` items); runs sequentially
/// outside a pool.
pub(crate) fn parallel_for(range: Range<usize>, grain: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
    if range.len() < 2 * grain || rayon::current_thread_index().is_none() {
        if !range.is_empty() {
            f(range);
        }
        return;
    }
    let mid = range.start + range.len() / 2;
    rayon::join(|| parallel_for(range.start..mid, grain, f), || parallel_for(mid..range.end, grain, f));
}

pub(crate) fn call(
    k: &mut KernelFn,
    name: &OpName,
    views: &[ResolvedView<'_>],
    cx: &mut crate::dispatch::RunCtx,
) -> Result<()> {
    let mut call = KernelCall { views, message: None, deferred: None, lent: RefCell::new(SmallVec::new()) };
    let r = match &mut k.0 {
        Repr::Boxed(f) => f(&mut call),
        Repr::Inline { f, data } => f(data, &mut call),
    };
    if call.deferred.is_some() {
        cx.deferred = call.deferred.take();
        return Ok(());
    }
    r.map_err(|fail| {
        let msg = call.message.or(fail.message).unwrap_or_else(|| format!("user kernel returned code {}", fail.code));
        Error::with_code(Status::KernelFailed, name.to_origin(), msg, fail.code)
    })
}

/// Submit an operation over `operands` whose body the caller runs itself
/// (SPEC §2.8): once every access is granted the returned token's `started`
/// event completes (with the error instead, if an input it reads is
/// poisoned), and the operation completes when the token is finished. The
/// same rules as [`kernel`] apply to the operands.
///
/// ```
/// use tensorasync::{ops, Mode, Order, Status, Submit, Tensor};
/// let t = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f64, 2.0]).unwrap();
/// let (token, _) = ops::external("io", &[(&t, Mode::Read)], Submit::default()).unwrap();
/// token.started().wait(None).unwrap();
/// assert_eq!(token.views().unwrap()[0].extents.as_slice(), &[2]);
/// token.finish(Status::Ok, None).unwrap();
/// ```
pub fn external<C: Completion>(
    name: impl Into<OpName>,
    operands: &[(&Tensor, Mode)],
    opts: Submit<'_, C>,
) -> Result<(crate::runtime::Token, C::Output)> {
    let (t, ev) = external_inner(name, "external_submit", operands, opts)?;
    Ok((crate::runtime::Token::from_inner(t), ev))
}

// Finishing a token as a kernel's failure finishes its operation.
impl crate::runtime::Token {
    /// Fail the operation as a kernel's `failure` does: its outputs are
    /// poisoned with `KernelFailed` carrying the failure's code, and its
    /// message (or one naming the code). Through a shared token, as
    /// [`finish_shared`](Self::finish_shared).
    ///
    /// ```
    /// use tensorasync::{ops, KernelFailure, Mode, Order, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let (token, ev) = ops::external("outside", &[(&t, Mode::Update)], Submit::default()).unwrap();
    /// token.fail_shared(KernelFailure { code: 3, message: None }).unwrap();
    /// let e = ev.wait(None).unwrap_err();
    /// assert_eq!((e.status(), e.code()), (Status::KernelFailed, 3));
    /// ```
    pub fn fail_shared(&self, failure: KernelFailure) -> Result<()> {
        self.finish_failure(failure.code, failure.message)
    }
}

pub(crate) fn external_inner<C: Completion>(
    name: impl Into<OpName>,
    origin: &'static str,
    operands: &[(&Tensor, Mode)],
    opts: Submit<'_, C>,
) -> Result<(std::sync::Arc<crate::runtime::deferred::TokenInner>, C::Output)> {
    if let Some((t, _)) = operands.iter().find(|(t, _)| t.domain() != crate::domain::Domain::Host) {
        return Err(Error::new(
            Status::DomainMismatch,
            origin,
            format!("host access and external operations take host tensors; an operand lives on {} (copy it to the host first)", t.domain()),
        ));
    }
    let token = crate::runtime::deferred::TokenInner::new();
    // Parked until its token is finished: never in place.
    let ev = submit(name, origin, operands, Body::External(token.clone()), Submit { defer: true, ..opts }, |_| Ok(()))?;
    Ok((token, ev))
}

/// Submit a user kernel over `operands` (each with its access mode). Reading
/// and writing the same value in one kernel is rejected (`Alias`): declare one
/// `Update` access instead.
///
/// ```
/// use tensorasync::{ops, KernelFn, Mode, Order, Status, Submit, Tensor};
/// let x = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f64, 2.0]).unwrap();
/// let k = KernelFn::new(|c| Ok(c.array_mut::<f64>(0)?.mapv_inplace(f64::sqrt)));
/// ops::kernel("sqrt", &[(&x, Mode::Update)], k, Submit::default()).unwrap();
/// assert_eq!(x.to_vec::<f64>().unwrap(), vec![1.0, 2f64.sqrt()]);
/// let same = ops::kernel("alias", &[(&x, Mode::Read), (&x, Mode::Write)], KernelFn::new(|_| Ok(())), Submit::default());
/// assert_eq!(same.unwrap_err().status(), Status::Alias);
/// ```
pub fn kernel<C: Completion>(
    name: impl Into<OpName>,
    operands: &[(&Tensor, Mode)],
    f: KernelFn,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    // A user kernel runs on a host worker and dereferences its views there.
    if let Some((t, _)) = operands.iter().find(|(t, _)| t.domain() != crate::domain::Domain::Host) {
        return Err(crate::error::Error::new(
            crate::error::Status::DomainMismatch,
            "kernel",
            format!("user kernels take host tensors; an operand lives on {} (copy it to the host first)", t.domain()),
        ));
    }
    // A user kernel may block, submit or wait: it always runs on a worker,
    // as if deferred (which also takes the in-place test out of this path).
    submit(name, "kernel", operands, Body::Kernel(f), Submit { defer: true, ..opts }, |_| Ok(()))
}

/// A Rust kernel with typed operands: each is declared with its element type
/// and access mode, and a dtype mismatch is an error at submission (the
/// kernel's typed views check it again, so a wrong index errs, never UB).
///
/// ```
/// use tensorasync::{ops, Order, Submit, Tensor};
/// let x = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 2.0, 3.0]).unwrap();
/// let y = Tensor::from_slice(&[3], Order::RowMajor, &[0.5f64; 3]).unwrap();
/// ops::Kernel::new("scale_add")
///     .read::<f64>(&x)
///     .update::<f64>(&y)
///     .submit(Submit::default(), |c| {
///         let x = c.array::<f64>(0)?;
///         c.array_mut::<f64>(1)?.zip_mut_with(&x, |y, &x| *y += 2.0 * x);
///         Ok(())
///     })
///     .unwrap();
/// assert_eq!(y.to_vec::<f64>().unwrap(), vec![2.5, 4.5, 6.5]);
/// let e = ops::Kernel::new("k").read::<f32>(&x).submit(Submit::default(), |_| Ok(())).unwrap_err();
/// assert_eq!(e.status(), tensorasync::Status::DtypeMismatch);
/// ```
pub struct Kernel<'t> {
    name: OpName,
    operands: SmallVec<[(&'t Tensor, Mode); 4]>,
    types: SmallVec<[DType; 4]>,
}

impl<'t> Kernel<'t> {
    /// A kernel named `name` (in error objects), with no operands yet.
    ///
    /// ```
    /// let k = tensorasync::ops::Kernel::new("empty");
    /// # drop(k);
    /// ```
    pub fn new(name: impl Into<OpName>) -> Kernel<'t> {
        Kernel { name: name.into(), operands: SmallVec::new(), types: SmallVec::new() }
    }

    /// Declare an operand the kernel reads, of element type `T`.
    ///
    /// ```
    /// # use tensorasync::{ops, Order, Tensor};
    /// let x = Tensor::from_slice(&[1], Order::RowMajor, &[1u8]).unwrap();
    /// let k = ops::Kernel::new("k").read::<u8>(&x);
    /// # drop(k);
    /// ```
    pub fn read<T: Element>(self, t: &'t Tensor) -> Self {
        self.operand::<T>(t, Mode::Read)
    }

    /// Declare an operand the kernel overwrites entirely, of element type `T`.
    ///
    /// ```
    /// # use tensorasync::{ops, Order, Tensor};
    /// let x = Tensor::from_slice(&[1], Order::RowMajor, &[1u8]).unwrap();
    /// let k = ops::Kernel::new("k").write::<u8>(&x);
    /// # drop(k);
    /// ```
    pub fn write<T: Element>(self, t: &'t Tensor) -> Self {
        self.operand::<T>(t, Mode::Write)
    }

    /// Declare an operand the kernel reads and writes, of element type `T`.
    ///
    /// ```
    /// # use tensorasync::{ops, Order, Tensor};
    /// let x = Tensor::from_slice(&[1], Order::RowMajor, &[1u8]).unwrap();
    /// let k = ops::Kernel::new("k").update::<u8>(&x);
    /// # drop(k);
    /// ```
    pub fn update<T: Element>(self, t: &'t Tensor) -> Self {
        self.operand::<T>(t, Mode::Update)
    }

    fn operand<T: Element>(mut self, t: &'t Tensor, mode: Mode) -> Self {
        self.operands.push((t, mode));
        self.types.push(T::DTYPE);
        self
    }

    /// Check the declared element types and submit `f` (see [`kernel`]).
    ///
    /// ```
    /// # use tensorasync::{ops, DType, Order, Submit, Tensor};
    /// let t = Tensor::zeros(DType::I64, &[2], Order::RowMajor, Default::default()).unwrap();
    /// ops::Kernel::new("ones").write::<i64>(&t).submit(Submit::default(), |c| {
    ///     c.array_mut::<i64>(0)?.fill(1);
    ///     Ok(())
    /// }).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 1]);
    /// ```
    pub fn submit<C: Completion>(
        self,
        opts: Submit<'_, C>,
        f: impl FnMut(&mut KernelCall<'_>) -> KernelResult + Send + 'static,
    ) -> Result<C::Output> {
        for (i, ((t, _), dt)) in self.operands.iter().zip(&self.types).enumerate() {
            if t.dtype() != *dt {
                return Err(Error::new(
                    Status::DtypeMismatch,
                    "kernel",
                    format!("operand {i} holds {}, the kernel declares {}", t.dtype().name(), dt.name()),
                ));
            }
        }
        kernel(self.name, &self.operands, KernelFn::new(f), opts)
    }
}

impl std::fmt::Debug for Kernel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("operands", &self.types).finish()
    }
}
