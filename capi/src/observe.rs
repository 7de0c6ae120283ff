//! Observability: trace recording, the pending-work dump and the counters
//! of a runtime.

use std::ffi::CStr;
use std::os::raw::c_char;

use super::{arg, guard, need, put, ta_error, ta_runtime, ta_status};
use ta::DumpFormat;
use ta::{Error, Status};

/// Options of `ta_runtime_trace_start`. Zero-initialise it and set
/// `struct_size` to `sizeof(ta_trace_options)`: later versions of the
/// library may add fields at the end, read only when `struct_size` covers them.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_trace_options {
    /// sizeof(ta_trace_options).
    pub struct_size: u32,
    /// Reserved, must be 0.
    pub flags: u32,
    /// How many operations the trace keeps (0: the default, 262144; each
    /// takes about 200 bytes while recording, 600 in the file). When it
    /// is full, the oldest operation's record is dropped to make room; the
    /// number dropped is written into the trace (`otherData.dropped`).
    pub capacity: u64,
}

/// Text form of `ta_runtime_dump` / `ta_runtime_dump_string`.
pub const TA_DUMP_TEXT: u32 = 0;
/// Graphviz DOT form of `ta_runtime_dump` / `ta_runtime_dump_string`: one
/// node per unfinished operation, one edge per wait (labelled with the tensor).
pub const TA_DUMP_DOT: u32 = 1;

/// Counters of a runtime, filled by `ta_runtime_stats`. Set `struct_size` to
/// `sizeof(ta_stats)` before the call: later versions of the library
/// may add fields at the end, written only when `struct_size` covers them.
/// Operations are the submissions that were accepted (a submission that
/// fails with an error status is not counted): library operations, kernels,
/// external operations and host accesses (`ta_tensor_acquire`); waits,
/// readiness events and the library's own bookkeeping are not operations. All counts are since the
/// runtime was created.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_stats {
    /// sizeof(ta_stats), set by the caller.
    pub struct_size: u32,
    /// Number of worker threads.
    pub threads: u32,
    /// Operations submitted.
    pub tasks_submitted: u64,
    /// Operations completed, whatever their status (so `tasks_submitted -
    /// tasks_completed` are pending).
    pub tasks_completed: u64,
    /// Operations that ran (or were about to run) and completed with an
    /// error status other than TA_STATUS_CANCELLED: a failing kernel or
    /// backend, or an input poisoned by an earlier failure.
    pub tasks_failed: u64,
    /// Operations completed with TA_STATUS_CANCELLED (a shutdown with
    /// TA_SHUTDOWN_CANCEL reached them before they ran).
    pub tasks_cancelled: u64,
    /// Operations a worker took from the runtime's shared ready queue. The
    /// others ran inline: on the worker whose finished operation made them
    /// ready, right after it (a dependency chain stays on one worker), or on
    /// a device's completion path.
    pub steals: u64,
    /// Operations ready to run and waiting in the shared ready queue now.
    pub queue_depth: u64,
    /// Operations submitted and not yet completed, now.
    pub pending: u64,
    /// The largest number of pending operations seen. The count is sampled,
    /// not followed: at every 1024th submission of each submitting thread,
    /// and at every call of this function. So it is exact for a program that
    /// asks for the counters while its peak is pending, and otherwise may
    /// miss a short peak by up to 1023 submissions per submitting thread.
    pub peak_pending: u64,
    /// Sum over the workers of the time they spent running operations, in
    /// nanoseconds (per worker: `ta_runtime_worker_busy_ns`). A worker counts
    /// a busy spell from when it finds work in the ready queue until it finds
    /// the queue empty again, measured without reading the clock when it
    /// finds work: a spell may include up to about 15 microseconds of the
    /// idle time before it, so a worker whose idle gaps are all shorter than
    /// that (a steady stream of tiny operations) counts nearly all its time
    /// as busy. A spell is added when it ends (as are its `steals`), so a
    /// reading taken while operations run leaves out the spells in
    /// progress; after `ta_runtime_wait_idle` every spell is counted.
    pub busy_ns: u64,
}

/// The first version's size of `ta_stats`: smaller structs are refused.
const STATS_V1: usize = std::mem::size_of::<ta_stats>();
/// The first version's size of `ta_trace_options`.
const TRACE_OPTIONS_V1: usize = std::mem::size_of::<ta_trace_options>();

/// Start recording a trace of everything the runtime runs from now on: for
/// each operation its worker, start and end, submission time, the time it
/// became ready (when the last operation it waited for released it), its
/// name, the tensors it accesses and how, the operations it waited for, and
/// its outcome; device work as slices on a track per device stream.
/// `options` may be NULL (defaults). A recording in progress is discarded
/// and restarted. Operations submitted before the start are not recorded.
/// `ta_runtime_trace_stop` writes the trace.
///
/// For unmodified programs, the environment variable `TA_TRACE=path` records
/// every runtime from its creation (`TA_TRACE_CAPACITY` sets the capacity):
/// the first runtime's trace is written to `path` when it is shut down or
/// freed (the default runtime's at process exit), later runtimes' to
/// `path` with `.rt<id>` inserted before the extension.
///
/// A build of the library without the recording code (made only to measure
/// what that code costs, see `scripts/ab-trace-off.sh`) fails here with
/// `TA_STATUS_UNSUPPORTED`.
#[no_mangle]
pub extern "C" fn ta_runtime_trace_start(
    runtime: *const ta_runtime,
    options: *const ta_trace_options,
    error: *mut *mut ta_error,
) -> ta_status {
    const ORIGIN: &str = "ta_runtime_trace_start";
    guard(ORIGIN, error, || {
        let rt = arg(runtime, ORIGIN, "runtime")?;
        let mut capacity = ta::Runtime::DEFAULT_TRACE_CAPACITY as u64;
        if !options.is_null() {
            // SAFETY: a non-NULL options pointer points to at least its
            // struct_size field, and to struct_size bytes (checked below).
            let size = unsafe { (*options).struct_size } as usize;
            if size < TRACE_OPTIONS_V1 {
                return Err(Error::new(
                    Status::InvalidArgument,
                    ORIGIN,
                    format!("options->struct_size is {size}, less than sizeof(ta_trace_options) ({TRACE_OPTIONS_V1})"),
                ));
            }
            // SAFETY: as above; the first version's fields are covered.
            let o = unsafe { *options };
            if o.flags != 0 {
                return Err(Error::new(
                    Status::InvalidArgument,
                    ORIGIN,
                    format!("options->flags is {}; no flags are defined, it must be 0", o.flags),
                ));
            }
            if o.capacity != 0 {
                capacity = o.capacity;
            }
        }
        rt.trace_start(usize::try_from(capacity).unwrap_or(usize::MAX))
    })
}

/// Stop recording and write the trace to the file at `path` (created or
/// replaced) as Chrome trace-event JSON, which chrome://tracing and the
/// Perfetto UI (ui.perfetto.dev) open; `scripts/trace_gantt.py` draws it as
/// a PNG. `path` NULL discards the trace. Operations still running are not
/// in it. Fails with TA_STATUS_INVALID_ARGUMENT if the runtime is not
/// recording (or its recording was already written by `TA_TRACE`), and with
/// TA_STATUS_INTERNAL (message: the system's reason) if the file cannot be
/// written.
#[no_mangle]
pub extern "C" fn ta_runtime_trace_stop(
    runtime: *const ta_runtime,
    path: *const c_char,
    error: *mut *mut ta_error,
) -> ta_status {
    const ORIGIN: &str = "ta_runtime_trace_stop";
    guard(ORIGIN, error, || {
        let rt = arg(runtime, ORIGIN, "runtime")?;
        let path = if path.is_null() {
            None
        } else {
            // SAFETY: a non-NULL path is a NUL-terminated string (C contract).
            let s = unsafe { CStr::from_ptr(path) };
            Some(
                s.to_str()
                    .map_err(|_| Error::new(Status::InvalidArgument, ORIGIN, "path is not valid UTF-8"))?
                    .to_string(),
            )
        };
        let json = rt
            .trace_stop()
            .ok_or_else(|| Error::new(Status::InvalidArgument, ORIGIN, "the runtime is not recording a trace"))?;
        if let Some(p) = path {
            std::fs::write(&p, json)
                .map_err(|e| Error::new(Status::Internal, ORIGIN, format!("cannot write the trace to {p}: {e}")))?;
        }
        Ok(())
    })
}

/// Turn tracking of pending work on (`enable` != 0) or off. While it is on,
/// every operation submitted is registered until it completes, so that
/// `ta_runtime_dump` can list it; this costs up to about a microsecond per
/// operation (off, nothing). `TA_DUMP_SIGNAL` also turns it on. Operations
/// submitted while it was off are not listed. Turning it on fails with
/// `TA_STATUS_UNSUPPORTED` in a build without the recording code (see
/// `ta_runtime_trace_start`).
#[no_mangle]
pub extern "C" fn ta_runtime_track(runtime: *const ta_runtime, enable: i32) -> ta_status {
    const ORIGIN: &str = "ta_runtime_track";
    guard(ORIGIN, std::ptr::null_mut(), || {
        let rt = arg(runtime, ORIGIN, "runtime")?;
        rt.track(enable != 0)
    })
}

fn dump_format(format: u32, origin: &'static str) -> Result<DumpFormat, Error> {
    match format {
        TA_DUMP_TEXT => Ok(DumpFormat::Text),
        TA_DUMP_DOT => Ok(DumpFormat::Dot),
        f => Err(Error::new(
            Status::InvalidArgument,
            origin,
            format!("unknown dump format {f} (TA_DUMP_TEXT or TA_DUMP_DOT)"),
        )),
    }
}

/// Write a report of the runtime's unfinished operations to the file
/// descriptor `fd` (e.g. 2 for stderr). TA_DUMP_TEXT gives, per operation:
/// its number and name; whether it is RUNNING (and for how long), READY
/// (queued for a worker) or WAITING (and for how long since submission);
/// the tensors it accesses and how; each earlier unfinished operation it
/// waits for and on which tensor; and the operations that wait for it.
/// TA_DUMP_DOT gives the same graph in Graphviz DOT. Only operations
/// submitted while tracking was on are listed (see `ta_runtime_track`);
/// otherwise the report gives their number only. Never blocks on running
/// operations. TA_STATUS_INTERNAL if the descriptor cannot be written.
///
/// For unmodified programs, `TA_DUMP_SIGNAL=USR2` (or USR1, HUP, QUIT,
/// WINCH, URG, or a number) tracks every runtime from its creation and
/// prints this report for each to stderr whenever the process receives that
/// signal (the report is made by a thread of the library, not in the signal
/// handler).
#[no_mangle]
pub extern "C" fn ta_runtime_dump(
    runtime: *const ta_runtime,
    format: u32,
    fd: i32,
    error: *mut *mut ta_error,
) -> ta_status {
    const ORIGIN: &str = "ta_runtime_dump";
    guard(ORIGIN, error, || {
        let rt = arg(runtime, ORIGIN, "runtime")?;
        let text = rt.dump(dump_format(format, ORIGIN)?);
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            // SAFETY: writes from a live buffer of `rest.len()` bytes.
            let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::new(Status::Internal, ORIGIN, format!("cannot write to file descriptor {fd}: {e}")));
            }
            rest = &rest[n as usize..];
        }
        Ok(())
    })
}

/// The report of `ta_runtime_dump` as a NUL-terminated string in `buf`
/// (`cap` bytes). `*len_out` receives the report's full length (without the
/// NUL). If `cap` is not larger than that, the report is cut to `cap - 1`
/// bytes (still NUL-terminated; nothing is written if `cap` is 0) and the
/// status is TA_STATUS_BUFFER_TOO_SMALL: call again with a larger buffer
/// (the report may have grown meanwhile). `buf` may be NULL when `cap` is 0.
#[no_mangle]
pub extern "C" fn ta_runtime_dump_string(
    runtime: *const ta_runtime,
    format: u32,
    buf: *mut c_char,
    cap: usize,
    len_out: *mut usize,
    error: *mut *mut ta_error,
) -> ta_status {
    const ORIGIN: &str = "ta_runtime_dump_string";
    guard(ORIGIN, error, || {
        let rt = arg(runtime, ORIGIN, "runtime")?;
        need(len_out, ORIGIN, "len_out")?;
        if cap > 0 {
            need(buf, ORIGIN, "buf")?;
        }
        let text = rt.dump(dump_format(format, ORIGIN)?);
        let bytes = text.as_bytes();
        if cap > 0 {
            let n = bytes.len().min(cap - 1);
            // SAFETY: `buf` has room for `cap` bytes (C contract); n + 1 <= cap.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        put(len_out, bytes.len());
        if cap <= bytes.len() {
            return Err(Error::new(
                Status::BufferTooSmall,
                ORIGIN,
                format!("the report is {} bytes long and the buffer holds {cap} with its NUL", bytes.len()),
            ));
        }
        Ok(())
    })
}

/// Fill `*stats_out` with the runtime's counters (see `ta_stats`
/// for each field). `stats_out->struct_size` must be set to
/// `sizeof(ta_stats)` (at least the first version's size:
/// otherwise TA_STATUS_INVALID_ARGUMENT); it is left as it is. Reading the
/// counters does not stop or slow the runtime.
#[no_mangle]
pub extern "C" fn ta_runtime_stats(runtime: *const ta_runtime, stats_out: *mut ta_stats) -> ta_status {
    const ORIGIN: &str = "ta_runtime_stats";
    guard(ORIGIN, std::ptr::null_mut(), || {
        let rt = arg(runtime, ORIGIN, "runtime")?;
        need(stats_out, ORIGIN, "stats_out")?;
        // SAFETY: non-NULL, and the caller's struct starts with struct_size.
        let size = unsafe { (*stats_out).struct_size } as usize;
        if size < STATS_V1 {
            return Err(Error::new(
                Status::InvalidArgument,
                ORIGIN,
                format!("stats_out->struct_size is {size}, less than sizeof(ta_stats) ({STATS_V1})"),
            ));
        }
        let s = rt.stats();
        let out = ta_stats {
            struct_size: size as u32,
            threads: rt.threads() as u32,
            tasks_submitted: s.submitted,
            tasks_completed: s.completed,
            tasks_failed: s.failed,
            tasks_cancelled: s.cancelled,
            steals: s.steals,
            queue_depth: s.queue_depth,
            pending: s.pending,
            peak_pending: s.peak_pending,
            busy_ns: s.busy_ns.iter().sum(),
        };
        // Only the fields this version knows are written (a larger struct
        // from a newer header keeps its later fields).
        put(stats_out, out);
        Ok(())
    })
}

/// The busy time of each worker, in nanoseconds (see
/// `ta_stats.busy_ns`): `busy_out[k]` for worker k
/// (`ta-rt<id>-w<k>`), for k below the smaller of `cap` and the number of
/// workers; `*count_out` receives the number of workers. `busy_out` may be
/// NULL when `cap` is 0 (to ask for the count).
#[no_mangle]
pub extern "C" fn ta_runtime_worker_busy_ns(
    runtime: *const ta_runtime,
    busy_out: *mut u64,
    cap: usize,
    count_out: *mut usize,
) -> ta_status {
    const ORIGIN: &str = "ta_runtime_worker_busy_ns";
    guard(ORIGIN, std::ptr::null_mut(), || {
        let rt = arg(runtime, ORIGIN, "runtime")?;
        need(count_out, ORIGIN, "count_out")?;
        if cap > 0 {
            need(busy_out, ORIGIN, "busy_out")?;
        }
        let busy = rt.stats().busy_ns;
        for (k, b) in busy.iter().take(cap).enumerate() {
            // SAFETY: `busy_out` has room for `cap` values (C contract); k < cap.
            unsafe { busy_out.add(k).write(*b) };
        }
        put(count_out, busy.len());
        Ok(())
    })
}
