//! What a task runs, as the runtime sees it: an abstract body (the ops
//! layer's operation implements it), kept inline in the task's allocation.

use std::borrow::Cow;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr::NonNull;
use std::sync::Arc;

use super::run_ctx::RunCtx;
use super::token::{GrantedView, Keep, TokenInner};
use crate::error::{Error, Result};
use crate::tensor::value::Value;

/// The body of an operation's task.
pub(crate) trait TaskBody: std::any::Any + Send {
    /// The operation's name, the origin of the errors it starts.
    fn origin(&self) -> Cow<'static, str>;
    /// Run the body on a worker (device work is queued and reported in `cx`).
    fn execute(&mut self, cx: &mut RunCtx) -> Result<()>;
    /// Record the outcome in what the body wrote.
    fn commit(&self, result: &Result<()>);
    /// The token of a body that runs elsewhere (external work, host access).
    fn external(&self) -> Option<&Arc<TokenInner>>;
    /// The error of a poisoned input, if any.
    fn poisoned_input(&self) -> Option<Error>;
    /// The granted views and what keeps their storage alive, for a task
    /// about to park in a token.
    fn granted(&self) -> (Vec<GrantedView>, Vec<Keep>);
    /// Whether the body accesses `value`.
    fn holds(&self, value: &Arc<Value>) -> bool;
}

/// Room for a body in the task (the operation is the largest).
const BODY_WORDS: usize = 24;

/// Where a task keeps its body: a field of the task itself, so that the
/// body is written once, straight into its final place, while the job that
/// refers to it stays small enough to move without copying the body.
pub(crate) type Room = MaybeUninit<[u64; BODY_WORDS]>;

/// A body stored in its task's [`Room`], with the function that gives it
/// back as a trait object: a task's body costs no allocation of its own.
pub(crate) struct InlineBody {
    /// Turns the body's address into the body (with its vtable).
    as_dyn: unsafe fn(*mut u8) -> *mut dyn TaskBody,
    /// The room holding the body.
    at: NonNull<u8>,
    /// Whether the body's `commit` records anything for a success (given
    /// when placed, so that the runtime does not call it for nothing).
    commits_success: bool,
}

/// The trait object of the `B` at `p`.
///
/// # Safety
/// `p` must point to a live `B`.
unsafe fn as_dyn<B: TaskBody>(p: *mut u8) -> *mut dyn TaskBody {
    p.cast::<B>() as *mut dyn TaskBody
}

// SAFETY: the body held is `Send` (a `TaskBody` bound), and this is the only
// pointer to it.
unsafe impl Send for InlineBody {}

impl InlineBody {
    /// Store `body` in `room` and own it from here. `commits_success`:
    /// whether its [`TaskBody::commit`] records anything for a success (the
    /// caller knows it from what it built the body from; asked of the body,
    /// it would be built on the stack and copied, or read back from the
    /// room's lines while their stores are under way).
    ///
    /// # Safety
    /// `room` must be valid for writes and hold nothing alive, and it must
    /// stay in place, untouched except through the result, until the result
    /// is dropped (the task that owns the room outlives its job).
    #[inline(always)]
    pub(crate) unsafe fn place<B: TaskBody>(room: *mut Room, body: B, commits_success: bool) -> InlineBody {
        const {
            assert!(size_of::<B>() <= size_of::<Room>(), "a task body is larger than a task's room for it");
            assert!(align_of::<B>() <= align_of::<Room>(), "a task body is aligned more than a task's room");
        }
        let at = room.cast::<u8>();
        // SAFETY: `room` is writable (contract above), and large and aligned
        // enough for a `B` (checked above).
        unsafe { at.cast::<B>().write(body) };
        // SAFETY: `room` is a valid pointer, so not null.
        InlineBody { as_dyn: as_dyn::<B>, at: unsafe { NonNull::new_unchecked(at) }, commits_success }
    }

    /// Whether the body's `commit` has anything to record for `result`.
    #[inline(always)]
    pub(crate) fn commits(&self, result: &Result<()>) -> bool {
        result.is_err() || self.commits_success
    }

    #[inline(always)]
    fn ptr(&self) -> *mut dyn TaskBody {
        // SAFETY: `at` holds the body `as_dyn` was made for, alive until drop.
        unsafe { (self.as_dyn)(self.at.as_ptr()) }
    }

    /// The body.
    #[inline(always)]
    pub(crate) fn get(&self) -> &dyn TaskBody {
        // SAFETY: see `ptr`; borrowed from `self`, the body's only owner.
        unsafe { &*self.ptr() }
    }

    /// The body, mutably.
    #[inline(always)]
    pub(crate) fn get_mut(&mut self) -> &mut dyn TaskBody {
        // SAFETY: see `ptr`; borrowed mutably from `self`, the body's only owner.
        unsafe { &mut *self.ptr() }
    }

    /// The body as the type it was stored with.
    ///
    /// # Safety
    /// `B` must be the type given to [`InlineBody::place`].
    #[inline(always)]
    pub(crate) unsafe fn downcast_mut<B: TaskBody>(&mut self) -> &mut B {
        debug_assert!(
            (self.get() as &dyn std::any::Any).type_id() == std::any::TypeId::of::<B>(),
            "a task body taken as another type"
        );
        // SAFETY: by the contract above, `at` holds a live `B`.
        unsafe { &mut *self.at.as_ptr().cast::<B>() }
    }
}

impl Drop for InlineBody {
    fn drop(&mut self) {
        // SAFETY: the body is alive until here and dropped once.
        unsafe { std::ptr::drop_in_place(self.ptr()) }
    }
}
