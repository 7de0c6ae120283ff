package tensorasync

// #include <stdint.h>
// #include <tensorasync.h>
// uint64_t ta_go_event_poll(const ta_event *event);
// ta_status ta_go_event_wait_here(const ta_event *event, int64_t timeout_ns, ta_error **error);
import "C"

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Event is the completion of one submitted operation.
type Event struct {
	h *C.ta_event

	mu   sync.Mutex
	done chan struct{} // made by the first Done
	err  error         // the outcome, once done is closed
}

func newEvent(h *C.ta_event) *Event {
	e := &Event{h: h}
	runtime.SetFinalizer(e, (*Event).Close)
	return e
}

// Poll reports whether the operation has completed, and its outcome if so.
func (e *Event) Poll() (bool, error) {
	st := C.ta_event_poll(e.h)
	runtime.KeepAlive(e)
	if st == C.TA_STATUS_PENDING {
		return false, nil
	}
	return true, e.outcome(st)
}

// outcome is the final error of a completed operation, from its error object.
func (e *Event) outcome(st C.ta_status) error {
	if st == C.TA_STATUS_OK {
		return nil
	}
	var cerr *C.ta_error
	if C.ta_event_error(e.h, &cerr) != C.TA_STATUS_OK || cerr == nil {
		runtime.KeepAlive(e)
		return check(st) // a handle status: the event itself is unusable
	}
	runtime.KeepAlive(e)
	return takeError(st, cerr)
}

// Done returns a channel that is closed when the operation completes (for
// select statements). The outcome is then Err's.
func (e *Event) Done() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done != nil {
		return e.done
	}
	done := make(chan struct{})
	e.done = done
	err := whenDone(e.h, func(outcome error) {
		e.mu.Lock()
		e.err = outcome
		e.mu.Unlock()
		close(done)
	})
	runtime.KeepAlive(e)
	if err != nil {
		e.err = err
		close(done)
	}
	return done
}

// Err is the outcome after Done is closed (nil before).
func (e *Event) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Wait waits until the operation completes or ctx ends, and returns the
// operation's error, or ctx.Err(). The waiting goroutine blocks in a select,
// not in C: cancellation and deadlines take effect at once, and no OS thread
// is held.
//
// Inside a Go kernel (Submit) the wait goes through the library instead, on
// the worker the kernel runs on: waiting on an operation that needs the
// kernel to finish (one on a tensor the kernel accesses) fails at once with
// ErrWouldDeadlock, and while the wait lasts the worker runs queued work (so
// a kernel on a one-worker runtime can wait for work it submitted). ctx is
// checked between slices of at most waitSlice.
func (e *Event) Wait(ctx context.Context) error {
	r := C.ta_go_event_poll(e.h)
	runtime.KeepAlive(e)
	st := C.ta_status(r & 0xffffffff)
	if r>>32 != 0 {
		return e.waitInKernel(ctx)
	}
	if st != C.TA_STATUS_PENDING {
		return e.outcome(st)
	}
	select {
	case <-e.Done():
		return e.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitSlice is the longest blocking wait in C inside a kernel between two
// looks at the context.
const waitSlice = 10 * time.Millisecond

// waitInKernel is Wait from inside a Go kernel: the goroutine is locked to a
// library worker, so a wait in C is refused if it would deadlock, and helps
// run other work otherwise.
func (e *Event) waitInKernel(ctx context.Context) error {
	var cerr *C.ta_error
	st := C.ta_go_event_wait_here(e.h, 0, &cerr) // refuses a deadlock at once
	for st == C.TA_STATUS_TIMEOUT {
		slice := waitSlice
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
				return context.DeadlineExceeded
			}
			if left < slice {
				slice = left
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		st = C.ta_go_event_wait_here(e.h, C.int64_t(slice), &cerr)
	}
	runtime.KeepAlive(e)
	if st == C.TA_STATUS_WOULD_DEADLOCK {
		if cerr == nil {
			return &Error{Status: StatusWouldDeadlock, Code: int64(StatusWouldDeadlock), Origin: "event_wait",
				Message: "the awaited operation waits for the kernel that is waiting on it"}
		}
		return takeError(st, cerr)
	}
	if cerr != nil {
		C.ta_error_free(cerr)
	}
	return e.outcome(st)
}

// Close frees the event handle (the operation is not affected). Idempotent.
func (e *Event) Close() error {
	if e == nil || e.h == nil {
		return nil
	}
	h := e.h
	e.h = nil
	runtime.SetFinalizer(e, nil)
	return check(C.ta_event_free(h))
}
