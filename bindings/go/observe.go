package tensorasync

// #include <stdlib.h>
// #include <tensorasync.h>
import "C"

import (
	"runtime"
	"unsafe"
)

// Observability: a runtime records traces of what it runs (Chrome
// trace-event JSON, for chrome://tracing and ui.perfetto.dev), reports its
// unfinished operations and what each waits for (Dump), and keeps counters
// (Stats). Host mappings (Tensor.Map) run on the default runtime, so observe
// DefaultRuntime() for them.

// TraceStart starts recording a trace of every operation the runtime runs
// from now on: for each its worker, submission, ready, start and end times,
// its name, the tensors it accesses and how, the operations it waited for
// and its outcome. capacity is how many operations the trace keeps (0: the
// library's default, 262144); when it is full the oldest are dropped (their
// number is in the trace's otherData.dropped). A recording in progress is
// discarded and restarted. TraceStop writes the trace.
func (r *Runtime) TraceStart(capacity uint64) error {
	opts := new(C.ta_trace_options)
	opts.struct_size = C.uint32_t(unsafe.Sizeof(*opts))
	opts.capacity = C.uint64_t(capacity)
	var cerr *C.ta_error
	st := C.ta_runtime_trace_start(r.h, opts, &cerr)
	runtime.KeepAlive(r)
	return takeError(st, cerr)
}

// TraceStop stops recording and writes the trace to the file at path
// (created or replaced) as Chrome trace-event JSON; an empty path discards
// it. Operations still running are not in it. It fails with
// ErrInvalidArgument if the runtime is not recording, and with ErrInternal
// (message: the system's reason) if the file cannot be written.
func (r *Runtime) TraceStop(path string) error {
	var cpath *C.char
	if path != "" {
		cpath = C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
	}
	var cerr *C.ta_error
	st := C.ta_runtime_trace_stop(r.h, cpath, &cerr)
	runtime.KeepAlive(r)
	return takeError(st, cerr)
}

// Track turns tracking of pending work on or off. While it is on, every
// operation submitted is registered until it completes, so that Dump can
// name it (about a microsecond per operation; off, nothing). Operations
// submitted while it was off are not listed.
func (r *Runtime) Track(enable bool) error {
	st := C.ta_runtime_track(r.h, cFlag(enable))
	runtime.KeepAlive(r)
	return check(st)
}

// DumpFormat selects the form of Dump's report: DumpText or DumpDot.
type DumpFormat uint32

// Dump reports the runtime's unfinished operations. DumpText gives, per
// operation, its number and name; whether it is RUNNING, READY (queued for
// a worker) or WAITING, and for how long; the tensors it accesses and how;
// each earlier unfinished operation it waits for and on which tensor; and
// the operations that wait for it. DumpDot gives the same graph in Graphviz
// DOT. Only operations submitted while Track was on are listed. It never
// blocks on running operations.
func (r *Runtime) Dump(format DumpFormat) (string, error) {
	defer runtime.KeepAlive(r)
	capacity := 4096
	for {
		buf := (*C.char)(C.malloc(C.size_t(capacity)))
		var n C.size_t
		var cerr *C.ta_error
		st := C.ta_runtime_dump_string(r.h, C.uint32_t(format), buf, C.size_t(capacity), &n, &cerr)
		if st == C.TA_STATUS_BUFFER_TOO_SMALL {
			C.free(unsafe.Pointer(buf))
			if cerr != nil {
				C.ta_error_free(cerr)
			}
			// The report may grow between the calls: leave some room.
			capacity *= 2
			if want := int(n) + int(n)/4 + 256; want > capacity {
				capacity = want
			}
			continue
		}
		if err := takeError(st, cerr); err != nil {
			C.free(unsafe.Pointer(buf))
			return "", err
		}
		s := C.GoStringN(buf, C.int(n))
		C.free(unsafe.Pointer(buf))
		return s, nil
	}
}

// Stats holds a runtime's counters. Operations are the submissions that
// were accepted: library operations, kernels, external operations and host
// mappings; waits and readiness events are not operations. Counts are since
// the runtime was created.
type Stats struct {
	// Threads is the number of worker threads.
	Threads uint32
	// TasksSubmitted counts operations submitted.
	TasksSubmitted uint64
	// TasksCompleted counts operations completed, whatever their status
	// (TasksSubmitted - TasksCompleted are pending).
	TasksCompleted uint64
	// TasksFailed counts operations that completed with an error other
	// than a cancellation: a failing kernel or backend, or an input
	// poisoned by an earlier failure.
	TasksFailed uint64
	// TasksCancelled counts operations cancelled before they ran (a
	// shutdown with ShutdownCancel).
	TasksCancelled uint64
	// Steals counts operations a worker took from the shared ready queue
	// (the others ran inline, right after the operation that made them
	// ready, or on a device's completion path).
	Steals uint64
	// QueueDepth is the number of operations ready and waiting in the
	// shared ready queue now.
	QueueDepth uint64
	// Pending is the number of operations submitted and not yet completed, now.
	Pending uint64
	// PeakPending is the largest number of pending operations seen,
	// sampled at every 1024th submission of each submitting thread and at
	// every Stats call.
	PeakPending uint64
	// BusyNs is the sum over the workers of the time they spent running
	// operations, in nanoseconds.
	BusyNs uint64
}

// Stats reads the runtime's counters. It does not stop or slow the runtime.
func (r *Runtime) Stats() (Stats, error) {
	s := new(C.ta_stats)
	s.struct_size = C.uint32_t(unsafe.Sizeof(*s))
	st := C.ta_runtime_stats(r.h, s)
	runtime.KeepAlive(r)
	if err := check(st); err != nil {
		return Stats{}, err
	}
	return Stats{
		Threads:        uint32(s.threads),
		TasksSubmitted: uint64(s.tasks_submitted),
		TasksCompleted: uint64(s.tasks_completed),
		TasksFailed:    uint64(s.tasks_failed),
		TasksCancelled: uint64(s.tasks_cancelled),
		Steals:         uint64(s.steals),
		QueueDepth:     uint64(s.queue_depth),
		Pending:        uint64(s.pending),
		PeakPending:    uint64(s.peak_pending),
		BusyNs:         uint64(s.busy_ns),
	}, nil
}
