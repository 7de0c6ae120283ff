//! # tensorasync
//!
//! Asynchronous tensors for HPC codes and language bindings: durable handles
//! to dense n-dimensional arrays whose reads and writes are ordered by epoch
//! queues. Operations are submitted in program order from any thread and run
//! concurrently on a worker pool as soon as their data is ready; completion is
//! reported by polling, waiting, callbacks or a completion queue with a file
//! descriptor. Errors are values: a failed operation poisons what it writes,
//! and the error propagates to every later reader.
//!
//! The API in brief:
//! - [`Tensor`]: create ([`Tensor::zeros`], [`Tensor::from_slice`],
//!   [`Tensor::from_array`]), view ([`Tensor::slice`], [`Tensor::permute`],
//!   [`Tensor::conj`]) and read back ([`Tensor::to_array`]); [`BlockArray`]
//!   for tiled arrays.
//! - [`ops`]: the operations. Each returns its completion, an [`Event`] (a
//!   `Future`), unless submitted [detached](Submit::detached) (it returns
//!   `()` and makes no event); a callback or an entry on a
//!   [`CompletionQueue`] (a `Stream`) can report it too, all set in [`Submit`].
//! - Host access: [`Tensor::read`], [`Tensor::write`], [`Tensor::update`]
//!   (and `_blocking` forms) give guards that hold the access and lend
//!   [`ndarray`] views.
//! - Rust kernels: [`ops::Kernel`] or [`ops::kernel`] with a [`KernelFn`], a
//!   closure over typed views of its operands ([`KernelCall::array`]).
//! - [`Runtime`]: worker pools; [`Error`] and [`Status`]: errors are values.
//!
//! `unsafe` is needed only to wrap foreign memory ([`Tensor::wrap`],
//! [`Tensor::from_host`], [`ops::copy_in`], [`ops::copy_out`],
//! [`ops::OpName::borrowed`]).
//!
//! This crate knows nothing of C: the C ABI (`libtensorasync.so`) is a
//! separate crate of the workspace, `capi/`, written against this API.
//!
//! ```
//! use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
//! let x = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 2.0, 3.0]).unwrap();
//! let y = Tensor::zeros(DType::F64, &[3], Order::RowMajor, Default::default()).unwrap();
//! let ev = ops::axpy(&y, Scalar::real(2.0), &x, Submit::default()).unwrap();
//! futures::executor::block_on(ev).unwrap();
//! let g = y.read_blocking::<f64>().unwrap();
//! assert_eq!(g.view().as_slice().unwrap(), &[2.0, 4.0, 6.0]);
//! ```

#[cfg(not(target_pointer_width = "64"))]
compile_error!("tensorasync supports 64-bit targets only (handles are 64-bit values)");

// The opt-in allocator (feature `mimalloc`) and the task allocation size,
// for a program (the C crate) that installs it as its global allocator.
pub mod allocator;
mod backends;
mod dispatch;
mod domain;
mod dtype;
mod error;
// Public only in builds with the test-only feature `failpoints`, for the C
// crate's failpoint tests: unstable, not part of the API.
#[cfg(not(feature = "failpoints"))]
mod failpoint;
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub mod failpoint;
mod first_and_rest;
mod future;
mod hazard_index;
mod host;
mod kernels;
mod layout;
mod ndarray_io;
mod ndview;
mod op_name;
pub mod ops;
mod queue;
mod region;
mod resolved;
mod runtime;
mod sync;
mod sysblas;
mod tensor;

/// A backend family.
///
/// ```
/// use tensorasync::{BackendKind, Selector};
/// let only_native = Selector::only(&[BackendKind::Native]);
/// assert_ne!(only_native, Selector::AUTO);
/// ```
pub use dispatch::BackendKind;
/// Which backends an operation may use (in [`Submit::selector`]).
///
/// ```
/// use tensorasync::{ops, BackendKind, DType, Order, Scalar, Selector, Submit, Tensor};
/// let t = Tensor::zeros(DType::F32, &[2], Order::RowMajor, Default::default()).unwrap();
/// let opts = Submit { selector: Selector::only(&[BackendKind::Native]), ..Default::default() };
/// ops::fill(&t, Scalar::real(1.0), opts).unwrap();
/// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0; 2]);
/// ```
pub use dispatch::Selector;
/// Where a tensor lives.
///
/// ```
/// use tensorasync::{DType, Domain, Order, Tensor};
/// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
/// assert_eq!(t.domain(), Domain::default());
/// ```
pub use domain::Domain;
/// An element type.
///
/// ```
/// use tensorasync::DType;
/// assert_eq!(DType::C128.size(), 16);
/// assert!(DType::C64.is_complex());
/// assert_eq!(DType::U8.name(), "u8");
/// ```
pub use dtype::DType;
/// A Rust element type with its [`DType`].
///
/// ```
/// use tensorasync::{DType, Element};
/// assert_eq!(<f32 as Element>::DTYPE, DType::F32);
/// assert_eq!(num_complex::Complex64::new(1.0, 2.0).conj(), num_complex::Complex64::new(1.0, -2.0));
/// ```
pub use dtype::Element;
/// An immediate operand that carries 64-bit integers exactly.
///
/// ```
/// use tensorasync::{ops, DType, Imm, Order, Submit, Tensor};
/// let t = Tensor::zeros(DType::U64, &[1], Order::RowMajor, Default::default()).unwrap();
/// ops::fill(&t, Imm::uint(u64::MAX), Submit::default()).unwrap();
/// assert_eq!(t.to_vec::<u64>().unwrap(), vec![u64::MAX]);
/// ```
pub use dtype::Imm;
/// A real or complex scalar operand.
///
/// ```
/// use tensorasync::{DType, Scalar};
/// assert!(Scalar::real(2.0).check_for(DType::I32, "example").is_ok());
/// assert!(Scalar::real(2.5).check_for(DType::I32, "example").is_err());
/// ```
pub use dtype::Scalar;
/// An error: a status, the operation it came from and a message.
///
/// ```
/// use tensorasync::{Error, Status};
/// let e = Error::new(Status::ShapeMismatch, "example", "shapes differ");
/// assert_eq!((e.status(), e.origin(), e.message()), (Status::ShapeMismatch, "example", "shapes differ"));
/// ```
pub use error::Error;
/// `Result` with this crate's [`Error`].
///
/// ```
/// fn first(t: &tensorasync::Tensor) -> tensorasync::Result<f64> {
///     Ok(t.to_vec::<f64>()?[0])
/// }
/// let t = tensorasync::Tensor::from_slice(&[1], tensorasync::Order::RowMajor, &[3.0]).unwrap();
/// assert_eq!(first(&t).unwrap(), 3.0);
/// ```
pub use error::Result;
/// What went wrong, as a category.
///
/// ```
/// use tensorasync::{Order, Status, Tensor};
/// let e = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64]).unwrap_err();
/// assert_eq!(e.status(), Status::ShapeMismatch);
/// ```
pub use error::Status;
/// Extents, strides (in elements) and an offset.
///
/// ```
/// use tensorasync::{Layout, Order};
/// let l = Layout::contiguous(&[2, 3], Order::ColMajor);
/// assert_eq!(l.strides.as_slice(), &[1, 2]);
/// assert!(Layout::strided(&[2, 3], &[0, 1], 0, "example").unwrap().is_non_overlapping() == false);
/// ```
pub use layout::Layout;
/// Row-major (C) or column-major (Fortran) element order.
///
/// ```
/// use tensorasync::{Order, Tensor};
/// let t = Tensor::from_slice(&[2, 2], Order::ColMajor, &[1u8, 2, 3, 4]).unwrap();
/// assert_eq!(t.to_vec::<u8>().unwrap(), vec![1, 3, 2, 4]);
/// ```
pub use layout::Order;
pub use layout::MAX_RANK;
/// What a kernel returns.
///
/// ```
/// use tensorasync::{ops, KernelCall, KernelFailure, KernelFn, KernelResult, Mode, Order, Status, Submit, Tensor};
/// fn refuse(_: &mut KernelCall<'_>) -> KernelResult {
///     Err(KernelFailure { code: 5, message: Some("refused".into()) })
/// }
/// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
/// let ev = ops::kernel("refuse", &[(&t, Mode::Update)], KernelFn::new(refuse), Submit::default());
/// let e = ev.unwrap().wait(None).unwrap_err();
/// assert_eq!((e.status(), e.message()), (Status::KernelFailed, "refused"));
/// ```
pub use ops::KernelResult;
/// A raw view of one kernel operand (see [`KernelCall::views`]).
///
/// ```
/// use tensorasync::{ops, DType, KernelFn, Mode, Order, Submit, Tensor};
/// let t = Tensor::zeros(DType::F64, &[2, 3], Order::ColMajor, Default::default()).unwrap();
/// let k = KernelFn::new(|c| {
///     let v: &tensorasync::ResolvedView = &c.views()[0];
///     assert_eq!((v.extents, v.strides, v.dtype), (&[2usize, 3][..], &[1isize, 2][..], DType::F64));
///     Ok(())
/// });
/// ops::kernel("look", &[(&t, Mode::Read)], k, Submit::default()).unwrap().wait(None).unwrap();
/// ```
pub use ops::ResolvedView;
/// How an operation is submitted and how it reports completion: with an
/// [`Event`] by default, or detached (no event; see [`ops::Completion`]).
///
/// ```
/// use tensorasync::{ops, DType, Order, Runtime, Scalar, Submit, Tensor};
/// let rt = Runtime::new(1).unwrap();
/// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
/// let ev = ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).unwrap();
/// ev.wait(None).unwrap();
/// ops::scale(&t, Scalar::real(2.0), Submit::on(&rt).detached()).unwrap();
/// assert_eq!(t.to_vec::<f64>().unwrap(), vec![2.0]);
/// ```
pub use ops::Submit;
pub use ops::{KernelCall, KernelFailure, KernelFn};
/// How an operand is accessed: read, overwritten, or read and written.
///
/// ```
/// use tensorasync::{ops, KernelFn, Mode, Order, Submit, Tensor};
/// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
/// let k = KernelFn::new(|c| Ok(c.array_mut::<f64>(0)?[[0]] *= 3.0));
/// ops::kernel("triple", &[(&t, Mode::Update)], k, Submit::default()).unwrap();
/// assert_eq!(t.to_vec::<f64>().unwrap(), vec![3.0]);
/// ```
pub use queue::Mode;
/// Which operations' status names the trace prints (set by the C crate).
///
/// ```
/// tensorasync::set_trace_status_names(|s| if s == tensorasync::Status::Ok { "OK" } else { "ERROR" });
/// ```
pub use runtime::observe::set_trace_status_names;
/// The format of a pending-work dump.
///
/// ```
/// use tensorasync::{DumpFormat, Runtime};
/// let rt = Runtime::new(1).unwrap();
/// rt.track(true).unwrap();
/// assert!(rt.dump(DumpFormat::Dot).starts_with("digraph"));
/// assert!(!rt.dump(DumpFormat::Text).starts_with("digraph"));
/// ```
pub use runtime::observe::DumpFormat;
/// The runtime's counters.
///
/// ```
/// let s: tensorasync::Stats = tensorasync::Runtime::new(2).unwrap().stats();
/// assert_eq!((s.submitted, s.completed, s.pending), (0, 0, 0));
/// assert_eq!(s.busy_ns.len(), 2); // one per worker
/// ```
pub use runtime::stats::Stats;
/// A completion callback.
///
/// ```
/// use std::sync::mpsc;
/// use tensorasync::{ops, Callback, DType, Order, Scalar, Submit, Tensor};
/// let (tx, rx) = mpsc::channel();
/// let cb: Callback = Box::new(move |r| tx.send(r.is_ok()).unwrap());
/// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
/// ops::fill(&t, Scalar::real(1.0), Submit { callback: Some(cb), ..Default::default() }).unwrap();
/// assert!(rx.recv().unwrap());
/// ```
pub use runtime::Callback;
/// One completed operation on a [`CompletionQueue`].
///
/// ```
/// use tensorasync::{ops, CompletionQueue, DType, Order, Scalar, Submit, Tensor};
/// let cq = CompletionQueue::new().unwrap();
/// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
/// ops::fill(&t, Scalar::real(1.0), Submit { cq: Some((&cq, 42)), ..Default::default() }).unwrap();
/// t.wait(None).unwrap();
/// let e = loop {
///     if let Some(e) = cq.poll(1).pop() { break e; }
/// };
/// assert_eq!(e.tag, 42);
/// ```
pub use runtime::CompletionEntry;
/// A queue of completions with a pollable file descriptor; a `Stream`.
///
/// ```
/// let cq = tensorasync::CompletionQueue::new().unwrap();
/// assert!(cq.is_empty() && cq.fd() >= 0);
/// ```
pub use runtime::CompletionQueue;
/// The completion of one operation; a `Future` of its outcome.
///
/// ```
/// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
/// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
/// let ev = ops::fill(&t, Scalar::real(1.0), Submit::default()).unwrap();
/// ev.wait(None).unwrap();
/// assert!(ev.is_complete());
/// ```
pub use runtime::Event;
/// One granted host access's geometry (see [`HostAccess::view`]).
///
/// ```
/// use tensorasync::{Mode, Order, Tensor};
/// let t = Tensor::from_slice(&[2, 3], Order::RowMajor, &[0.0f64; 6]).unwrap();
/// let a = t.acquire(Mode::Read, None).unwrap();
/// let v: &tensorasync::GrantedView = a.view().unwrap();
/// assert_eq!(v.strides.as_slice(), &[3, 1]);
/// ```
pub use runtime::GrantedView;
/// A raw host access (prefer the guards of [`Tensor::read`] and friends).
///
/// ```
/// use tensorasync::{Mode, Order, Tensor};
/// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
/// let a = t.acquire_async(Mode::Read).unwrap();
/// a.ready().wait(None).unwrap();
/// assert!(a.is_granted());
/// ```
pub use runtime::HostAccess;
/// A pool of workers that runs operations.
///
/// ```
/// let rt = tensorasync::Runtime::new(2).unwrap();
/// assert_eq!(rt.threads(), 2);
/// rt.wait_idle(None).unwrap();
/// ```
pub use runtime::Runtime;
/// How a runtime's shutdown treats work not yet started.
///
/// ```
/// use tensorasync::{Runtime, ShutdownMode};
/// let rt = Runtime::new(1).unwrap();
/// rt.shutdown(ShutdownMode::Drain).unwrap();
/// ```
pub use runtime::ShutdownMode;
/// An unfinished external or deferred operation.
///
/// ```
/// use tensorasync::{ops, Mode, Order, Status, Submit, Tensor};
/// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
/// let (token, _) = ops::external("outside", &[(&t, Mode::Update)], Submit::default()).unwrap();
/// token.started().wait(None).unwrap();
/// token.finish(Status::Ok, None).unwrap();
/// t.wait(None).unwrap();
/// ```
pub use runtime::Token;
/// Which BLAS library the BLAS backend loaded, if any.
///
/// ```
/// let info = tensorasync::blas_info();
/// # let _ = info;
/// ```
pub use sysblas::library::blas_info;
/// A tiled (or listed) array of tensor blocks, each with its own epoch queue.
///
/// ```
/// use tensorasync::{BlockArray, DType, Order};
/// let b = BlockArray::tiled(DType::F64, &[4, 4], &[2, 2], Order::RowMajor, Default::default()).unwrap();
/// assert_eq!(b.count(), 4);
/// assert_eq!(b.tile(&[1, 0]).unwrap().extents().unwrap().as_slice(), &[2, 2]);
/// ```
pub use tensor::blocks::BlockArray;
/// How many CUDA devices there are (real or simulated).
///
/// ```
/// match tensorasync::device_count() {
///     Ok(n) => assert!(n > 0),
///     Err(e) => assert_eq!(e.status(), tensorasync::Status::CudaUnavailable),
/// }
/// ```
pub use tensor::device::device_count;
/// What is known about one device (name, memory, compute capability).
///
/// ```
/// assert!(tensorasync::simulate(Default::default()));
/// assert!(tensorasync::device_info(0).is_ok());
/// ```
pub use tensor::device::device_info;
/// Whether this process's devices are simulated.
///
/// ```
/// assert!(tensorasync::simulate(Default::default()));
/// assert!(tensorasync::is_simulated());
/// ```
pub use tensor::device::is_simulated;
/// Use simulated devices in this process (before the first device use).
///
/// ```
/// use tensorasync::{device_count, simulate, SimConfig};
/// assert!(simulate(SimConfig { devices: 3, streams: 2 }));
/// assert_eq!(device_count().unwrap(), 3);
/// ```
pub use tensor::device::simulate;
/// The simulated devices' configuration.
///
/// ```
/// let c = tensorasync::SimConfig::default();
/// assert_eq!((c.devices, c.streams), (2, 4));
/// ```
pub use tensor::device::SimConfig;
/// The environment variable that selects simulated devices.
///
/// ```
/// assert_eq!(tensorasync::SIMULATED_DEVICES_ENV, "TA_SIMULATED_DEVICES");
/// ```
pub use tensor::device::SIMULATED_DEVICES_ENV;
/// An asynchronous tensor handle.
///
/// ```
/// use tensorasync::{Order, Tensor};
/// let t = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1i32, 2, 3, 4]).unwrap();
/// let tr = t.transpose().unwrap();
/// assert_eq!(tr.to_vec::<i32>().unwrap(), vec![1, 3, 2, 4]);
/// ```
pub use tensor::handle::Tensor;
/// Releases wrapped host memory after its last access (see [`Tensor::wrap`]).
///
/// ```
/// use std::sync::mpsc;
/// use tensorasync::{DType, Layout, Order, ReleaseFn, Tensor};
/// let data = [1u8, 2, 3];
/// let (tx, rx) = mpsc::channel();
/// let release: ReleaseFn = Box::new(move || tx.send(()).unwrap());
/// // SAFETY: `data` outlives the tensor (it is read-only, `writable` false).
/// let layout = Layout::contiguous(&[3], Order::RowMajor);
/// let t = unsafe { Tensor::wrap(DType::U8, layout, data.as_ptr() as *mut u8, false, Some(release)) }.unwrap();
/// assert_eq!(t.to_vec::<u8>().unwrap(), vec![1, 2, 3]);
/// assert!(rx.try_recv().is_err()); // still in use
/// drop(t);
/// rx.recv().unwrap(); // released once the last handle is gone
/// ```
pub use tensor::storage::ReleaseFn;
/// One axis of a slice.
///
/// ```
/// use tensorasync::{Order, SliceSpec, Tensor};
/// let t = Tensor::from_slice(&[4], Order::RowMajor, &[1u8, 2, 3, 4]).unwrap();
/// let mid = t.slice(&[SliceSpec::range(1, 3)]).unwrap();
/// assert_eq!(mid.to_vec::<u8>().unwrap(), vec![2, 3]);
/// ```
pub use tensor::view::SliceSpec;

pub use host::{Acquire, ReadGuard, WriteGuard};
/// The `ndarray` crate this API's views and arrays come from.
pub use ndarray;
pub use ndarray_io::{copy_from_array, copy_from_slice};

/// The internals the crate's own integration tests and benches reach into
/// (feature `internals`, which the crate's dev-dependency on itself turns on
/// in test and bench builds): unstable, not part of the API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::ops::enrollments::{record_enrollments, EnrollTrace, Recording};
    pub use crate::tensor::device;
    pub use crate::tensor::value::poisoned_values_for_tests;
    // The modules the kernel sources refer to, for the kernel benches that
    // compile those sources into themselves.
    pub mod dtype {
        pub use crate::dtype::*;
    }
    pub mod error {
        pub use crate::error::*;
    }
    pub mod layout {
        pub use crate::layout::*;
    }
}
