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
//! The core (this crate's modules other than [`ffi`]) knows nothing of the C
//! ABI; [`ffi`] is a thin layer that converts handles and statuses.
//!
//! ```
//! use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
//! let x = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 2.0, 3.0]).unwrap();
//! let y = Tensor::zeros(DType::F64, &[3], Order::RowMajor, Default::default()).unwrap();
//! ops::axpy(&y, Scalar::real(2.0), &x, Submit::default()).unwrap();
//! let mut out = [0.0f64; 3];
//! let ev = unsafe { ops::copy_out(&y, out.as_mut_ptr().cast(), 3, None, Submit::default().with_event()) }.unwrap();
//! ev.unwrap().wait(None).unwrap();
//! assert_eq!(out, [2.0, 4.0, 6.0]);
//! ```

#[cfg(not(target_pointer_width = "64"))]
compile_error!("tensorasync supports 64-bit targets only (handles are 64-bit values)");

#[cfg(feature = "mimalloc")]
mod allocator;
pub mod backends;
#[cfg(feature = "mimalloc")]
mod block_cache;
pub mod dispatch;
pub mod domain;
pub mod dtype;
pub mod error;
pub mod failpoint;
pub mod ffi;
mod first_and_rest;
pub mod layout;
pub mod ops;
pub mod queue;
pub mod runtime;
mod sync;
mod tensor;

pub use dispatch::{BackendKind, Selector};
pub use domain::Domain;
pub use dtype::{DType, Element, Imm, Scalar};
pub use error::{Error, Result, Status};
pub use layout::{Layout, Order};
pub use ops::{KernelCall, KernelFailure, KernelFn, ResolvedView, Submit};
pub use queue::Mode;
pub use runtime::{Callback, CompletionEntry, CompletionQueue, Event, Runtime, ShutdownMode};
pub use runtime::{GrantedView, HostAccess, Token};
pub use tensor::blocks::BlockArray;
pub use tensor::handle::Tensor;
pub use tensor::view::SliceSpec;
/// The tensor layer's public modules, at their former paths.
pub use tensor::{blocks, device, region, storage, value, view};

/// The library's own allocations (see the `mimalloc` feature in Cargo.toml).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: allocator::Allocator = allocator::Allocator;
