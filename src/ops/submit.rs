//! Atomic submission: every operand's hazard record is locked (in address
//! order, so concurrent submissions cannot deadlock), the operation is checked
//! against the values' submission-time state, and then all its accesses are
//! enrolled before any lock is released. Two operations that share values are
//! therefore enrolled in the same order on every queue they share, which is
//! why submissions from many threads never form a wait cycle (two-phase
//! locking makes the enrollment order a serialization order).

use parking_lot::MutexGuard;
use smallvec::SmallVec;

use super::{Access, Body, Operation};
use crate::dispatch::Selector;
use crate::error::{Error, Result, Status};
use crate::queue::Mode;
use crate::runtime::cq::CompletionQueue;
use crate::runtime::event::{Callback, Event};
use crate::runtime::exec::{self, Completion, Work};
use crate::runtime::{Runtime, Task};
use crate::layout::Layout;
use crate::value::{Tensor, ValueState};

/// Where each enrolled access landed: `(value id, position in its queue)`.
/// Sorting operations by these positions per value recovers the order the
/// runtime guarantees; tests use it to replay a concurrent program sequentially.
pub type EnrollTrace = SmallVec<[(usize, u64); 3]>;

/// How to submit an operation and report its completion.
#[derive(Default)]
pub struct Submit<'a> {
    /// The runtime that runs the task (default: [`Runtime::global`]).
    pub runtime: Option<&'a Runtime>,
    /// Return an [`Event`] for the operation.
    pub event: bool,
    /// Called once with the outcome, on a worker thread, outside any lock.
    pub callback: Option<Callback>,
    /// Push the outcome to this completion queue with this tag.
    pub cq: Option<(&'a CompletionQueue, u64)>,
    /// Which backends may run a dispatched operation.
    pub selector: Selector,
    /// Receives the queue positions of the enrolled accesses.
    pub trace: Option<&'a mut EnrollTrace>,
}

impl<'a> Submit<'a> {
    /// Submit to `rt` and ask for an event.
    pub fn on(rt: &'a Runtime) -> Self {
        Submit { runtime: Some(rt), ..Default::default() }
    }
    /// Also return an event.
    pub fn with_event(mut self) -> Self {
        self.event = true;
        self
    }
}

/// The values of one submission, locked; indexed by operand.
pub(crate) struct Locked<'g> {
    operands: &'g [(&'g Tensor, Mode)],
    guards: SmallVec<[MutexGuard<'g, ValueState>; 4]>,
    /// Operand index -> guard index (of the operand's root value).
    slot: SmallVec<[usize; 4]>,
}

impl Locked<'_> {
    /// The submission-time state of operand `i`'s root value (constructing
    /// outputs goes through it; only whole values can be unconstructed).
    pub(crate) fn state(&mut self, i: usize) -> &mut ValueState {
        &mut self.guards[self.slot[i]]
    }

    /// The submission-time layout of operand `i` (its view's, for a view);
    /// `None` while unconstructed.
    pub(crate) fn layout(&self, i: usize) -> Option<&Layout> {
        match self.operands[i].0.view() {
            Some(v) => Some(&v.layout),
            None => self.guards[self.slot[i]].layout(),
        }
    }
}

/// Submit an operation. `plan` runs with every operand locked: it checks shapes
/// against the submission-time state and may construct outputs. On any error
/// nothing is enrolled.
pub(crate) fn submit(
    name: impl Into<super::OpName>,
    origin: &'static str,
    operands: &[(&Tensor, Mode)],
    body: Body,
    opts: Submit<'_>,
    plan: impl FnOnce(&mut Locked<'_>) -> Result<()>,
) -> Result<Option<Event>> {
    let rt = opts.runtime.unwrap_or_else(|| Runtime::global());

    // Static checks: read-only outputs, and outputs sharing an input's queue.
    for (t, m) in operands {
        if m.writes() && t.is_read_only() {
            let what = if t.is_conj() || t.view().is_some_and(|v| !v.root.read_only) { "a read-only view (conj)" } else { "read-only" };
            return Err(Error::new(Status::ReadOnly, origin, format!("the output is {what}")));
        }
    }
    // Operands in root order: the lock order, and where accesses to one value
    // meet. (Most operations have one operand: no sorting, no bookkeeping.)
    let mut order: SmallVec<[usize; 4]> = SmallVec::new();
    if operands.len() > 1 {
        for i in 0..operands.len() {
            order.push(i);
        }
        order.sort_by_key(|&i| operands[i].0.value_id());
        // Two accesses to one value in one operation are allowed when both
        // read, or when their regions are provably disjoint (§2.3).
        for (x, &i) in order.iter().enumerate() {
            for &j in order[x + 1..].iter().take_while(|&&j| operands[j].0.same_value(operands[i].0)) {
                let ((a, ma), (b, mb)) = (operands[i], operands[j]);
                if (ma.writes() || mb.writes()) && a.region().may_overlap(b.region()) {
                    return Err(Error::new(
                        Status::Alias,
                        origin,
                        "an output shares the epoch queue of another operand of the same operation, and their elements may overlap",
                    ));
                }
            }
        }
    } else {
        order.push(0);
    }

    rt.inner().admit(origin)?;
    let event = opts.event.then(Event::new);
    let mut accesses = SmallVec::new();
    for (t, m) in operands {
        accesses.push(Access::new((*t).clone(), *m));
    }
    let completion = Completion { event: event.clone(), callback: opts.callback, cq: opts.cq.map(|(q, tag)| (q.clone(), tag)) };
    let task = Task::new(Some(rt.inner()), Work::op(Operation { name: name.into(), accesses, body }, completion));

    // Lock each distinct value once, in address order.
    let mut locked = Locked { operands, guards: SmallVec::new(), slot: SmallVec::new() };
    for _ in 0..operands.len() {
        locked.slot.push(0);
    }
    let mut prev: Option<usize> = None;
    for &i in &order {
        let t = operands[i].0;
        if !prev.is_some_and(|p| operands[p].0.same_value(t)) {
            locked.guards.push(t.root().state.lock());
        }
        locked.slot[i] = locked.guards.len() - 1;
        prev = Some(i);
    }

    let checked = plan(&mut locked).and_then(|()| {
        for (i, (_, m)) in operands.iter().enumerate() {
            if locked.layout(i).is_none() {
                let what = if m.reads() { "reads" } else { "writes" };
                return Err(Error::new(
                    Status::Unconstructed,
                    origin,
                    format!("operand {i} is unconstructed and this operation {what} it"),
                ));
            }
        }
        Ok(())
    });
    if let Err(e) = checked {
        drop(locked);
        drop(task);
        rt.inner().retire();
        return Err(e);
    }

    // Record where each operand's elements are, now that the plan is final.
    // SAFETY: the task is not yet enrolled, so no other thread can see its work.
    let work = unsafe { task.work_mut() };
    for (i, a) in work.accesses_mut().iter_mut().enumerate() {
        // The operand's handle and `a.tensor` share the view, so the
        // geometry stays valid for as long as the access holds it.
        match operands[i].0.view() {
            Some(v) => a.set_geometry(v.geometry()),
            None => {
                let c = locked.state(i).contents.as_deref().expect("checked constructed above");
                a.set_geometry(crate::view::Geometry { data: c.data(a.value().dtype), layout: &c.layout, conj: false });
            }
        }
    }

    let mut trace = opts.trace;
    for &i in &order {
        let (t, m) = operands[i];
        let pos = locked.guards[locked.slot[i]].queue.enroll(&task, m, t.region());
        work.accesses_mut()[i].pos = pos;
        if let Some(tr) = trace.as_deref_mut() {
            tr.push((t.value_id(), pos));
        }
    }
    drop(locked);

    if let Some(e) = &event {
        e.bind(&task);
    }
    if task.release_guard() {
        exec::schedule(task);
    }
    Ok(event)
}
