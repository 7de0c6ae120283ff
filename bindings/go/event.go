package tensorasync

// #include <tensorasync.h>
import "C"

import (
	"context"
	"runtime"
	"sync"
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
func (e *Event) Wait(ctx context.Context) error {
	if ok, err := e.Poll(); ok {
		return err
	}
	select {
	case <-e.Done():
		return e.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
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
