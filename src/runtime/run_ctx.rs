//! The context a task body runs in: what a device backend must queue behind,
//! and what the body reports back (queued device work, a deferred completion).

use std::sync::Arc;

use smallvec::SmallVec;

use super::device_work::{Issue, Issued};
use super::token::TokenInner;

/// Device context of one run of an operation's body.
#[derive(Default)]
pub(crate) struct RunCtx {
    /// Markers of same-device predecessors: the work must queue behind them.
    pub(crate) waits: SmallVec<[Issue; 2]>,
    /// Set by a device backend that queued work.
    pub(crate) issued: Option<Issued>,
    /// Set by a user kernel that deferred its completion.
    pub(crate) deferred: Option<Arc<TokenInner>>,
}
