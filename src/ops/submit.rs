//! Atomic submission: every operand's hazard record is locked (in address
//! order, so concurrent submissions cannot deadlock), the operation is checked
//! against the values' submission-time state, and then all its accesses are
//! enrolled before any lock is released. Two operations that share values are
//! therefore enrolled in the same order on every queue they share, which is
//! why submissions from many threads never form a wait cycle (two-phase
//! locking makes the enrollment order a serialization order).

use smallvec::SmallVec;

use super::{in_place, Access, Body, Operation, INLINE_ACCESSES};
use crate::dispatch::Selector;
use crate::domain::Domain;
use crate::error::{Error, Result, Status};
use crate::failpoint::{self, Site};
use crate::first_and_rest::FirstAndRest;
use crate::queue::Mode;
use crate::runtime::cq::CompletionQueue;
use crate::runtime::event::{Callback, Event};
use crate::runtime::exec;
use crate::runtime::handle::Runtime;
use crate::runtime::task::Task;
use crate::runtime::work;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::layout::Layout;
use crate::region::Region;
use crate::tensor::handle::Tensor;
use crate::tensor::value::{Contents, StateGuard, Value, ValueState};

/// How to submit an operation and report its completion.
///
/// A submission has one of two completion forms, fixed by the type parameter
/// `C` and so known when the program is compiled:
/// - [`Evented`], the default (`Submit::default()`, [`Submit::on`], struct
///   literals with `..Default::default()`): the operation returns an
///   [`Event`] that completes with its outcome.
/// - [`Detached`] (from [`Submit::detached`]): the operation returns `()` and
///   no event is made; the outcome reaches the callback and completion queue
///   set here, if any, and the poison of what the operation writes.
///
/// ```
/// use tensorasync::{ops, DType, Order, Scalar, Status, Submit, Tensor};
/// let t = Tensor::zeros(DType::F64, &[2], Order::RowMajor, Default::default()).unwrap();
/// let ev = ops::fill(&t, Scalar::real(1.0), Submit::default()).unwrap(); // an Event
/// ev.wait(None).unwrap();
/// let () = ops::scale(&t, Scalar::real(3.0), Submit::default().detached()).unwrap(); // no event
/// assert_eq!(t.to_vec::<f64>().unwrap(), vec![3.0, 3.0]);
/// // A submission refused with an error returns no event in either form.
/// let wrong = ops::fill(&t, Scalar::complex(0.0, 1.0), Submit::default().detached());
/// assert_eq!(wrong.unwrap_err().status(), Status::InvalidArgument);
/// ```
pub struct Submit<'a, C = Evented> {
    /// The runtime that runs the task (default: [`Runtime::global`]).
    pub runtime: Option<&'a Runtime>,
    /// Called once with the outcome, on a worker thread, outside any lock.
    pub callback: Option<Callback>,
    /// Push the outcome to this completion queue with this tag.
    pub cq: Option<(&'a CompletionQueue, u64)>,
    /// Which backends may run a dispatched operation.
    pub selector: Selector,
    /// Inputs in another domain than the output are copied there first
    /// (otherwise they are an error; see [`crate::ops`] transfer notes).
    pub transfer: bool,
    /// Rank among ready tasks: see [`Submit::with_priority`].
    pub priority: i32,
    /// Hand the operation to the runtime's workers even when it is small
    /// and ready at submission (see [`Runtime::set_small_in_place`]).
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Runtime, Scalar, Submit, Tensor};
    /// let rt = Runtime::new(1).unwrap();
    /// let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&t, Scalar::real(1.0), Submit { defer: true, ..Submit::on(&rt) }).unwrap().wait(None).unwrap();
    /// rt.wait_idle(None).unwrap(); // the worker counts its steals when its busy spell ends
    /// assert_eq!(rt.stats().steals, 1);
    /// ```
    pub defer: bool,
    /// The completion form (a marker): see [`Submit::detached`].
    pub completion: PhantomData<C>,
}

/// Only the [`Evented`] form has a default, so `Submit::default()` and
/// `..Default::default()` need no type annotation.
impl Default for Submit<'_, Evented> {
    fn default() -> Self {
        Submit {
            runtime: None,
            callback: None,
            cq: None,
            selector: Selector::default(),
            transfer: false,
            priority: 0,
            defer: false,
            completion: PhantomData,
        }
    }
}

impl<'a> Submit<'a, Evented> {
    /// Submit to `rt`, in the default form (the operation returns an [`Event`]).
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Runtime, Scalar, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).unwrap().wait(None).unwrap();
    /// ops::scale(&t, Scalar::real(2.0), Submit::on(&rt).detached()).unwrap(); // no event
    /// rt.wait_idle(None).unwrap();
    /// assert_eq!(rt.stats().completed, 2);
    /// ```
    pub fn on(rt: &'a Runtime) -> Self {
        Submit { runtime: Some(rt), ..Default::default() }
    }
}

impl<'a, C: Completion> Submit<'a, C> {
    /// The same options in the [`Detached`] form: the operation returns `()`
    /// and makes no event (for submissions whose completion is observed
    /// otherwise, or not at all).
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let cb = Box::new(move |r: &tensorasync::Result<()>| tx.send(r.is_ok()).unwrap());
    /// let opts = Submit { callback: Some(cb), ..Default::default() }.detached();
    /// let () = ops::fill(&t, Scalar::real(1.0), opts).unwrap();
    /// assert!(rx.recv().unwrap()); // the outcome, through the callback
    /// ```
    pub fn detached(self) -> Submit<'a, Detached> {
        Submit {
            runtime: self.runtime,
            callback: self.callback,
            cq: self.cq,
            selector: self.selector,
            transfer: self.transfer,
            priority: self.priority,
            defer: self.defer,
            completion: PhantomData,
        }
    }

    /// Run with this priority among ready tasks: when workers have a choice,
    /// they take the highest-priority ready task first, and tasks of equal
    /// priority in the order they became ready. A priority never overrides a
    /// dependency: it orders only tasks that are ready (all their
    /// predecessors on the epoch queues have finished). The default, 0,
    /// keeps the order and cost of an operation submitted without one;
    /// negative priorities run after the ready tasks of priority 0.
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Runtime, Scalar, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Default::default()).unwrap();
    /// // On a critical path: run as soon as it is ready, ahead of other ready work.
    /// ops::fill(&t, Scalar::real(1.0), Submit::on(&rt).with_priority(10)).unwrap();
    /// assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0; 4]);
    /// ```
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
}

/// The completion form of a submission, the type parameter of [`Submit`]:
/// [`Evented`] or [`Detached`] (the trait is sealed). Every operation is
/// generic over it and returns `Result<C::Output>`.
///
/// ```
/// use tensorasync::{ops, DType, Order, Result, Scalar, Submit, Tensor};
/// use tensorasync::ops::Completion;
/// // A helper that, like the operations, returns what its caller's form asks for.
/// fn ones<C: Completion>(t: &Tensor, opts: Submit<'_, C>) -> Result<C::Output> {
///     ops::fill(t, Scalar::real(1.0), opts)
/// }
/// let t = Tensor::zeros(DType::F32, &[2], Order::RowMajor, Default::default()).unwrap();
/// ones(&t, Submit::default()).unwrap().wait(None).unwrap();
/// let () = ones(&t, Submit::default().detached()).unwrap();
/// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
/// ```
pub trait Completion: sealed::Sealed {
    /// What a submission in this form returns: an [`Event`], or `()`.
    type Output;
}

/// The default completion form: an operation returns the [`Event`] of its
/// completion.
///
/// ```
/// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
/// use tensorasync::ops::Evented;
/// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
/// let opts: Submit<'_, Evented> = Submit::default();
/// assert!(ops::fill(&t, Scalar::real(1.0), opts).unwrap().wait(None).is_ok());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evented;

/// The completion form without an event (see [`Submit::detached`]): an
/// operation returns `()`, and its submission makes no event.
///
/// ```
/// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
/// use tensorasync::ops::Detached;
/// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
/// let opts: Submit<'_, Detached> = Submit::default().detached();
/// let () = ops::fill(&t, Scalar::real(4.0), opts).unwrap();
/// assert_eq!(t.to_vec::<f64>().unwrap(), vec![4.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Detached;

impl Completion for Evented {
    type Output = Event;
}

impl Completion for Detached {
    type Output = ();
}

/// What the submission path does per form; not nameable outside the crate,
/// which seals [`Completion`].
mod sealed {
    use crate::runtime::event::Event;

    pub trait Sealed {
        /// Whether the form makes an event (the event failpoint is hit only then).
        const EVENTED: bool;
        /// What the submission makes before enrollment: the event, or nothing.
        type Handle;
        fn make() -> Self::Handle;
        fn event(handle: &Self::Handle) -> Option<&Event>;
        fn output(handle: Self::Handle) -> <Self as super::Completion>::Output
        where
            Self: super::Completion;
    }

    impl Sealed for super::Evented {
        const EVENTED: bool = true;
        type Handle = Event;
        #[inline]
        fn make() -> Event {
            Event::new()
        }
        #[inline]
        fn event(handle: &Event) -> Option<&Event> {
            Some(handle)
        }
        #[inline]
        fn output(handle: Event) -> Event {
            handle
        }
    }

    impl Sealed for super::Detached {
        const EVENTED: bool = false;
        type Handle = ();
        #[inline]
        fn make() {}
        #[inline]
        fn event(_: &()) -> Option<&Event> {
            None
        }
        #[inline]
        fn output(_: ()) {}
    }
}

/// The hazard records of two or three operands that each have one (a
/// value or a view of one) on as many different values, in address order
/// (the first `operands.len()` entries), and for each operand the number of
/// its record; `None` for any other operands. (One operand has a shorter
/// path of its own in [`submit`]: folded in here, it cost a
/// `ta_kernel_submit` 189 more instructions, 1254 -> 1443, callgrind.)
#[inline(always)]
fn distinct_values<'a>(operands: &'a [(&'a Tensor, Mode)]) -> Option<([Hazard<'a>; 3], [usize; 3])> {
    let n = operands.len();
    if !(2..=3).contains(&n) {
        return None;
    }
    let (v0, r0) = operands[0].0.single_hazard()?;
    let (v1, r1) = operands[1].0.single_hazard()?;
    let (v2, r2) = if n == 3 { operands[2].0.single_hazard()? } else { (v0, r0) };
    let (values, regions) = ([v0, v1, v2], [r0, r1, r2]);
    // Operand numbers in address order, by a sorting network (the records
    // themselves are built once, in that order: moving them costs more).
    let key = |op: usize| Arc::as_ptr(values[op]);
    let mut order = [0, 1, 2];
    let mut sort2 = |i: usize, j: usize| {
        if key(order[j]) < key(order[i]) {
            order.swap(i, j);
        }
    };
    sort2(0, 1);
    if n == 3 {
        sort2(1, 2);
        sort2(0, 1);
    }
    if (1..n).any(|x| key(order[x]) == key(order[x - 1])) {
        return None;
    }
    let mut slot = [0; 3];
    for (x, &op) in order[..n].iter().enumerate() {
        slot[op] = x;
    }
    let hazard = |op: usize| Hazard { value: values[op], region: regions[op], op, mode: operands[op].1 };
    Some(([hazard(order[0]), hazard(order[1]), hazard(order[n - 1])], slot))
}

/// One hazard record an operand orders on.
struct Hazard<'a> {
    value: &'a Arc<Value>,
    region: &'a Region,
    op: usize,
    mode: Mode,
}

/// The locks of one submission's values, in lock order (nearly always one).
type Guards<'g> = FirstAndRest<StateGuard<'g>>;

/// The values of one submission, locked; indexed by operand.
pub(crate) struct Locked<'g> {
    operands: &'g [(&'g Tensor, Mode)],
    guards: Guards<'g>,
    /// Operand index -> guard index (of the operand's root value).
    slot: &'g [usize],
    /// The operand whose contents this operation replaced, with the old
    /// contents: earlier accesses still point into them, so the task keeps
    /// them alive until it has run.
    retired: Option<(usize, Arc<Contents>)>,
    /// The operand whose unconstructed value this operation constructed. A
    /// refused submission puts both back, so it changes nothing and frees
    /// nothing an earlier access uses.
    constructed: Option<usize>,
}

impl Locked<'_> {
    /// The submission-time state of operand `i`'s root value (constructing
    /// outputs goes through it; only whole values can be unconstructed).
    #[inline(always)]
    pub(crate) fn state(&mut self, i: usize) -> &mut ValueState {
        self.guards.get_mut(self.slot[i]).expect("every operand's lock is taken")
    }

    /// Where operand `i` lives.
    pub(crate) fn domain(&self, i: usize) -> Domain {
        self.operands[i].0.domain()
    }

    /// Whether operand `i` is a view.
    pub(crate) fn is_view(&self, i: usize) -> bool {
        self.operands[i].0.is_view()
    }

    /// Whether operand `i` is a whole value whose storage is memory the
    /// library does not own (wrapped user memory): it is never replaced.
    pub(crate) fn wraps_user_memory(&self, i: usize) -> bool {
        let state = self.guards.get(self.slot[i]).expect("every operand's lock is taken");
        state.contents.as_ref().is_some_and(|c| c.storage().is_wrapped())
    }

    /// Give whole-value operand `i` new contents (another shape). Refused while
    /// the value has views (they would keep showing the old storage), and for
    /// a block of a block array (its storage is part of the array's).
    pub(crate) fn replace_contents(&mut self, i: usize, fresh: Arc<Contents>, origin: &'static str) -> Result<()> {
        if self.operands[i].0.root().fixed() {
            return Err(Error::new(
                Status::ShapeMismatch,
                origin,
                "a block of a block array cannot take another shape",
            ));
        }
        let state = self.state(i);
        let old = state.contents.replace(fresh).expect("replace_contents needs constructed contents");
        if Arc::strong_count(&old) > 1 {
            let have = old.layout.extents.clone();
            self.state(i).contents = Some(old);
            return Err(Error::new(
                Status::ShapeMismatch,
                origin,
                format!("the output has extents {have:?} and live views, so it cannot take another shape"),
            ));
        }
        debug_assert!(self.retired.is_none(), "one replaced output per operation");
        self.retired = Some((i, old));
        Ok(())
    }

    /// Construct the unconstructed whole-value operand `i` with `fresh`.
    pub(crate) fn construct(&mut self, i: usize, fresh: Arc<Contents>) {
        self.state(i).contents = Some(fresh);
        self.constructed = Some(i);
    }

    /// Whether no access to any of the locked values is unfinished and none
    /// holds an error: an operation on them is ready, and runs without
    /// reading poison (see `in_place`).
    #[inline(never)]
    fn idle_and_clean(&mut self) -> bool {
        (0..self.guards.len()).all(|g| {
            let s = self.guards.get_mut(g).expect("in range");
            !s.is_poisoned() && s.queue.is_idle_at_a_glance()
        })
    }

    /// Undo what the plan did to the operands' values, for a refused submission.
    fn undo(&mut self) {
        if let Some(i) = self.constructed.take() {
            self.state(i).contents = None;
        }
        if let Some((i, old)) = self.retired.take() {
            self.state(i).contents = Some(old);
        }
    }

    /// The submission-time layout of operand `i` (its view's, for a view);
    /// `None` while unconstructed. Inlined into the plans (out of line, about
    /// 30 instructions a call, a few calls per submission).
    #[inline(always)]
    pub(crate) fn layout(&self, i: usize) -> Option<&Layout> {
        let t = self.operands[i].0;
        if let Some(v) = t.view() {
            Some(&v.layout)
        } else if let Some(c) = t.coalesced() {
            Some(&c.layout)
        } else {
            self.guards.get(self.slot[i]).expect("every operand's lock is taken").layout()
        }
    }
}

/// Submit an operation. `plan` runs with every operand locked: it checks shapes
/// against the submission-time state and may construct outputs. On any error
/// nothing is enrolled.
// Inlined into each operation's one call: the instantiation is per operation
// anyway, and the call out of line costs instructions on every submission.
#[inline(always)]
pub(crate) fn submit<C: Completion>(
    name: impl Into<super::OpName>,
    origin: &'static str,
    operands: &[(&Tensor, Mode)],
    body: Body,
    opts: Submit<'_, C>,
    plan: impl FnOnce(&mut Locked<'_>) -> Result<()>,
) -> Result<C::Output> {
    // Static checks: read-only outputs, and outputs sharing an input's queue.
    for (t, m) in operands {
        if m.writes() && t.is_read_only() {
            let what = if t.is_conj() || t.coalesced().is_some() || t.view().is_some_and(|v| !v.root.read_only()) {
                "a read-only view (conj)"
            } else {
                "read-only"
            };
            return Err(Error::new(Status::ReadOnly, origin, format!("the output is {what}")));
        }
    }
    // Most operations have one operand with one hazard record (a value or a
    // view): nothing to sort, check for aliasing, or map between operands
    // and locks.
    if let [(t, m)] = operands {
        if let Some((value, region)) = t.single_hazard() {
            let hz = [Hazard { value, region, op: 0, mode: *m }];
            return enroll(name, origin, operands, &hz, &[0], &[0], body, opts, plan);
        }
    }
    // Two or three operands on as many different values (axpy, copy, gemm...):
    // one lock each, in address order, and nothing that could alias.
    if let Some((hz, slot)) = distinct_values(operands) {
        let n = operands.len();
        return enroll(name, origin, operands, &hz[..n], &[0, 1, 2][..n], &slot[..n], body, opts, plan);
    }
    // Every hazard record the operands order on (one per operand, but one
    // per covered block for a coalesced view), in record order: the lock
    // order, and where accesses to one value meet.
    let mut records: SmallVec<[Hazard<'_>; 4]> = SmallVec::new();
    for (op, (t, m)) in operands.iter().enumerate() {
        match t.single_hazard() {
            Some((value, region)) => records.push(Hazard { value, region, op, mode: *m }),
            None => records.extend(t.hazards().map(|(value, region)| Hazard { value, region, op, mode: *m })),
        }
    }
    // Worked on as slices from here: the small vectors' own indexing is not
    // inlined, and cost a 3-operand gemm about 150 instructions here.
    let hz = records.as_mut_slice();
    hz.sort_unstable_by_key(|h| (Arc::as_ptr(h.value) as usize, h.op));
    let hz = &*hz;
    // Two accesses to one value in one operation are allowed when both
    // read, or when their regions are provably disjoint (§2.3).
    for (x, h) in hz.iter().enumerate() {
        for g in hz[x + 1..].iter().take_while(|g| Arc::ptr_eq(g.value, h.value)) {
            if (h.mode.writes() || g.mode.writes()) && h.region.may_overlap(g.region) {
                return Err(Error::new(
                    Status::Alias,
                    origin,
                    "an output shares the epoch queue of another operand of the same operation, and their elements may overlap",
                ));
            }
        }
    }
    // Which lock (one per distinct value, in address order) each record
    // takes, and which lock each operand's state is read through: its first
    // record's (a coalesced view's blocks each have a lock; only whole
    // values have a state that plans read). In arrays for a few operands.
    const FEW: usize = 5;
    let (mut guard_buf, mut slot_buf) = ([0; FEW], [usize::MAX; FEW]);
    let (mut guard_vec, mut slot_vec) = (Vec::new(), Vec::new());
    let (guard_of, slot) = if hz.len() <= FEW && operands.len() <= FEW {
        (&mut guard_buf[..hz.len()], &mut slot_buf[..operands.len()])
    } else {
        guard_vec.resize(hz.len(), 0);
        slot_vec.resize(operands.len(), usize::MAX);
        (&mut guard_vec[..], &mut slot_vec[..])
    };
    let mut g = 0;
    for (x, h) in hz.iter().enumerate() {
        if x > 0 && !Arc::ptr_eq(hz[x - 1].value, h.value) {
            g += 1;
        }
        guard_of[x] = g;
        if slot[h.op] == usize::MAX {
            slot[h.op] = g;
        }
    }
    enroll(name, origin, operands, hz, guard_of, slot, body, opts, plan)
}

/// The error for operand `i`, unconstructed, which the operation accesses with `mode`.
#[cold]
fn unconstructed(i: usize, mode: Mode, origin: &'static str) -> Error {
    let what = if mode.reads() { "reads" } else { "writes" };
    Error::new(Status::Unconstructed, origin, format!("operand {i} is unconstructed and this operation {what} it"))
}

/// The error for the first operand that the operation reads while it is unconstructed.
#[cold]
fn unconstructed_input(locked: &Locked<'_>, operands: &[(&Tensor, Mode)], origin: &'static str) -> Result<()> {
    for (i, (_, m)) in operands.iter().enumerate() {
        if m.reads() && locked.layout(i).is_none() {
            return Err(Error::new(
                Status::Unconstructed,
                origin,
                format!("operand {i} is unconstructed and this operation reads it"),
            ));
        }
    }
    Ok(())
}

/// Admit the operation, lock its values, run `plan`, and enroll every
/// access before any lock is released. `hz` is sorted by value address;
/// `guard_of[x]` numbers the distinct values in that order (the lock that
/// record `x` takes); `slot[i]` is the lock operand `i`'s state is read
/// through.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn enroll<C: Completion>(
    name: impl Into<super::OpName>,
    origin: &'static str,
    operands: &[(&Tensor, Mode)],
    hz: &[Hazard<'_>],
    guard_of: &[usize],
    slot: &[usize],
    body: Body,
    opts: Submit<'_, C>,
    plan: impl FnOnce(&mut Locked<'_>) -> Result<()>,
) -> Result<C::Output> {
    let rt = opts.runtime.unwrap_or_else(|| Runtime::global());
    // Allocation failures (test builds only: see `failpoint`) come before
    // anything is admitted or enrolled.
    if failpoint::hit(Site::Task) {
        return Err(failpoint::out_of_memory(Site::Task, origin));
    }
    if C::EVENTED && failpoint::hit(Site::Event) {
        return Err(failpoint::out_of_memory(Site::Event, origin));
    }
    // An operation that may run in place (see `in_place`; without a
    // callback, which runs on a worker) is planned before its task is made.
    if let Some(limit) = in_place::limit(&body) {
        if !opts.defer && opts.callback.is_none() && rt.small_in_place() && !crate::runtime::observe::on() {
            return plan_first(name, origin, operands, hz, guard_of, slot, body, opts, rt, limit, plan);
        }
    }
    // The task's memory first, and no locked instruction (the admission's
    // count) until the operation is built: see `TaskMemory`.
    let memory = Task::reserve();
    rt.inner().prepare_push();
    let handle = C::make();
    let op = operation(name, operands, body);
    let completion = completion_of::<C>(&handle, opts.callback, opts.cq);
    let device = op.device();
    rt.inner().admit(origin)?;
    let task = Task::new_op_in(
        memory,
        Some(rt.inner().task_ref()),
        op,
        commits_success(operands),
        completion,
        device,
        opts.priority,
    );
    // SAFETY: the task is not yet enrolled, so no other thread can see its
    // work, which was made from an `Operation` just above.
    let op = unsafe { task.work_mut().op_mut::<Operation>() };
    let mut locked = Locked { operands, guards: Guards::new(), slot, retired: None, constructed: None };
    match lock_and_plan(&mut locked, hz, guard_of, op, origin, plan) {
        Ok(()) => enroll_task::<C>(rt, task, locked, hz, guard_of, device, handle),
        Err(e) => {
            drop(locked);
            drop(task);
            rt.inner().refuse();
            Err(e)
        }
    }
}

/// The accesses of `operands` and the operation they make with `body`.
#[inline(always)]
fn operation(name: impl Into<super::OpName>, operands: &[(&Tensor, Mode)], body: Body) -> Operation {
    // Pushed while they fit in place (collecting calls out of line, at about
    // 80 instructions for one operand); collected beyond, so that the vector
    // reserves once.
    let accesses = if operands.len() <= INLINE_ACCESSES {
        let mut v = SmallVec::new();
        for (t, m) in operands {
            v.push(Access::new(t, *m));
        }
        v
    } else {
        operands.iter().map(|(t, m)| Access::new(t, *m)).collect()
    };
    Operation { name: name.into(), accesses, body, stamp: 0 }
}

/// Who hears of the outcome: the event in `handle`, the callback, the queue.
#[inline(always)]
fn completion_of<C: Completion>(
    handle: &<C as sealed::Sealed>::Handle,
    callback: Option<Callback>,
    cq: Option<(&CompletionQueue, u64)>,
) -> work::Completion {
    work::Completion {
        event: C::event(handle).cloned(),
        callback,
        cq: cq.map(|(q, tag)| (q.clone(), tag)),
        keep_alive: None,
    }
}

/// Whether a success cleans what the operation wrote: only an overwrite
/// does (see `Operation::commit`).
#[inline(always)]
fn commits_success(operands: &[(&Tensor, Mode)]) -> bool {
    operands.iter().any(|(_, m)| *m == Mode::Write)
}

/// Lock each distinct value once, in address order (into `locked`, which
/// holds none yet), run `plan`, and record in `op` where each operand's
/// elements are. On an error the plan's changes are undone (the caller
/// drops the locks). `locked` is the caller's: returned by value, it was
/// copied, about 30 instructions a submission.
#[inline(always)]
fn lock_and_plan<'g>(
    locked: &mut Locked<'g>,
    hz: &[Hazard<'g>],
    guard_of: &[usize],
    op: &mut Operation,
    origin: &'static str,
    plan: impl FnOnce(&mut Locked<'_>) -> Result<()>,
) -> Result<()> {
    let operands = locked.operands;
    for (h, &g) in hz.iter().zip(guard_of) {
        if g == locked.guards.len() {
            locked.guards.push(h.value.state.lock());
        }
    }
    // Reading an unconstructed operand is refused with its own status even
    // where the plan failed first on its missing shape (checked only on the
    // plan's error path, so an accepted submission pays nothing for it).
    let mut checked = plan(locked);
    if let Err(e) = checked {
        checked = Err(unconstructed_input(locked, operands, origin).err().unwrap_or(e));
    }
    // Record where each operand's elements are, now that the plan is final;
    // an operand still unconstructed refuses the submission.
    if checked.is_ok() {
        for (i, a) in op.accesses.iter_mut().enumerate() {
            // The operand's handle and `a.tensor` share the view, so the
            // geometry stays valid for as long as the access holds it.
            let t = operands[i].0;
            if let Some(v) = t.view() {
                a.set_geometry(v.geometry());
            } else if let Some(c) = t.coalesced() {
                a.set_geometry(crate::tensor::view::Geometry { data: c.data(), layout: &c.layout, conj: c.conj });
            } else if let Some(c) = locked.state(i).contents.as_deref() {
                a.set_geometry(crate::tensor::view::Geometry {
                    data: c.data(a.value().dtype()),
                    layout: &c.layout,
                    conj: false,
                });
            } else {
                checked = Err(unconstructed(i, operands[i].1, origin));
                break;
            }
        }
    }
    if checked.is_err() {
        locked.undo();
    }
    checked
}

/// [`enroll`] for an operation that may run in place: its operation is
/// built and planned first, under its values' locks, and runs there when it
/// is small and ready (see `in_place`); no task is made for it, and it is
/// counted but never outstanding. Otherwise its task is made under those
/// locks and enrolled as any other. Inlined: out of line, the arguments'
/// hand-over cost a 10-element fill more time than the instructions it
/// saved (docs/perf-notes/runtime.md, "Small operations in place").
/// Its cost to a larger operation of the same kinds is measured there too.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn plan_first<C: Completion>(
    name: impl Into<super::OpName>,
    origin: &'static str,
    operands: &[(&Tensor, Mode)],
    hz: &[Hazard<'_>],
    guard_of: &[usize],
    slot: &[usize],
    body: Body,
    opts: Submit<'_, C>,
    rt: &Runtime,
    limit: usize,
    plan: impl FnOnce(&mut Locked<'_>) -> Result<()>,
) -> Result<C::Output> {
    let handle = C::make();
    let mut op = operation(name, operands, body);
    let mut locked = Locked { operands, guards: Guards::new(), slot, retired: None, constructed: None };
    lock_and_plan(&mut locked, hz, guard_of, &mut op, origin, plan)?;
    let small = op.accesses.iter().all(|a| a.domain() == Domain::Host && a.elements() <= limit);
    if small && locked.idle_and_clean() {
        if let Err(e) = rt.inner().accepts(origin) {
            locked.undo();
            return Err(e);
        }
        let result = run_in_place(&mut op, locked, hz, guard_of);
        // Notified as a task is concluded (see `exec::conclude`).
        if C::EVENTED || opts.cq.is_some() {
            let completion = completion_of::<C>(&handle, None, opts.cq);
            let attached = completion.mark(&result);
            completion.notify(attached, &result);
        }
        drop(op);
        if result.is_err() {
            rt.inner().stats.count_failure(&result);
        }
        rt.inner().count_in_place();
        return Ok(C::output(handle));
    }
    let device = op.device();
    let memory = Task::reserve();
    rt.inner().prepare_push();
    if let Err(e) = rt.inner().admit(origin) {
        locked.undo();
        return Err(e);
    }
    let completion = completion_of::<C>(&handle, opts.callback, opts.cq);
    let task = Task::new_op_in(
        memory,
        Some(rt.inner().task_ref()),
        op,
        commits_success(operands),
        completion,
        device,
        opts.priority,
    );
    enroll_task::<C>(rt, task, locked, hz, guard_of, device, handle)
}

/// Enroll the accesses of `task`, whose operation `locked` has planned, on
/// the queues of its values (`hz`, `guard_of` as for [`enroll`]), then
/// unlock them and hand the task on if it is ready.
#[inline(always)]
fn enroll_task<C: Completion>(
    rt: &Runtime,
    mut task: Arc<Task>,
    mut locked: Locked<'_>,
    hz: &[Hazard<'_>],
    guard_of: &[usize],
    device: Option<u32>,
    handle: <C as sealed::Sealed>::Handle,
) -> Result<C::Output> {
    if crate::runtime::observe::on() {
        crate::runtime::observe::submitted(rt.inner(), &mut task);
    }
    if let Some((_, old)) = locked.retired.take() {
        // SAFETY: the task is not yet enrolled, so no other thread can see its work.
        unsafe { task.work_mut() }.keep_alive(old);
    }

    // One stamp for the whole operation, later than anything enrolled on any
    // of its queues: stamps of conflicting operations follow their order.
    let stamp = locked.guards.iter().map(|g| g.queue.next_stamp()).max().unwrap_or(1);
    // SAFETY: as above (not yet enrolled).
    let op = unsafe { task.work_mut().op_mut::<Operation>() };
    op.stamp = stamp;
    let external = op.external().inspect(|token| {
        // A wait for the grant, from inside a task the grant waits for,
        // then fails at once (see `Event::wait`).
        token.started().bind(&task);
    });
    // An external operation (a host access) ready at once is granted here:
    // granting runs none of the caller's code, and a zero-timeout acquire of
    // an idle tensor then succeeds rather than racing a worker.
    let grant_here = external.is_some();
    for (h, &g) in hz.iter().zip(guard_of) {
        let on_device = device.is_some() && h.value.domain() != Domain::Host;
        if let Some(t) = task.trace() {
            t.at_value(h.value, h.mode);
        }
        locked
            .guards
            .get_mut(g)
            .expect("every record's lock is taken")
            .queue
            .enroll(&task, h.mode, h.region, stamp, on_device);
        #[cfg(feature = "internals")]
        enrollments::record(Arc::as_ptr(h.value) as usize, stamp);
    }
    drop(locked);
    if let Some(t) = task.trace() {
        t.enrolled();
    }

    if let Some(e) = C::event(&handle) {
        e.bind(&task);
    }
    if task.release_guard() {
        if grant_here {
            exec::run(task);
        } else {
            exec::schedule(task);
        }
    }
    Ok(C::output(handle))
}

/// Run `op` (small, never enrolled) while `locked` holds its idle, clean
/// values, under its stamp on each of their queues; a failure poisons what
/// it writes under those locks, as `Operation::commit` would (a success
/// cleans nothing: the values are clean). Out of line: one copy for every
/// operation and completion form.
#[inline(never)]
fn run_in_place(op: &mut Operation, mut locked: Locked<'_>, hz: &[Hazard<'_>], guard_of: &[usize]) -> Result<()> {
    let stamp = locked.guards.iter().map(|g| g.queue.next_stamp()).max().unwrap_or(1);
    for g in 0..locked.guards.len() {
        locked.guards.get_mut(g).expect("in range").queue.take_stamp(stamp);
    }
    #[cfg(feature = "internals")]
    for h in hz {
        enrollments::record(Arc::as_ptr(h.value) as usize, stamp);
    }
    op.stamp = stamp;
    let result = in_place::execute(op);
    if let Err(e) = &result {
        for (h, &g) in hz.iter().zip(guard_of).filter(|(h, _)| h.mode.writes()) {
            let state = &mut **locked.guards.get_mut(g).expect("every record's lock is taken");
            h.value.add_poison_locked(state, h.region.clone(), stamp, e.clone());
        }
    }
    result
}

/// Where the accesses enrolled on this thread land, for the crate's
/// integration tests (feature `internals`).
#[cfg(feature = "internals")]
pub mod enrollments {
    use std::cell::RefCell;

    /// Where each enrolled access landed: `(value id, position in its
    /// queue)`. Sorting operations by these positions per value recovers the
    /// order the runtime guarantees; tests use it to replay a concurrent
    /// program sequentially.
    pub type EnrollTrace = smallvec::SmallVec<[(usize, u64); 3]>;

    thread_local! {
        static RECORDING: RefCell<Option<EnrollTrace>> = const { RefCell::new(None) };
    }

    /// Records the accesses enrolled on this thread until [`Recording::finish`].
    pub struct Recording(());

    /// Start recording the accesses that submissions on this thread enroll.
    pub fn record_enrollments() -> Recording {
        RECORDING.with(|r| *r.borrow_mut() = Some(EnrollTrace::new()));
        Recording(())
    }

    impl Recording {
        /// Stop recording; what was enrolled meanwhile.
        pub fn finish(self) -> EnrollTrace {
            RECORDING.with(|r| r.borrow_mut().take()).unwrap_or_default()
        }
    }

    impl Drop for Recording {
        fn drop(&mut self) {
            RECORDING.with(|r| *r.borrow_mut() = None);
        }
    }

    pub(crate) fn record(value: usize, stamp: u64) {
        RECORDING.with(|r| {
            if let Some(t) = r.borrow_mut().as_mut() {
                t.push((value, stamp));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::{ops, DType, Domain, Order, Runtime, Scalar, Status, Submit, Tensor};
    use std::sync::Arc;

    /// Two operands on two values are locked in address order, whichever
    /// operand comes first: each is still read and written through its own
    /// state. Pairs are made until both orders have been seen.
    #[test]
    fn two_operand_submissions_see_each_operand_as_itself() {
        let rt = Runtime::new(1).unwrap();
        let (mut lower_first, mut higher_first) = (0, 0);
        let mut round = 0usize;
        while lower_first < 3 || higher_first < 3 {
            assert!(round < 256, "the allocator gave one address order only");
            let n = 2 + round % 3;
            let data: Vec<f64> = (0..n).map(|i| (10 * round + i) as f64).collect();
            let unconstructed = || Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
            let source = || Tensor::from_slice(&[n], Order::RowMajor, &data).unwrap();
            // Made in either order, so that their values' addresses come in either order.
            let (u, s) = if round % 2 == 0 {
                let u = unconstructed();
                (u, source())
            } else {
                let s = source();
                (unconstructed(), s)
            };
            let addr = |t: &Tensor| Arc::as_ptr(t.single_hazard().unwrap().0) as usize;
            if addr(&u) < addr(&s) {
                lower_first += 1;
            } else {
                higher_first += 1;
            }
            // The copy constructs its destination, operand 0, from operand 1.
            ops::copy(&u, &s, Submit::on(&rt)).unwrap();
            assert_eq!(u.extents().unwrap().as_slice(), &[n], "round {round}");
            assert_eq!(u.to_vec::<f64>().unwrap(), data, "round {round}");
            assert_eq!(s.to_vec::<f64>().unwrap(), data, "round {round}: the source is unchanged");
            // A shape mismatch names operand 0's shape first.
            let other = Tensor::from_slice(&[n + 1], Order::RowMajor, &vec![0.0f64; n + 1]).unwrap();
            let e = ops::axpy(&other, Scalar::real(1.0), &u, Submit::on(&rt)).unwrap_err();
            assert_eq!(e.status(), Status::ShapeMismatch);
            assert_eq!(e.message(), format!("shapes [{}] and [{n}] differ", n + 1), "round {round}");
            let e = ops::axpy(&u, Scalar::real(1.0), &other, Submit::on(&rt)).unwrap_err();
            assert_eq!(e.message(), format!("shapes [{n}] and [{}] differ", n + 1), "round {round}");
            // Reading an unconstructed operand 1 names it, and changes nothing.
            let fresh = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
            let e = ops::copy(&s, &fresh, Submit::on(&rt)).unwrap_err();
            assert_eq!(e.status(), Status::Unconstructed);
            assert_eq!(e.message(), "operand 1 is unconstructed and this operation reads it");
            assert_eq!(s.to_vec::<f64>().unwrap(), data, "round {round}: a refused copy changes nothing");
            // An axpy reads operand 1 into operand 0.
            ops::axpy(&u, Scalar::real(2.0), &s, Submit::on(&rt)).unwrap();
            assert_eq!(u.to_vec::<f64>().unwrap(), data.iter().map(|x| 3.0 * x).collect::<Vec<_>>());
            round += 1;
        }
    }

    /// The same for three operands on three values: a product constructs
    /// C (operand 0) from A (1) and B (2) of different shapes, made in every
    /// order until every address order has been seen.
    #[test]
    fn three_operand_submissions_see_each_operand_as_itself() {
        let rt = Runtime::new(1).unwrap();
        let (a_data, b_data): (Vec<f64>, Vec<f64>) =
            ((1..=6).map(f64::from).collect(), (1..=12).map(f64::from).collect());
        // C = A·B for A 2x3 and B 3x4, row-major.
        let want: Vec<f64> =
            (0..8).map(|ij| (0..3).map(|k| a_data[(ij / 4) * 3 + k] * b_data[k * 4 + ij % 4]).sum()).collect();
        let mut seen = std::collections::HashSet::new();
        let mut round = 0usize;
        while seen.len() < 6 {
            assert!(round < 600, "only {} of the 6 address orders were seen", seen.len());
            let mut made: [Option<Tensor>; 3] = [None, None, None];
            for k in 0..3 {
                // The creation order cycles through the six permutations.
                let which = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]][round % 6][k];
                made[which] = Some(match which {
                    0 => Tensor::unconstructed(DType::F64, Domain::Host).unwrap(),
                    1 => Tensor::from_slice(&[2, 3], Order::RowMajor, &a_data).unwrap(),
                    _ => Tensor::from_slice(&[3, 4], Order::RowMajor, &b_data).unwrap(),
                });
            }
            let [c, a, b] = made.map(Option::unwrap);
            let addr = |t: &Tensor| Arc::as_ptr(t.single_hazard().unwrap().0) as usize;
            let mut order = [(addr(&c), 0), (addr(&a), 1), (addr(&b), 2)];
            order.sort();
            seen.insert(order.map(|(_, op)| op));
            ops::assign_product(&c, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap();
            assert_eq!(c.extents().unwrap().as_slice(), &[2, 4], "round {round}");
            assert_eq!(c.to_vec::<f64>().unwrap(), want, "round {round}");
            assert_eq!(a.to_vec::<f64>().unwrap(), a_data, "round {round}");
            assert_eq!(b.to_vec::<f64>().unwrap(), b_data, "round {round}");
            // Swapped inputs do not fit: the error names A's and B's shapes in order.
            let e = ops::gemm(&c, Scalar::real(1.0), &b, &a, Scalar::real(0.0), Submit::on(&rt)).unwrap_err();
            assert_eq!(e.status(), Status::ShapeMismatch, "round {round}: {e}");
            assert!(e.message().contains("3x4") && e.message().find("3x4") < e.message().find("2x3"), "{e}");
            round += 1;
        }
    }
}
