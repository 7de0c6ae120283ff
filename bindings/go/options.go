package tensorasync

// #include <tensorasync.h>
import "C"

// Option configures one submission.
type Option func(*submitConfig)

type submitConfig struct {
	opts  C.ta_submit
	set   bool
	event **Event
	keep  []any // Go objects to keep reachable until submission returns
}

// WithRuntime runs the operation on rt instead of the default runtime.
func WithRuntime(rt *Runtime) Option {
	return func(c *submitConfig) { c.opts.runtime = rt.h; c.set = true; c.keep = append(c.keep, rt) }
}

// WithCompletionQueue reports the operation's completion as {tag, outcome} on q.
func WithCompletionQueue(q *CompletionQueue, tag uint64) Option {
	return func(c *submitConfig) {
		c.opts.cq = q.h
		c.opts.cq_tag = C.uint64_t(tag)
		c.set = true
		c.keep = append(c.keep, q)
	}
}

// WithBackends restricts the backends that may run the operation.
func WithBackends(bs ...Backend) Option {
	return func(c *submitConfig) {
		for _, b := range bs {
			c.opts.backends |= 1 << uint32(b)
		}
		c.set = true
	}
}

// WithTransfer copies inputs of another domain to the output's domain first.
func WithTransfer() Option {
	return func(c *submitConfig) { c.opts.flags |= SubmitTransfer; c.set = true }
}

// WithDefer hands the operation to the workers even when it is small and
// ready, where it would run in place (see Runtime.SetSmallInPlace).
func WithDefer() Option {
	return func(c *submitConfig) { c.opts.flags |= SubmitDefer; c.set = true }
}

// WithEvent stores the operation's Event in *ev (close it when done with it).
func WithEvent(ev **Event) Option { return func(c *submitConfig) { c.event = ev } }

// noOptions is the configuration of a call without options (never written).
var noOptions submitConfig

func configure(opts []Option) *submitConfig {
	if len(opts) == 0 {
		return &noOptions
	}
	c := new(submitConfig)
	for _, o := range opts {
		o(c)
	}
	return c
}

// ptr is the ta_submit to pass (nil for all defaults): a copy on its own, so
// that the memory passed to C holds no Go pointers (the config does).
func (c *submitConfig) ptr() *C.ta_submit {
	if !c.set {
		return nil
	}
	s := new(C.ta_submit)
	*s = c.opts
	return s
}

// eventOut is where the C call should store an event: nowhere unless the
// caller asked for one.
func (c *submitConfig) eventOut(slot **C.ta_event) **C.ta_event {
	if c.event == nil {
		return nil
	}
	return slot
}

// finish converts a submission's outcome and hands out the event.
func (c *submitConfig) finish(st C.ta_status, ev *C.ta_event, cerr *C.ta_error) error {
	if err := takeError(st, cerr); err != nil {
		return err
	}
	if c.event != nil {
		*c.event = newEvent(ev)
	}
	return nil
}
