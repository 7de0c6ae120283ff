package tensorasync

// #include <tensorasync.h>
import "C"

import (
	"context"
	"runtime"
)

// Ready returns an event that completes once everything enrolled on t so far
// has completed (ta_tensor_ready); its outcome is t's state then. It never
// blocks.
func (t *Tensor) Ready() (*Event, error) {
	var ev *C.ta_event
	var cerr *C.ta_error
	st := C.ta_tensor_ready(t.h, &ev, &cerr)
	runtime.KeepAlive(t)
	if err := takeError(st, cerr); err != nil {
		return nil, err
	}
	return newEvent(ev), nil
}

func (t *Tensor) wait(ctx context.Context) error {
	ev, err := t.Ready()
	if err != nil {
		return err
	}
	defer ev.Close()
	return ev.Wait(ctx)
}
