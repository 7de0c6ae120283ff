//! Observation of a runtime: trace recording (Chrome trace-event JSON), the
//! pending-work dump, and the environment variables that turn them on for
//! unmodified programs (`TA_TRACE`, `TA_DUMP_SIGNAL`).
//!
//! A runtime is *observed* while it records a trace or tracks its pending
//! work. Only then does a submission attach a [`TaskTrace`] to its task (and
//! register the task as unfinished); the hot paths otherwise pay one relaxed
//! load of [`ACTIVE`] per submission and a test of the task's (empty) trace
//! field, on a line they already touch, where a task starts, gains an edge
//! and concludes.
//!
//! Times are nanoseconds since the observer started. A trace keeps at most
//! its capacity of task records; when full, the oldest record is dropped and
//! counted (the count is written into the trace).

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::pool::RuntimeInner;
use super::task::Task;
pub(crate) use super::trace::Record;
use super::trace::{Enrolled, Observer, TaskTrace, TraceBuf};
use crate::error::Status;
use crate::queue::Mode;

/// Runtimes observed now; zero means no submission attaches anything.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// The observers of the runtimes observed now.
static OBSERVERS: Mutex<Vec<Arc<Observer>>> = Mutex::new(Vec::new());

/// Default trace capacity, in task records.
pub(crate) const DEFAULT_CAPACITY: usize = 1 << 18;

/// Whether any runtime is observed (a relaxed load: a submission racing
/// with the start of observation may go unobserved).
#[inline(always)]
pub(crate) fn on() -> bool {
    // A build without trace recording (`--cfg ta_no_trace`, for measuring
    // what the hooks cost) observes nothing: every hook is dead code.
    !cfg!(ta_no_trace) && ACTIVE.load(Ordering::Relaxed) != 0
}

/// The error of starting an observation in a build without trace recording.
fn not_built(origin: &'static str) -> crate::error::Result<()> {
    if cfg!(ta_no_trace) {
        return Err(crate::error::Error::new(
            Status::Unsupported,
            origin,
            "this build of the library has no trace recording (it was built with --cfg ta_no_trace)",
        ));
    }
    Ok(())
}

/// The observer of runtime `id`, if it is observed.
fn find(id: usize) -> Option<Arc<Observer>> {
    OBSERVERS.lock().iter().find(|o| o.rt_id == id).cloned()
}

/// The observer of `rt`, registered if it was not.
fn find_or_add(rt: &RuntimeInner) -> Arc<Observer> {
    let mut all = OBSERVERS.lock();
    if let Some(o) = all.iter().find(|o| o.rt_id == rt.id()) {
        return o.clone();
    }
    let o = Arc::new(Observer::new(rt.id(), rt.threads()));
    all.push(o.clone());
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    o
}

/// Unregister `o` if nothing wants it any more.
fn release_if_unwanted(o: &Arc<Observer>) {
    if o.wanted() {
        return;
    }
    let mut all = OBSERVERS.lock();
    if let Some(i) = all.iter().position(|x| Arc::ptr_eq(x, o)) {
        all.remove(i);
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A submission of `rt` that passed its checks: attach an observation
/// record to `task` (not yet enrolled) if `rt` is observed.
#[cold]
pub(crate) fn submitted(rt: &RuntimeInner, task: &mut Arc<Task>) {
    let Some(obs) = find(rt.id()) else { return };
    // SAFETY: the task is not enrolled yet: no other thread can see its work.
    let Some(op) = (unsafe { task.work_mut() }).operation() else { return };
    let id = obs.next_id.fetch_add(1, Ordering::Relaxed);
    let trace = TaskTrace {
        id,
        name: Arc::from(op.origin().as_ref()),
        submit_ns: obs.now(),
        enrolled_ns: AtomicU64::new(0),
        current: AtomicU32::new(u32::MAX),
        enrolled: Mutex::new(Enrolled::default()),
        start_ns: AtomicU64::new(0),
        worker: AtomicU32::new(0),
        finish_ns: AtomicU64::new(0),
        device: AtomicU64::new(u64::MAX),
        issue_ns: AtomicU64::new(0),
        done_ns: AtomicU64::new(0),
        parked_ns: AtomicU64::new(0),
        obs: obs.clone(),
    };
    Task::set_trace(task, Box::new(trace));
    if task.trace().is_some() && obs.track.load(Ordering::Relaxed) {
        obs.live.lock().insert(id, task.clone() as Arc<dyn std::any::Any + Send + Sync>);
    }
}

// ---------------------------------------------------------------- tracing

/// Start recording a trace of `rt` with room for `capacity` task records
/// (an earlier recording of it is discarded).
pub(crate) fn trace_start(rt: &RuntimeInner, capacity: usize) -> crate::error::Result<()> {
    not_built("trace_start")?;
    let o = find_or_add(rt);
    let now = o.now();
    *o.rec.lock() = Some(TraceBuf { capacity, records: VecDeque::new(), dropped: 0, started_ns: now });
    Ok(())
}

/// Stop recording `rt`'s trace and return it as Chrome trace-event JSON
/// (`None` if it was not recording).
pub(crate) fn trace_stop(rt_id: usize) -> Option<String> {
    let o = find(rt_id)?;
    let buf = o.rec.lock().take();
    release_if_unwanted(&o);
    buf.map(|b| to_json(&o, &b))
}

/// Stop recording and write the trace to `path`.
pub(crate) fn trace_stop_to(rt_id: usize, path: &str) -> std::io::Result<bool> {
    match trace_stop(rt_id) {
        Some(json) => std::fs::write(path, json).map(|()| true),
        None => Ok(false),
    }
}

/// Turn pending-work tracking of `rt` on or off.
pub(crate) fn track(rt: &RuntimeInner, on: bool) -> crate::error::Result<()> {
    if on {
        not_built("track")?;
        find_or_add(rt).track.store(true, Ordering::Relaxed);
    } else if let Some(o) = find(rt.id()) {
        o.track.store(false, Ordering::Relaxed);
        release_if_unwanted(&o);
    }
    Ok(())
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Read => "read",
        Mode::Write => "write",
        Mode::Update => "update",
    }
}

fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// When predecessor `q` let `r` start: a device operation that follows one
/// of the same device starts once that one has queued its work (it queues
/// its own behind it); otherwise once `q` released its accesses.
fn release_ns(q: &Record, r: &Record) -> u64 {
    match (q.device, r.device) {
        (Some((dq, _, issue, _)), Some((dr, _, _, _))) if dq == dr => issue.max(q.start_ns),
        _ => q.finish_ns,
    }
}

/// The track of deferred and external operations waiting for their token.
const DEFERRED_TID: u64 = 999;

/// Device tracks' thread ids: after the workers'.
fn device_tid(dev: u32, stream: u32) -> u64 {
    1000 + dev as u64 * 100 + stream as u64
}

/// The trace as Chrome trace-event JSON (the object form). Task slices are
/// complete events (`ph: X`) on their worker's track, with the operation's
/// details in `args`; dependency edges are flow events (`s`/`f`); device
/// work is a slice on its stream's track; metadata names the tracks and
/// gives the capacity and the number of dropped records.
fn to_json(o: &Observer, b: &TraceBuf) -> String {
    let pid = o.rt_id;
    let mut ev: Vec<String> = Vec::new();
    ev.push(format!(
        r#"{{"name":"process_name","ph":"M","pid":{pid},"tid":0,"args":{{"name":"tensorasync runtime {pid}"}}}}"#
    ));
    ev.push(format!(r#"{{"name":"thread_name","ph":"M","pid":{pid},"tid":0,"args":{{"name":"other threads"}}}}"#));
    for w in 0..o.threads {
        ev.push(format!(r#"{{"name":"thread_name","ph":"M","pid":{pid},"tid":{},"args":{{"name":"worker {w} (ta-rt{pid}-w{w})"}}}}"#, w + 1));
        ev.push(format!(
            r#"{{"name":"thread_sort_index","ph":"M","pid":{pid},"tid":{},"args":{{"sort_index":{}}}}}"#,
            w + 1,
            w + 1
        ));
    }
    let mut device_tracks = std::collections::BTreeSet::new();
    let mut deferred_track = false;
    // Where each recorded operation ran and when it released its successors.
    let by_id: HashMap<u64, &Record> = b.records.iter().map(|r| (r.id, r)).collect();
    let mut flow = 0u64;
    for r in &b.records {
        // Ready: when the last predecessor released it (or at submission).
        let ready = r
            .preds
            .iter()
            .filter_map(|(p, _)| by_id.get(p).map(|q| release_ns(q, r)))
            .fold(r.submit_ns, u64::max)
            .min(r.start_ns.max(r.submit_ns));
        let status = status_name(r.status);
        let outcome = match r.status {
            Status::Ok => "ok",
            Status::Cancelled => "cancelled",
            _ => "failed",
        };
        let accesses: Vec<String> = r
            .accesses
            .iter()
            .map(|(t, m)| format!(r#"{{"tensor":{t},"label":"{}","mode":"{}"}}"#, esc(&o.label(*t)), mode_name(*m)))
            .collect();
        let preds: Vec<String> = r.preds.iter().map(|(p, t)| format!(r#"{{"op":{p},"tensor":{t}}}"#)).collect();
        // The host interval: up to the issue for device work, else to the end.
        let host_end = match (r.device, r.parked_ns) {
            (Some((_, _, issue, _)), _) if issue >= r.start_ns => issue,
            (_, Some(p)) if p >= r.start_ns => p,
            _ => r.end_ns,
        };
        if let Some(p) = r.parked_ns {
            // Deferred or external: the wait for its token, on a track of its own.
            deferred_track = true;
            ev.push(format!(
                r#"{{"name":"{}","cat":"deferred","ph":"X","pid":{pid},"tid":{DEFERRED_TID},"ts":{},"dur":{},"args":{{"id":{}}}}}"#,
                esc(&r.name),
                us(p),
                us(r.finish_ns.saturating_sub(p)),
                r.id
            ));
        }
        ev.push(format!(
            r#"{{"name":"{name}","cat":"task","ph":"X","pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur},"args":{{"id":{id},"outcome":"{outcome}","status":"{status}","message":"{msg}","submit_us":{sub},"enrolled_us":{enr},"ready_us":{ready},"start_us":{ts},"finish_us":{fin},"end_us":{end},"accesses":[{acc}],"preds":[{preds}]}}}}"#,
            name = esc(&r.name),
            tid = r.worker,
            ts = us(r.start_ns),
            dur = us(host_end.saturating_sub(r.start_ns)),
            id = r.id,
            msg = esc(&r.message),
            sub = us(r.submit_ns),
            enr = us(r.enrolled_ns),
            ready = us(ready),
            fin = us(r.finish_ns),
            end = us(r.end_ns),
            acc = accesses.join(","),
            preds = preds.join(","),
        ));
        if let Some((dev, stream, issue, done)) = r.device {
            let tid = device_tid(dev, stream);
            device_tracks.insert((dev, stream));
            let done = if done >= issue { done } else { r.finish_ns.max(issue) };
            ev.push(format!(
                r#"{{"name":"{}","cat":"device","ph":"X","pid":{pid},"tid":{tid},"ts":{},"dur":{},"args":{{"id":{},"device":{dev},"stream":{stream}}}}}"#,
                esc(&r.name),
                us(issue),
                us(done.saturating_sub(issue)),
                r.id
            ));
        }
        for (p, t) in &r.preds {
            let Some(q) = by_id.get(p) else { continue };
            flow += 1;
            // Bound to the enclosing slices: inside the predecessor's host
            // slice, and at the start of this one.
            let from = q.start_ns.max(release_ns(q, r).min(match q.device {
                Some((_, _, issue, _)) if issue >= q.start_ns => issue,
                _ => q.end_ns,
            }));
            ev.push(format!(r#"{{"name":"dep","cat":"dep","ph":"s","id":{flow},"pid":{pid},"tid":{},"ts":{},"args":{{"tensor":{t}}}}}"#, q.worker, us(from)));
            ev.push(format!(
                r#"{{"name":"dep","cat":"dep","ph":"f","bp":"e","id":{flow},"pid":{pid},"tid":{},"ts":{}}}"#,
                r.worker,
                us(r.start_ns)
            ));
        }
    }
    if deferred_track {
        ev.push(format!(r#"{{"name":"thread_name","ph":"M","pid":{pid},"tid":{DEFERRED_TID},"args":{{"name":"deferred and external operations (until their token is finished)"}}}}"#));
    }
    for (dev, stream) in device_tracks {
        ev.push(format!(r#"{{"name":"thread_name","ph":"M","pid":{pid},"tid":{},"args":{{"name":"device {dev} stream {stream}"}}}}"#, device_tid(dev, stream)));
    }
    format!(
        "{{\"traceEvents\":[\n{}\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{{\"library\":\"tensorasync {}\",\"runtime\":{pid},\"workers\":{},\"capacity\":{},\"recorded\":{},\"dropped\":{},\"started_us\":{}}}}}\n",
        ev.join(",\n"),
        env!("CARGO_PKG_VERSION"),
        o.threads,
        b.capacity,
        b.records.len(),
        b.dropped,
        us(b.started_ns)
    )
}

// ------------------------------------------------------------------ dump

/// Output forms of `dump`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DumpFormat {
    Text,
    Dot,
}

/// A report of every unfinished operation of runtime `rt` submitted while
/// tracking was on, and of what each waits for.
pub(crate) fn dump(rt: &RuntimeInner, format: DumpFormat) -> String {
    let pending = rt.stats().pending;
    match find(rt.id()) {
        Some(o) => dump_observer(&o, Some(pending), format),
        None => match format {
            DumpFormat::Text => format!(
                "tensorasync runtime {}: {pending} unfinished operation(s); pending-work tracking is off, so they cannot be listed \
                 (turn it on with ta_runtime_track or TA_DUMP_SIGNAL before submitting)\n",
                rt.id(),
            ),
            DumpFormat::Dot => format!("digraph tensorasync_rt{} {{\n  label=\"pending-work tracking is off\";\n}}\n", rt.id()),
        },
    }
}

/// The dump of every observed runtime (for the dump signal).
fn dump_all() -> String {
    let all: Vec<Arc<Observer>> = OBSERVERS.lock().clone();
    if all.is_empty() {
        return "tensorasync: no runtime tracks its pending work\n".to_string();
    }
    all.iter().map(|o| dump_observer(o, None, DumpFormat::Text)).collect()
}

fn dump_observer(o: &Observer, pending: Option<u64>, format: DumpFormat) -> String {
    let live: Vec<Arc<Task>> = o.live.lock().values().filter_map(|t| t.clone().downcast::<Task>().ok()).collect();
    let now = o.now();
    struct Item {
        id: u64,
        name: Arc<str>,
        submit: u64,
        start: u64,
        accesses: Vec<(u32, Mode)>,
        preds: Vec<(u64, u32)>,
    }
    let items: Vec<Item> = live
        .iter()
        .filter_map(|t| t.trace())
        .map(|tt| {
            let e = tt.enrolled.lock();
            Item {
                id: tt.id,
                name: tt.name.clone(),
                submit: tt.submit_ns,
                start: tt.start_ns.load(Ordering::Relaxed),
                accesses: e.accesses.clone(),
                preds: e.preds.clone(),
            }
        })
        .collect();
    let names: HashMap<u64, (Arc<str>, bool)> = items.iter().map(|i| (i.id, (i.name.clone(), i.start != 0))).collect();
    let secs = |ns: u64| format!("{:.3} s", ns as f64 / 1e9);
    let mut waiters: HashMap<u64, Vec<u64>> = HashMap::new();
    for i in &items {
        for (p, _) in &i.preds {
            if names.contains_key(p) {
                waiters.entry(*p).or_default().push(i.id);
            }
        }
    }
    let mut out = String::new();
    match format {
        DumpFormat::Text => {
            let all = pending.map_or(String::new(), |p| format!(", {p} pending in all"));
            let _ =
                writeln!(out, "tensorasync runtime {}: {} unfinished operation(s) observed{all}", o.rt_id, items.len());
            for i in &items {
                let waits: Vec<&(u64, u32)> = i.preds.iter().filter(|(p, _)| names.contains_key(p)).collect();
                let state = if i.start != 0 {
                    format!("RUNNING for {}", secs(now.saturating_sub(i.start)))
                } else if waits.is_empty() {
                    format!("READY (queued for a worker) for {}", secs(now.saturating_sub(i.submit)))
                } else {
                    format!("WAITING for {}", secs(now.saturating_sub(i.submit)))
                };
                let _ = writeln!(
                    out,
                    "op #{} \"{}\": {} (submitted {} ago)",
                    i.id,
                    i.name,
                    state,
                    secs(now.saturating_sub(i.submit))
                );
                let acc: Vec<String> =
                    i.accesses.iter().map(|(t, m)| format!("{} {}", o.label(*t), mode_name(*m))).collect();
                let _ = writeln!(out, "    accesses: {}", acc.join(", "));
                for (p, t) in waits {
                    let (n, running) = &names[p];
                    let _ = writeln!(
                        out,
                        "    waits for op #{p} \"{n}\" ({}) on tensor {}",
                        if *running { "running" } else { "not started" },
                        o.label(*t)
                    );
                }
                if let Some(w) = waiters.get(&i.id) {
                    let list: Vec<String> = w.iter().map(|x| format!("#{x} \"{}\"", names[x].0)).collect();
                    let _ = writeln!(out, "    waited for by: {}", list.join(", "));
                }
            }
        }
        DumpFormat::Dot => {
            let _ = writeln!(out, "digraph tensorasync_rt{} {{\n  rankdir=LR;\n  node [shape=box];", o.rt_id);
            for i in &items {
                let state = if i.start != 0 { "running" } else { "waiting" };
                let style = if i.start != 0 { ", style=filled, fillcolor=\"#ffd8a8\"" } else { "" };
                let _ = writeln!(
                    out,
                    "  op{} [label=\"#{} {}\\n{} {}\"{}];",
                    i.id,
                    i.id,
                    esc(&i.name),
                    state,
                    secs(now.saturating_sub(if i.start != 0 { i.start } else { i.submit })),
                    style
                );
            }
            for i in &items {
                for (p, t) in &i.preds {
                    if names.contains_key(p) {
                        let _ = writeln!(out, "  op{p} -> op{} [label=\"{}\"];", i.id, esc(&o.label(*t)));
                    }
                }
            }
            out.push_str("}\n");
        }
    }
    out
}

// ------------------------------------------------------------ environment

struct EnvConfig {
    trace: Option<String>,
    capacity: usize,
    track: bool,
}

fn env() -> &'static EnvConfig {
    static ENV: OnceLock<EnvConfig> = OnceLock::new();
    ENV.get_or_init(|| {
        let trace = std::env::var("TA_TRACE").ok().filter(|s| !s.is_empty());
        let capacity = std::env::var("TA_TRACE_CAPACITY").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_CAPACITY);
        let signal = std::env::var("TA_DUMP_SIGNAL").ok().filter(|s| !s.is_empty());
        let track = match signal.as_deref().map(signal_number) {
            Some(Some(sig)) => {
                dump_signal::install(sig);
                true
            }
            Some(None) => {
                eprintln!(
                    "tensorasync: TA_DUMP_SIGNAL={} is not a signal name (USR1, USR2, ...): ignored",
                    signal.unwrap_or_default()
                );
                false
            }
            None => false,
        };
        if trace.is_some() {
            // SAFETY: registering a plain function with no preconditions.
            unsafe { libc::atexit(write_env_traces_at_exit) };
        }
        EnvConfig { trace, capacity, track }
    })
}

fn signal_number(name: &str) -> Option<i32> {
    let n = name.trim().trim_start_matches("SIG");
    Some(match n {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "HUP" => libc::SIGHUP,
        "QUIT" => libc::SIGQUIT,
        "WINCH" => libc::SIGWINCH,
        "URG" => libc::SIGURG,
        _ => return n.parse().ok().filter(|&s| s > 0 && s < 65),
    })
}

/// Where runtime `n`-th traced by `TA_TRACE` writes: the path itself for the
/// first, `name.rt<id>.ext` for the others.
fn env_path(base: &str, rt_id: usize, first: bool) -> String {
    if first {
        return base.to_string();
    }
    match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.contains('/') => format!("{stem}.rt{rt_id}.{ext}"),
        _ => format!("{base}.rt{rt_id}"),
    }
}

/// A new runtime: apply `TA_TRACE` and `TA_DUMP_SIGNAL`.
pub(crate) fn runtime_created(rt: &RuntimeInner) {
    let e = env();
    if (e.track || e.trace.is_some()) && cfg!(ta_no_trace) {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!("tensorasync: TA_TRACE and TA_DUMP_SIGNAL are ignored: this build has no trace recording")
        });
        return;
    }
    if e.track {
        let _ = track(rt, true);
    }
    if let Some(base) = &e.trace {
        static TRACED: AtomicUsize = AtomicUsize::new(0);
        let first = TRACED.fetch_add(1, Ordering::Relaxed) == 0;
        let _ = trace_start(rt, e.capacity);
        if let Some(o) = find(rt.id()) {
            *o.env_path.lock() = Some(env_path(base, rt.id(), first));
        }
    }
}

/// Runtime `id` has stopped: write its `TA_TRACE` trace.
pub(crate) fn runtime_stopped(id: usize) {
    let Some(o) = find(id) else { return };
    let Some(path) = o.env_path.lock().take() else { return };
    if let Err(e) = trace_stop_to(id, &path) {
        eprintln!("tensorasync: cannot write the trace to {path}: {e}");
    }
}

extern "C" fn write_env_traces_at_exit() {
    let all: Vec<Arc<Observer>> = OBSERVERS.lock().clone();
    for o in all {
        let path = o.env_path.lock().take();
        if let Some(path) = path {
            if let Err(e) = trace_stop_to(o.rt_id, &path) {
                eprintln!("tensorasync: cannot write the trace to {path}: {e}");
            }
        }
    }
}

/// The dump signal: its handler only writes a byte to a pipe (all a signal
/// handler may do safely); a thread of its own reads the pipe and prints the
/// dump, which takes locks and allocates, to stderr. A handler is used rather
/// than `sigwait`: `sigwait` needs the signal blocked in every thread, which a
/// library started after the program's threads cannot arrange.
mod dump_signal {
    use std::sync::atomic::{AtomicI32, Ordering};

    static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

    extern "C" fn on_signal(_sig: libc::c_int) {
        let fd = WRITE_FD.load(Ordering::Relaxed);
        if fd >= 0 {
            let b = 1u8;
            // SAFETY: write(2) is async-signal-safe; the byte lives on this stack.
            // A full pipe (dumps already asked for) drops the byte, harmlessly.
            unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
        }
    }

    pub(super) fn install(sig: i32) {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            eprintln!("tensorasync: TA_DUMP_SIGNAL: cannot create a pipe: {}", std::io::Error::last_os_error());
            return;
        }
        let read_fd = fds[0];
        // The reader blocks: clear O_NONBLOCK on its end only.
        // SAFETY: fcntl on a descriptor this function owns.
        unsafe { libc::fcntl(read_fd, libc::F_SETFL, 0) };
        WRITE_FD.store(fds[1], Ordering::Relaxed);
        let spawned = std::thread::Builder::new().name("ta-dump-signal".into()).spawn(move || loop {
            let mut b = [0u8; 64];
            // SAFETY: reads into a buffer of this stack frame, of its size.
            let n = unsafe { libc::read(read_fd, b.as_mut_ptr().cast(), b.len()) };
            if n > 0 {
                let text = std::panic::catch_unwind(super::dump_all)
                    .unwrap_or_else(|_| "tensorasync: the dump failed\n".to_string());
                eprint!("{text}");
            } else if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return;
            }
        });
        if let Err(e) = spawned {
            eprintln!("tensorasync: TA_DUMP_SIGNAL: cannot start its thread: {e}");
            return;
        }
        // SAFETY: a zeroed sigaction is valid; the handler only calls write(2).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                eprintln!(
                    "tensorasync: TA_DUMP_SIGNAL: cannot install the handler: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

/// Tracing, pending-work dumps and counters of a runtime (what the C
/// library's `ta_runtime_trace_*`, `ta_runtime_track`, `ta_runtime_dump` and
/// `ta_runtime_stats` give).
impl super::Runtime {
    /// The task records a trace keeps when no capacity is given.
    ///
    /// ```
    /// use tensorasync::Runtime;
    /// let rt = Runtime::new(1).unwrap();
    /// assert!(Runtime::DEFAULT_TRACE_CAPACITY > 0);
    /// rt.trace_start(Runtime::DEFAULT_TRACE_CAPACITY).unwrap();
    /// assert!(rt.trace_stop().is_some());
    /// ```
    pub const DEFAULT_TRACE_CAPACITY: usize = DEFAULT_CAPACITY;

    /// Start recording a trace with room for `capacity` task records (an
    /// earlier recording of this runtime is discarded). Fails with
    /// `Unsupported` only in a build without trace recording.
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Runtime, Scalar, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// rt.trace_start(1024).unwrap();
    /// let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).unwrap();
    /// rt.wait_idle(None).unwrap();
    /// let json = rt.trace_stop().unwrap();
    /// assert!(json.contains("traceEvents") && json.contains("fill"));
    /// ```
    pub fn trace_start(&self, capacity: usize) -> crate::error::Result<()> {
        trace_start(self.inner(), capacity)
    }

    /// Stop recording and return the trace as Chrome trace-event JSON
    /// (`None` if the runtime was not recording).
    ///
    /// ```
    /// use tensorasync::Runtime;
    /// let rt = Runtime::new(1).unwrap();
    /// assert!(rt.trace_stop().is_none()); // not recording
    /// rt.trace_start(16).unwrap();
    /// assert!(rt.trace_stop().is_some());
    /// assert!(rt.trace_stop().is_none()); // stopped
    /// ```
    pub fn trace_stop(&self) -> Option<String> {
        trace_stop(self.id())
    }

    /// Turn tracking of pending work (what [`Runtime::dump`](super::Runtime::dump) lists) on or off.
    ///
    /// Turning it on fails with `Unsupported` only in a build without trace
    /// recording.
    ///
    /// ```
    /// use tensorasync::{DumpFormat, Runtime};
    /// let rt = Runtime::new(1).unwrap();
    /// assert!(rt.dump(DumpFormat::Dot).contains("tracking is off"));
    /// rt.track(true).unwrap();
    /// assert!(!rt.dump(DumpFormat::Dot).contains("tracking is off"));
    /// ```
    pub fn track(&self, on: bool) -> crate::error::Result<()> {
        track(self.inner(), on)
    }

    /// The pending work of the runtime, as text or as a Graphviz graph.
    ///
    /// ```
    /// use tensorasync::{ops, DumpFormat, Mode, Order, Runtime, Status, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// rt.track(true).unwrap();
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let (token, _) = ops::external("held_open", &[(&t, Mode::Update)], Submit::on(&rt)).unwrap();
    /// token.started().wait(None).unwrap();
    /// assert!(rt.dump(DumpFormat::Text).contains("held_open"));
    /// assert!(rt.dump(DumpFormat::Dot).starts_with("digraph"));
    /// token.finish(Status::Ok, None).unwrap();
    /// ```
    pub fn dump(&self, format: DumpFormat) -> String {
        dump(self.inner(), format)
    }

    /// A snapshot of the runtime's counters. A worker's busy time and the
    /// tasks it took from the queue are added when its busy spell ends; after
    /// [`wait_idle`](Self::wait_idle) every spell of the work it waited for is counted.
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Runtime, Scalar, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Default::default()).unwrap();
    /// for _ in 0..3 {
    ///     ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).unwrap();
    /// }
    /// rt.wait_idle(None).unwrap();
    /// let s = rt.stats();
    /// assert_eq!((s.submitted, s.completed, s.failed, s.pending), (3, 3, 0, 0));
    /// assert_eq!(s.busy_ns.len(), 2); // one per worker
    /// ```
    pub fn stats(&self) -> super::stats::Stats {
        self.inner().stats()
    }
}

/// How a trace names a status (see [`set_trace_status_names`]).
static STATUS_NAMES: std::sync::OnceLock<fn(Status) -> &'static str> = std::sync::OnceLock::new();

/// Name statuses in traces with `names` instead of the variant names (the
/// C library names them `TA_STATUS_*`). The first call decides.
pub fn set_trace_status_names(names: fn(Status) -> &'static str) {
    let _ = STATUS_NAMES.set(names);
}

fn status_name(s: Status) -> std::borrow::Cow<'static, str> {
    match STATUS_NAMES.get() {
        Some(f) => f(s).into(),
        None => format!("{s:?}").into(),
    }
}
