//! Devices (SPEC §2.7): the seam between the runtime and a GPU driver.
//!
//! The runtime, the operations and the CUDA dispatch backend talk to a
//! device only through the [`Device`] trait (in `interface`): memory, asynchronous copies and memsets, a few BLAS calls, and
//! stream markers and notifications. Two implementations sit behind it:
//!
//! - `cuda`: a real CUDA device through `cudarc`, loaded at run time (no
//!   toolkit at build time; no driver means "unavailable", never a crash);
//! - [`sim`]: a simulated device whose "device memory" is host memory and
//!   whose streams are threads, with fault injection. It lets every behaviour
//!   except the leaf GPU kernels be tested on machines without a GPU.
//!
//! Which one a process uses is decided once, at the first use (the registry):
//! simulated devices when asked for (`TA_SIMULATED_DEVICES=n` or
//! [`simulate`]), otherwise the CUDA driver if it loads and has devices.
//!
//! Conventions for every method:
//! - Work is queued on a stream ([`StreamId`], an index below
//!   [`Device::streams`]) and runs in queue order on that stream; methods
//!   return once the work is queued, not done. An error returned by a method
//!   means nothing was queued. An error that happens while the work runs
//!   (asynchronously) reaches the next [`Device::notify`] callback of that
//!   stream (and, on CUDA, usually every later one: such errors are sticky).
//! - Pointers to memory (device or host) are raw addresses; the caller
//!   guarantees they stay valid until the work is done (observed through
//!   [`Device::notify`]).
//! - BLAS-style calls follow BLAS conventions: column-major matrices with
//!   leading dimensions; vectors as the address of their lowest-addressed
//!   element plus a signed increment.

mod cuda;
pub(crate) mod interface;
pub(crate) mod memory;
pub(crate) mod registry;
pub mod sim;

/// Only for the GPU integration tests (`tests/cuda_gpu.rs`).
#[cfg(any(test, feature = "internals"))]
pub use cuda::probe_for_tests;
#[cfg(any(test, feature = "internals"))]
pub use interface::Notify;
pub use interface::{DevPtr, Device, GemmArgs, Marker, Place, StreamId, Trans, ORIGIN};
pub(crate) use registry::device;
pub use registry::{device_count, device_info, is_simulated, simulate, SimConfig, SIMULATED_DEVICES_ENV};
