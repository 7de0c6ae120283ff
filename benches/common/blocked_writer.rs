//! A writer that holds a tensor until told to go: what a bench submits first
//! so that the accesses it times queue behind it instead of running.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tensorasync::{ops, KernelFn, Mode, Runtime, Submit, Tensor};

/// Holds `t` (an update on `rt`) until [`BlockedWriter::release`].
pub struct BlockedWriter {
    gate: Arc<AtomicBool>,
    started: Arc<AtomicBool>,
}

impl BlockedWriter {
    pub fn submit(t: &Tensor, rt: &Runtime) -> BlockedWriter {
        let gate = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicBool::new(false));
        let (g, s) = (gate.clone(), started.clone());
        let block = KernelFn::new(move |_| {
            s.store(true, Ordering::Release);
            while !g.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            Ok(())
        });
        ops::kernel("block", &[(t, Mode::Update)], block, Submit::on(rt).detached()).unwrap();
        BlockedWriter { gate, started }
    }

    /// Wait until the writer runs, so that what is timed next does not
    /// share the cores with a worker picking it up.
    pub fn wait_started(&self) {
        while !self.started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }

    /// Let the writer finish (and everything queued behind it run).
    pub fn release(self) {
        self.gate.store(true, Ordering::Release);
    }
}
