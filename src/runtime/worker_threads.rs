//! The threads of a runtime's pool, started by the runtime itself so that
//! it can join them: once the last reference to a runtime is gone, none of
//! its threads runs library code any more (a program may then unload the
//! library, fork, or check for leaks). A rayon pool on its own only asks
//! its threads to stop when dropped.

use std::thread::JoinHandle;

/// The join handles of one pool's threads. Declared after the pool in
/// [`super::pool::RuntimeInner`], so that it drops after the pool has told
/// the threads to stop.
pub(crate) struct WorkerThreads {
    handles: Vec<JoinHandle<()>>,
    /// The process that started them: a child made by `fork()` has none of
    /// its parent's threads to join.
    pid: u32,
}

impl WorkerThreads {
    pub(crate) fn new(handles: Vec<JoinHandle<()>>) -> Self {
        WorkerThreads { handles, pid: std::process::id() }
    }

    /// Start one of the pool's threads (the pool's spawn handler).
    pub(crate) fn spawn(thread: rayon::ThreadBuilder, into: &mut Vec<JoinHandle<()>>) -> std::io::Result<()> {
        let mut b = std::thread::Builder::new();
        if let Some(name) = thread.name() {
            b = b.name(name.to_owned());
        }
        if let Some(size) = thread.stack_size() {
            b = b.stack_size(size);
        }
        into.push(b.spawn(move || thread.run())?);
        Ok(())
    }
}

impl Drop for WorkerThreads {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            return;
        }
        // The last reference can go on one of the pool's own threads (a
        // drainer that exits last): that thread is left to finish alone.
        let me = std::thread::current().id();
        for h in self.handles.drain(..) {
            if h.thread().id() != me {
                // A worker that panicked outside a job has already reported
                // it through the pool's panic handler.
                let _ = h.join();
            }
        }
    }
}
