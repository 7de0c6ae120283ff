package tensorasync

// #include <tensorasync.h>
import "C"

import "fmt"

// Version is the library's version string (ta_version).
func Version() string { return C.GoString(C.ta_version()) }

// HandlesLive is the number of live handles of every kind in the process (a
// leak check for tests).
func HandlesLive() int {
	var n C.size_t
	C.ta_handles_live(&n)
	return int(n)
}

// Elem is the set of Go element types with a tensorasync dtype.
type Elem interface {
	float32 | float64 | complex64 | complex128 |
		int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64
}

// DTypeOf is the dtype of the Go element type T.
func DTypeOf[T Elem]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return DTypeF32
	case float64:
		return DTypeF64
	case complex64:
		return DTypeC64
	case complex128:
		return DTypeC128
	case int8:
		return DTypeI8
	case int16:
		return DTypeI16
	case int32:
		return DTypeI32
	case int64:
		return DTypeI64
	case uint8:
		return DTypeU8
	case uint16:
		return DTypeU16
	case uint32:
		return DTypeU32
	case uint64:
		return DTypeU64
	}
	panic("unreachable")
}

// Size is the element size in bytes.
func (d DType) Size() int {
	switch d {
	case DTypeI8, DTypeU8:
		return 1
	case DTypeI16, DTypeU16:
		return 2
	case DTypeF32, DTypeI32, DTypeU32:
		return 4
	case DTypeF64, DTypeC64, DTypeI64, DTypeU64:
		return 8
	case DTypeC128:
		return 16
	}
	return 0
}

func (d DType) String() string {
	if n, ok := dTypeNames[d]; ok {
		return n
	}
	return fmt.Sprintf("DType(%d)", uint32(d))
}

func (m Mode) String() string {
	if n, ok := modeNames[m]; ok {
		return n
	}
	return fmt.Sprintf("Mode(%d)", uint32(m))
}

func scalar(v complex128) C.ta_scalar {
	return C.ta_scalar{re: C.double(real(v)), im: C.double(imag(v))}
}
