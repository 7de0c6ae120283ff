//! Simulated devices: "device memory" is host memory and streams are threads.
//!
//! A `SimDevice` implements [`super::Device`] with reference (plain-loop)
//! implementations of every command, so that everything the library does with
//! a GPU except the real kernels can be tested on machines without one:
//! device tensors, stream ordering, staging copies, error paths, and "no CPU
//! worker blocks on the GPU". [`SimControl`] (see `control`) lets tests
//! pause streams, inject failures, limit memory and inspect what ran.
//!
//! How it works:
//! - Each stream is one thread (`ta-sim{ordinal}-s{k}`, started at the
//!   stream's first command) that runs a FIFO of commands. Device methods
//!   queue a command and return at once; only `alloc`, `free`, `alloc_host`
//!   and `free_host` act immediately.
//! - Device memory is 256-byte aligned host memory filled with `0xFF` bytes
//!   (NaN for floats), so reads of uninitialised device memory show up.
//! - Address checking: when a command runs, every device byte range it
//!   touches must lie inside one live allocation (of this device for kernels,
//!   of any simulated device for copies); otherwise the command does nothing
//!   and its stream records `CUDA_ERROR_ILLEGAL_ADDRESS`. BLAS operands must
//!   also be aligned to their element size (`CUDA_ERROR_MISALIGNED_ADDRESS`).
//! - Asynchronous errors are per stream and not sticky: the next `notify` of
//!   the stream reports the first error since the previous `notify`, and
//!   clears it.
//! - A panic inside a command (or a notify callback) is caught and recorded
//!   as `CUDA_ERROR_UNKNOWN` on that stream; the stream keeps running.
//!
//! The parts: `control` (the test controls, fault injection included),
//! `commands` (what a stream queues), `memory` (the simulated allocations),
//! `stream` (the stream threads that interpret commands), `kernels` (the
//! reference BLAS), `faults` (asynchronous failures and CUDA error names)
//! and `device` (the [`super::Device`] implementation).

mod commands;
pub(super) mod control;
pub(super) mod device;
mod faults;
mod kernels;
mod memory;
mod stream;
#[cfg(test)]
mod tests;

#[cfg(any(test, feature = "internals"))]
pub use super::registry::control;
#[cfg(any(test, feature = "internals"))]
pub use commands::{SimOp, SimOpKind};
#[cfg(any(test, feature = "internals"))]
pub use control::SimControl;
