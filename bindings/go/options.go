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
	err   error // the first option that cannot apply (a closed handle)
}

// closedOption is the error of an option naming a closed (or nil) handle:
// the ErrNullHandle that other uses of a closed handle give. The C API reads
// a NULL runtime or queue in ta_submit as "none given", so passing the
// cleared handle on would silently run the operation on the default runtime
// (or without its completion entry); the submission fails instead.
func closedOption(c *submitConfig, option, what string) {
	if c.err == nil {
		c.err = &Error{Status: StatusNullHandle, Code: int64(StatusNullHandle), Origin: option,
			Message: what + " is closed (or nil)"}
	}
}

// WithRuntime runs the operation on rt instead of the default runtime. A
// closed (or nil) rt fails the submission with ErrNullHandle.
func WithRuntime(rt *Runtime) Option {
	return func(c *submitConfig) {
		if rt == nil || rt.h == nil {
			closedOption(c, "WithRuntime", "the runtime")
			return
		}
		c.opts.runtime = rt.h
		c.set = true
		c.keep = append(c.keep, rt)
	}
}

// WithCompletionQueue reports the operation's completion as {tag, outcome} on
// q. A closed (or nil) q fails the submission with ErrNullHandle.
func WithCompletionQueue(q *CompletionQueue, tag uint64) Option {
	return func(c *submitConfig) {
		if q == nil || q.h == nil {
			closedOption(c, "WithCompletionQueue", "the completion queue")
			return
		}
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

// configure applies the options; an option that cannot apply (a closed
// runtime or queue) gives an error, and the caller submits nothing.
func configure(opts []Option) (*submitConfig, error) {
	if len(opts) == 0 {
		return &noOptions, nil
	}
	c := new(submitConfig)
	for _, o := range opts {
		o(c)
	}
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
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
