package tensorasync

// #include <tensorasync.h>
import "C"

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
)

// Completion is one entry of a completion queue: the tag given at submission
// and the operation's outcome (nil, or an *Error).
type Completion struct {
	Tag uint64
	Err error
}

// CompletionQueue receives the completions of operations submitted with
// WithCompletionQueue (or registered with Event.Notify) and delivers them on
// the channel C. A single goroutine per queue reads them; it is parked in Go's
// network poller on the queue's file descriptor between completions, so no OS
// thread is blocked while nothing completes.
type CompletionQueue struct {
	// C delivers the completions, oldest first. It is closed by Close.
	C <-chan Completion

	h       *C.ta_cq
	file    *os.File
	stop    chan struct{} // closed by Close: deliver no more
	done    chan struct{} // closed when the reader goroutine has stopped
	closeMu sync.Mutex
	closed  bool
}

// NewCompletionQueue creates a queue whose channel has the given buffer size.
// Close it when done: its reader goroutine runs until then.
func NewCompletionQueue(buffer int) (*CompletionQueue, error) {
	ch := make(chan Completion, buffer)
	stop := make(chan struct{})
	q, err := newCQ(stop, func(c Completion) {
		// Close must not wait for a reader of C that may never come:
		// once it is called, undelivered entries are dropped.
		select {
		case <-stop:
		default:
			select {
			case ch <- c:
			case <-stop:
			}
		}
	}, func() { close(ch) })
	if err != nil {
		return nil, err
	}
	q.C = ch
	// No finalizer: the reader goroutine keeps the queue reachable until
	// Close stops it.
	return q, nil
}

// newCQ creates a queue whose reader goroutine calls deliver for each entry,
// and finish when it stops; Close closes stop before it waits for the reader,
// so a deliver that may block must give up when stop is closed.
func newCQ(stop chan struct{}, deliver func(Completion), finish func()) (*CompletionQueue, error) {
	var h *C.ta_cq
	var cerr *C.ta_error
	if err := takeError(C.ta_cq_new(&h, &cerr), cerr); err != nil {
		return nil, err
	}
	var fd C.int
	if err := check(C.ta_cq_fd(h, &fd)); err != nil {
		C.ta_cq_free(h)
		return nil, err
	}
	// The descriptor belongs to the queue: poll a duplicate, which os.File
	// may close. The eventfd is non-blocking already, so os.NewFile registers
	// it with the network poller.
	dup, err := syscall.Dup(int(fd))
	if err != nil {
		C.ta_cq_free(h)
		return nil, err
	}
	syscall.CloseOnExec(dup)
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		C.ta_cq_free(h)
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "tensorasync-cq")
	q := &CompletionQueue{h: h, file: f, stop: stop, done: make(chan struct{})}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		C.ta_cq_free(h)
		return nil, err
	}
	go q.reader(rc, deliver, finish)
	return q, nil
}

func (q *CompletionQueue) reader(rc syscall.RawConn, deliver func(Completion), finish func()) {
	defer close(q.done)
	defer finish()
	var buf [64]C.ta_completion
	var batch []Completion
	for {
		batch = batch[:0]
		// Read calls the function until it returns true, parking the
		// goroutine in the poller while the descriptor is not readable. The
		// descriptor is readable exactly while entries are pending, and
		// ta_cq_poll clears it when it takes the last one.
		err := rc.Read(func(uintptr) bool {
			var n C.size_t
			C.ta_cq_poll(q.h, &buf[0], C.size_t(len(buf)), &n)
			for i := 0; i < int(n); i++ {
				batch = append(batch, Completion{
					Tag: uint64(buf[i].tag),
					Err: takeError(buf[i].status, buf[i].error),
				})
			}
			return n > 0
		})
		for _, c := range batch {
			deliver(c)
		}
		if err != nil {
			return
		}
	}
}

// Notify makes the queue receive {tag, outcome} when the event's operation
// completes (at once if it has).
func (e *Event) Notify(q *CompletionQueue, tag uint64) error {
	err := check(C.ta_event_notify(e.h, q.h, C.uint64_t(tag)))
	runtime.KeepAlive(e)
	runtime.KeepAlive(q)
	return err
}

// Close stops delivery, closes C and frees the queue. Entries not yet
// received from C are dropped (Close never waits for a reader of C).
// Operations still holding the queue keep it alive until they complete;
// their entries are dropped. Afterwards WithCompletionQueue(q, ...) and
// Notify(q, ...) fail with ErrNullHandle. Close is idempotent.
func (q *CompletionQueue) Close() error {
	q.closeMu.Lock()
	defer q.closeMu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	close(q.stop)  // a reader blocked sending on C gives up
	q.file.Close() // wakes the reader with os.ErrClosed
	<-q.done
	// Free the error objects of entries that were never delivered.
	var buf [64]C.ta_completion
	for {
		var n C.size_t
		C.ta_cq_poll(q.h, &buf[0], C.size_t(len(buf)), &n)
		for i := 0; i < int(n); i++ {
			C.ta_error_free(buf[i].error)
		}
		if n == 0 {
			break
		}
	}
	h := q.h
	q.h = nil
	return check(C.ta_cq_free(h))
}

// The process-wide dispatcher: one internal queue whose entries complete
// Event.Done channels and run the binding's own clean-ups (freeing staging
// buffers, deleting kernel handles) once an operation has completed.
var dispatch struct {
	once    sync.Once
	err     error
	q       *CompletionQueue
	mu      sync.Mutex
	next    uint64
	actions map[uint64]func(error)
}

func dispatcher() (*CompletionQueue, error) {
	dispatch.once.Do(func() {
		dispatch.actions = make(map[uint64]func(error))
		dispatch.q, dispatch.err = newCQ(make(chan struct{}), func(c Completion) {
			dispatch.mu.Lock()
			f := dispatch.actions[c.Tag]
			delete(dispatch.actions, c.Tag)
			dispatch.mu.Unlock()
			if f != nil {
				f(c.Err)
			}
		}, func() {})
	})
	return dispatch.q, dispatch.err
}

// whenDone runs f(outcome) on the dispatcher goroutine once ev's operation
// has completed. f must not block.
func whenDone(ev *C.ta_event, f func(error)) error {
	q, err := dispatcher()
	if err != nil {
		return err
	}
	dispatch.mu.Lock()
	dispatch.next++
	tag := dispatch.next
	dispatch.actions[tag] = f
	dispatch.mu.Unlock()
	if err := check(C.ta_event_notify(ev, q.h, C.uint64_t(tag))); err != nil {
		dispatch.mu.Lock()
		delete(dispatch.actions, tag)
		dispatch.mu.Unlock()
		return err
	}
	return nil
}

var errClosedEvent = errors.New("tensorasync: event is closed")
