//! Dispatch (SPEC §2.5): the backend vocabulary (`backend`), the operation
//! descriptor every backend runs (`op`), and the registry that picks a
//! backend for each operation (`registry`).
//!
//! Inside the crate, import the defining file (`crate::dispatch::op::KernelOp`);
//! the re-exports are for the layers above.

pub(crate) mod backend;
pub(crate) mod op;

pub(crate) use backend::RunCtx;
pub use backend::{BackendKind, Selector};
pub(crate) use op::{ContractArgs, HostBuffer, KernelOp, OpTag, ScalarSlot};
