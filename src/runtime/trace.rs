//! The observation record of one task and the observer of one runtime it
//! reports to (see `observe` for how observation is switched on and read).

use std::any::Any;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::{Result, Status};
use crate::queue::Mode;
use crate::tensor::value::Value;

/// What one runtime's observation keeps.
pub(crate) struct Observer {
    pub(crate) rt_id: usize,
    pub(crate) threads: usize,
    pub(crate) epoch: Instant,
    pub(crate) next_id: AtomicU64,
    /// Unfinished observed operations (their tasks), by id.
    pub(crate) live: Mutex<BTreeMap<u64, Arc<dyn Any + Send + Sync>>>,
    pub(crate) tensors: Mutex<TensorIds>,
    /// The trace being recorded, if any.
    pub(crate) rec: Mutex<Option<TraceBuf>>,
    /// Pending-work tracking asked for (`ta_runtime_track` or `TA_DUMP_SIGNAL`):
    /// only then are unfinished operations registered in `live`.
    pub(crate) track: AtomicBool,
    /// Where `TA_TRACE` wants this runtime's trace written when it stops.
    pub(crate) env_path: Mutex<Option<String>>,
}

#[derive(Default)]
pub(crate) struct TensorIds {
    pub(crate) by_addr: HashMap<usize, (u32, Weak<Value>)>,
    pub(crate) labels: Vec<String>,
}

pub(crate) struct TraceBuf {
    pub(crate) capacity: usize,
    pub(crate) records: VecDeque<Record>,
    pub(crate) dropped: u64,
    pub(crate) started_ns: u64,
}

/// One concluded operation in a trace.
#[derive(Clone, Debug)]
pub struct Record {
    pub id: u64,
    pub name: Arc<str>,
    /// Worker index + 1 (0: a thread that is not one of the runtime's workers).
    pub worker: u32,
    pub submit_ns: u64,
    /// When every access was enrolled (a predecessor that finished later
    /// has an edge; one that finished before may not).
    pub enrolled_ns: u64,
    pub start_ns: u64,
    /// When its accesses were released (successors may start from then).
    pub finish_ns: u64,
    pub end_ns: u64,
    /// Predecessors it waited for: (operation id, tensor id); id 0 is an
    /// operation submitted before observation began.
    pub preds: Vec<(u64, u32)>,
    pub accesses: Vec<(u32, Mode)>,
    pub status: Status,
    pub message: String,
    /// Device work: (device ordinal, stream, queued at, reported done at).
    pub device: Option<(u32, u32, u64, u64)>,
    /// When a deferred or external operation left the worker for its token.
    pub parked_ns: Option<u64>,
}

/// The observation record attached to one task.
pub(crate) struct TaskTrace {
    pub(crate) obs: Arc<Observer>,
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) submit_ns: u64,
    pub(crate) enrolled_ns: AtomicU64,
    /// The tensor whose queue the task is being enrolled on.
    pub(crate) current: AtomicU32,
    pub(crate) enrolled: Mutex<Enrolled>,
    pub(crate) start_ns: AtomicU64,
    pub(crate) worker: AtomicU32,
    pub(crate) finish_ns: AtomicU64,
    /// Device ordinal << 32 | stream, or `u64::MAX`.
    pub(crate) device: AtomicU64,
    pub(crate) issue_ns: AtomicU64,
    pub(crate) done_ns: AtomicU64,
    /// When its body was handed to a token (deferred or external work).
    pub(crate) parked_ns: AtomicU64,
}

#[derive(Default)]
pub(crate) struct Enrolled {
    pub(crate) accesses: Vec<(u32, Mode)>,
    pub(crate) preds: Vec<(u64, u32)>,
}

impl Observer {
    pub(crate) fn new(rt_id: usize, threads: usize) -> Observer {
        Observer {
            rt_id,
            threads,
            epoch: Instant::now(),
            next_id: AtomicU64::new(1),
            live: Mutex::new(BTreeMap::new()),
            tensors: Mutex::new(TensorIds::default()),
            rec: Mutex::new(None),
            track: AtomicBool::new(false),
            env_path: Mutex::new(None),
        }
    }

    pub(crate) fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    pub(crate) fn tensor_id(&self, value: &Arc<Value>) -> u32 {
        let mut t = self.tensors.lock();
        let addr = Arc::as_ptr(value) as usize;
        if let Some((id, w)) = t.by_addr.get(&addr) {
            if std::ptr::eq(w.as_ptr(), Arc::as_ptr(value)) && w.strong_count() > 0 {
                return *id;
            }
        }
        let id = t.labels.len() as u32;
        t.labels.push(format!(
            "t{id} ({}{})",
            value.dtype().name(),
            if value.domain() == crate::domain::Domain::Host {
                String::new()
            } else {
                format!(", {:?}", value.domain())
            }
        ));
        t.by_addr.insert(addr, (id, Arc::downgrade(value)));
        id
    }

    pub(crate) fn label(&self, tensor: u32) -> String {
        self.tensors.lock().labels.get(tensor as usize).cloned().unwrap_or_else(|| format!("t{tensor}"))
    }

    /// Whether anything keeps this observer registered.
    pub(crate) fn wanted(&self) -> bool {
        self.track.load(Ordering::Relaxed) || self.rec.lock().is_some()
    }
}

impl TaskTrace {
    /// The task is about to be enrolled on `value`'s queue for `mode`.
    pub(crate) fn at_value(&self, value: &Arc<Value>, mode: Mode) {
        let t = self.obs.tensor_id(value);
        self.current.store(t, Ordering::Relaxed);
        self.enrolled.lock().accesses.push((t, mode));
    }

    /// The task waits for `pred` (on the tensor being enrolled).
    pub(crate) fn edge_from(&self, pred: Option<&TaskTrace>) {
        let p = pred.filter(|p| Arc::ptr_eq(&p.obs, &self.obs)).map_or(0, |p| p.id);
        let t = self.current.load(Ordering::Relaxed);
        self.enrolled.lock().preds.push((p, t));
    }

    /// Every access of the task is enrolled (its edges are all known).
    pub(crate) fn enrolled(&self) {
        self.enrolled_ns.store(self.obs.now(), Ordering::Relaxed);
    }

    pub(crate) fn started(&self) {
        if self.start_ns.load(Ordering::Relaxed) != 0 {
            return; // a device task's finish runs through `execute` again
        }
        self.start_ns.store(self.obs.now().max(1), Ordering::Relaxed);
        let w = rayon::current_thread_index().filter(|&i| i < self.obs.threads).map_or(0, |i| i as u32 + 1);
        self.worker.store(w, Ordering::Relaxed);
    }

    pub(crate) fn issued(&self, device: u32, stream: u32) {
        self.device.store((device as u64) << 32 | stream as u64, Ordering::Relaxed);
        self.issue_ns.store(self.obs.now(), Ordering::Relaxed);
    }

    /// The task's completion is deferred to a token: it leaves the worker.
    pub(crate) fn parked(&self) {
        self.parked_ns.store(self.obs.now(), Ordering::Relaxed);
    }

    pub(crate) fn device_done(&self) {
        self.done_ns.store(self.obs.now(), Ordering::Relaxed);
    }

    /// The task is about to release its accesses: from now on it is not
    /// pending work (a waiter it releases must not see it listed).
    pub(crate) fn finishing(&self) {
        self.finish_ns.store(self.obs.now(), Ordering::Relaxed);
        let removed = self.obs.live.lock().remove(&self.id);
        // The registry's count goes outside the lock (the caller holds another).
        drop(removed);
    }

    /// The task's completion has been reported: it joins the trace, if one
    /// is recorded.
    pub(crate) fn concluded(&self, result: &Result<()>) {
        let end = self.obs.now();
        let mut rec = self.obs.rec.lock();
        if let Some(buf) = rec.as_mut() {
            let start = self.start_ns.load(Ordering::Relaxed);
            let finish = self.finish_ns.load(Ordering::Relaxed);
            let dev = self.device.load(Ordering::Relaxed);
            let enrolled = self.enrolled.lock();
            let record = Record {
                id: self.id,
                name: self.name.clone(),
                worker: self.worker.load(Ordering::Relaxed),
                submit_ns: self.submit_ns,
                enrolled_ns: self.enrolled_ns.load(Ordering::Relaxed),
                start_ns: if start == 0 { finish } else { start },
                finish_ns: finish,
                end_ns: end,
                preds: enrolled.preds.clone(),
                accesses: enrolled.accesses.clone(),
                status: result.as_ref().err().map_or(Status::Ok, |e| e.status()),
                message: result.as_ref().err().map_or(String::new(), |e| e.message().to_string()),
                parked_ns: Some(self.parked_ns.load(Ordering::Relaxed)).filter(|&p| p != 0),
                device: (dev != u64::MAX).then(|| {
                    (
                        (dev >> 32) as u32,
                        dev as u32,
                        self.issue_ns.load(Ordering::Relaxed),
                        self.done_ns.load(Ordering::Relaxed),
                    )
                }),
            };
            if buf.records.len() >= buf.capacity {
                buf.records.pop_front();
                buf.dropped += 1;
            }
            if buf.capacity > 0 {
                buf.records.push_back(record);
            } else {
                buf.dropped += 1;
            }
        }
    }
}
