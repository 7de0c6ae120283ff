//! The runtime: tasks and the worker pool that runs them, events,
//! completion queues, waits, release, deferred completion and observation
//! (SPEC §2.1, §2.6). This file only declares the parts and re-exports the
//! public ones; inside the crate, import the file that defines a thing.

pub(crate) mod body;
pub(crate) mod counters;
pub(crate) mod cq;
pub(crate) mod deferred;
pub(crate) mod device_work;
pub(crate) mod event;
pub(crate) mod exec;
pub(crate) mod guard;
pub(crate) mod handle;
#[cfg(all(test, loom))]
mod loom_models;
pub(crate) mod observe;
pub(crate) mod poke;
pub(crate) mod pool;
pub(crate) mod release;
pub(crate) mod run_ctx;
pub(crate) mod running;
pub(crate) mod stats;
pub(crate) mod task;
#[cfg(all(test, not(loom)))]
mod task_tests;
pub(crate) mod token;
pub(crate) mod trace;
pub(crate) mod waits;
pub(crate) mod work;
pub(crate) mod worker_threads;

pub use cq::{CompletionEntry, CompletionQueue};
pub use deferred::{HostAccess, Token};
pub use event::{Callback, Event};
pub use handle::{Runtime, ShutdownMode};
pub use token::GrantedView;
