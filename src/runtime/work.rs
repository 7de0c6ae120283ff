//! What a task does and how it reports: its job (an operation, a wait or a
//! release), its completion (event, callback, completion-queue entry), and,
//! for a device task between issue and finish, what its finish needs.

use std::sync::Arc;

use smallvec::SmallVec;

use super::body::{InlineBody, TaskBody};
use super::cq::{CompletionEntry, CompletionQueue};
use super::device_work::Issued;
use super::event::{Callback, Event};
use super::guard::call_guarded;
use crate::error::{Error, Result};
use crate::region::Region;
use crate::tensor::value::{Contents, ValueRc};

/// How a task reports its outcome, and what it keeps alive until then
/// (boxed in the task only when needed, so a plain pending task stays small).
#[derive(Default)]
pub(crate) struct Completion {
    pub(crate) event: Option<Event>,
    pub(crate) callback: Option<Callback>,
    pub(crate) cq: Option<(CompletionQueue, u64)>,
    /// Contents this task replaced: earlier accesses still point into them.
    pub(crate) keep_alive: Option<Arc<Contents>>,
}

impl Completion {
    /// `None` when there is nothing to notify or keep.
    #[inline]
    pub(crate) fn boxed(self) -> Option<Box<Completion>> {
        let needed = self.event.is_some() || self.callback.is_some() || self.cq.is_some() || self.keep_alive.is_some();
        if !needed {
            // Every field is `None`: nothing to drop (skips the drop glue).
            std::mem::forget(self);
            return None;
        }
        Some(Box::new(self))
    }

    /// Mark the event complete, first of all notifications; returns the
    /// callbacks attached to it, for [`Completion::notify`].
    pub(crate) fn mark(&self, result: &Result<()>) -> SmallVec<[Callback; 1]> {
        self.event.as_ref().map(|e| e.mark_complete(result)).unwrap_or_default()
    }

    /// After [`Completion::mark`]: the callback, then the completion entry,
    /// then the event's own callbacks (`attached`), then the event settles.
    /// Whatever a notification observes, the event already reports the
    /// outcome; a program thread's wait on the event returns after them all.
    pub(crate) fn notify(self, attached: SmallVec<[Callback; 1]>, result: &Result<()>) {
        if let Some(cb) = self.callback {
            call_guarded(|| cb(result));
        }
        if let Some((q, tag)) = self.cq {
            q.push(CompletionEntry { tag, result: result.clone() });
        }
        for cb in attached {
            call_guarded(|| cb(result));
        }
        if let Some(e) = &self.event {
            e.settle();
        }
    }
}

pub(crate) enum Job {
    Op(InlineBody),
    /// A wait on a value: completes once everything enrolled before it has.
    Barrier(ValueRc, Region),
    /// Holds a released value or view until everything enrolled before it
    /// has finished (see [`crate::runtime::release_value`]); only its drop
    /// matters.
    Release(#[allow(dead_code)] Released),
}

/// A device task between issue and finish: what its finish needs.
pub(crate) struct Parked {
    pub(crate) job: Job,
    pub(crate) completion: Option<Box<Completion>>,
    /// The outcome so far: the issue's, then the device's.
    pub(crate) result: Result<()>,
    /// Host work for after the device work, and what must live until then.
    pub(crate) tail: Option<Issued>,
}

impl Parked {
    /// Record a failure (the first one wins).
    pub(crate) fn fail(&mut self, e: Error) {
        if self.result.is_ok() {
            self.result = Err(e);
        }
    }
}

/// What a task does and how it reports.
pub(crate) struct Work {
    pub(crate) job: Job,
    pub(crate) completion: Option<Box<Completion>>,
}

impl Work {
    /// The body, as the type it was made with.
    ///
    /// # Safety
    /// `B` must be the body type the task was made with (see `Task::new_op_in`), and this work an operation's.
    #[inline(always)]
    pub(crate) unsafe fn op_mut<B: TaskBody>(&mut self) -> &mut B {
        match &mut self.job {
            // SAFETY: by the contract above.
            Job::Op(body) => unsafe { body.downcast_mut::<B>() },
            Job::Barrier(..) | Job::Release(_) => unreachable!("only an operation's work has a body"),
        }
    }

    /// Keep `c` alive until this task has run (see `Completion::keep_alive`).
    pub(crate) fn keep_alive(&mut self, c: Arc<Contents>) {
        self.completion.get_or_insert_with(Default::default).keep_alive = Some(c);
    }

    /// The operation's body, unless this is a barrier or a release.
    pub(crate) fn operation(&self) -> Option<&dyn TaskBody> {
        match &self.job {
            Job::Op(op) => Some(op.get()),
            Job::Barrier(..) | Job::Release(_) => None,
        }
    }
}

/// The last count of a value or of a view, kept by a release task.
pub(crate) enum Released {
    Value(#[allow(dead_code)] ValueRc),
    View(#[allow(dead_code)] Arc<crate::tensor::view::View>),
}
