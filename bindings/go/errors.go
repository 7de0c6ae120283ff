package tensorasync

// #include <tensorasync.h>
import "C"

import "fmt"

// A Status (type in zz_generated.go) is also an error, so the sentinel
// errors (ErrShapeMismatch, ...) are Status values and errors.Is(err,
// ErrShapeMismatch) holds for every *Error with that status.

// Name is the C name, for example "TA_STATUS_SHAPE_MISMATCH".
func (s Status) Name() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return C.GoString(C.ta_status_name(C.ta_status(s)))
}

// String is the one-line description the library gives.
func (s Status) String() string { return C.GoString(C.ta_status_describe(C.ta_status(s))) }

// Error makes a Status usable as a sentinel error.
func (s Status) Error() string { return s.Name() }

// Error is a failure reported by the library: its status, the raw code (the
// status, or for a failed user kernel the value the kernel returned), the
// operation where it started and its message. It is built from a ta_error
// object returned with the failure itself (a call's error out-parameter, an
// event's or completion entry's error), never from a thread's last error,
// since goroutines move between OS threads between calls.
type Error struct {
	Status  Status
	Code    int64
	Origin  string
	Message string
}

func (e *Error) Error() string {
	if e.Origin != "" {
		return fmt.Sprintf("%s: %s: %s", e.Origin, e.Status.Name(), e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Status.Name(), e.Message)
}

// Is reports whether target is e's status (a sentinel) or an *Error with the
// same status.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return e.Status == t
	case *Error:
		return t != nil && e.Status == t.Status
	}
	return false
}

// takeError converts an error object to *Error and frees the object. A nil
// object (functions without an error out-parameter, or handle statuses that
// come without one) gives an *Error with the status's description.
func takeError(st C.ta_status, e *C.ta_error) error {
	if st == C.TA_STATUS_OK {
		if e != nil {
			C.ta_error_free(e)
		}
		return nil
	}
	if e == nil {
		return &Error{Status: Status(st), Code: int64(st), Message: Status(st).String()}
	}
	out := errorFromObject(e)
	C.ta_error_free(e)
	if out.Status == 0 {
		out.Status = Status(st)
	}
	return out
}

// errorFromObject reads an error object without freeing it.
func errorFromObject(e *C.ta_error) *Error {
	var st C.ta_status
	var code C.int64_t
	C.ta_error_status(e, &st)
	C.ta_error_code(e, &code)
	return &Error{
		Status: Status(st),
		Code:   int64(code),
		Message: goString(func(b *C.char, n C.size_t, l *C.size_t) C.ta_status {
			return C.ta_error_message(e, b, n, l)
		}),
		Origin: goString(func(b *C.char, n C.size_t, l *C.size_t) C.ta_status {
			return C.ta_error_origin(e, b, n, l)
		}),
	}
}

// check converts a status without an error object.
func check(st C.ta_status) error { return takeError(st, nil) }
