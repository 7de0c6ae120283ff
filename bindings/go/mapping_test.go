package tensorasync

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMappingReadIsZeroCopyAndHoldsWritersBack(t *testing.T) {
	x := mk(t)(FromSlice([]float64{1, 2, 3, 4, 5, 6}, 2, 3))
	defer x.Close()
	must(t, x.Scale(10))
	m, err := x.Map(bg, ModeRead)
	must(t, err)
	a, err := MappedArray[float64](m)
	must(t, err)
	if a.At(1, 2) != 60 || a.At(0, 1) != 20 {
		t.Fatalf("mapped %v", a.Data)
	}
	if _, err := MappedArray[float32](m); !errors.Is(err, ErrDtypeMismatch) {
		t.Fatalf("f64 mapping as float32: %v", err)
	}
	// The mapped memory is the tensor's own, not a copy: a second READ
	// mapping, live at the same time, sees the same address.
	m2, err := x.Map(bg, ModeRead)
	must(t, err)
	a2, err := MappedArray[float64](m2)
	must(t, err)
	if &a2.Data[0] != &a.Data[0] {
		t.Fatal("two live READ mappings of one tensor have different addresses")
	}
	must(t, m2.Release())
	// A later reader runs; a later writer waits for the release.
	r := mk(t)(New(DTypeF64))
	defer r.Close()
	must(t, Copy(r, x))
	must(t, r.Wait(bg))
	var fill *Event
	must(t, x.Fill(-1, WithEvent(&fill)))
	defer fill.Close()
	if done, _ := fill.Poll(); done {
		t.Fatal("a writer ran while a READ mapping was live")
	}
	must(t, m.Release())
	must(t, m.Release()) // idempotent
	must(t, fill.Wait(bg))
	assertClose(t, "after the writer", readF64(t, x), []float64{-1, -1, -1, -1, -1, -1}, 0)
}

func TestMappingWriteAndPoison(t *testing.T) {
	x := mk(t)(Zeros(DTypeF64, 2, 2))
	defer x.Close()
	must(t, Submit("poison", func([]View) error { return errors.New("bad data") }, []Access{Updates(x)}))
	if _, err := x.Map(bg, ModeRead); !errors.Is(err, ErrKernelFailed) || !strings.Contains(err.Error(), "bad data") {
		t.Fatalf("READ mapping of a poisoned tensor: %v", err)
	}
	// WRITE is a pure overwrite: granted, and it cleans the tensor.
	m, err := x.Map(bg, ModeWrite)
	must(t, err)
	a, err := MappedArray[float64](m)
	must(t, err)
	for i := 0; i < 2; i++ {
		for j := 0; j < 2; j++ {
			a.Set(float64(10*i+j), i, j)
		}
	}
	must(t, m.Release())
	must(t, x.Wait(bg))
	assertClose(t, "written through a mapping", readF64(t, x), []float64{0, 1, 10, 11}, 0)
	// A mapping of a strided view: the typed array follows its strides.
	col := mk(t)(x.Slice(All(), At(1)))
	defer col.Close()
	cm, err := col.Map(bg, ModeUpdate)
	must(t, err)
	ca, err := MappedArray[float64](cm)
	must(t, err)
	ca.Set(ca.At(0)+100, 0)
	ca.Set(ca.At(1)+100, 1)
	must(t, cm.Release())
	assertClose(t, "updated through a view mapping", readF64(t, x), []float64{0, 101, 10, 111}, 0)
}

func TestMapHonoursContext(t *testing.T) {
	x := mk(t)(Zeros(DTypeF64, 1))
	defer x.Close()
	release := make(chan struct{})
	must(t, Submit("gate", gate(release), []Access{Updates(x)}))
	ctx, cancel := context.WithTimeout(bg, time.Millisecond)
	defer cancel()
	if _, err := x.Map(ctx, ModeRead); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("map behind a running writer, past a deadline: %v", err)
	}
	close(release)
	// The abandoned access is released when granted: later work runs.
	must(t, x.Fill(3))
	assertClose(t, "after an abandoned mapping", readF64(t, x), []float64{3}, 0)
}

func TestSubmitGoroutine(t *testing.T) {
	x := mk(t)(FromSlice([]float64{1, 2, 3, 4}))
	y := mk(t)(Zeros(DTypeF64, 4))
	defer x.Close()
	defer y.Close()
	gateCh := make(chan struct{})
	must(t, SubmitGoroutine("squares", func(v []View) error {
		<-gateCh // a goroutine kernel may block: no worker is held
		src, err := ArrayOf[float64](v[0])
		if err != nil {
			return err
		}
		dst, err := ArrayOf[float64](v[1])
		if err != nil {
			return err
		}
		for i := 0; i < 4; i++ {
			dst.Set(src.At(i)*src.At(i), i)
		}
		return nil
	}, []Access{Reads(x), Writes(y)}))
	// Work on other tensors still runs while the goroutine kernel waits.
	z := mk(t)(Zeros(DTypeF64, 2))
	defer z.Close()
	must(t, z.Fill(7))
	assertClose(t, "independent work", readF64(t, z), []float64{7, 7}, 0)
	later := mk(t)(New(DTypeF64))
	defer later.Close()
	must(t, Copy(later, y)) // ordered after the goroutine's write
	close(gateCh)
	assertClose(t, "goroutine kernel", readF64(t, later), []float64{1, 4, 9, 16}, 0)

	var ev *Event
	must(t, SubmitGoroutine("declines", func([]View) error {
		return &KernelError{Code: 9, Message: "declined"}
	}, []Access{Updates(y)}, WithEvent(&ev)))
	defer ev.Close()
	err := ev.Wait(bg)
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusKernelFailed || e.Code != 9 || e.Message != "declined" || e.Origin != "declines" {
		t.Fatalf("%#v", err)
	}
	// A poisoned input: the goroutine kernel never runs, the op fails.
	ran := false
	must(t, SubmitGoroutine("after_poison", func([]View) error { ran = true; return nil }, []Access{Reads(y), Writes(z)}))
	if err := z.Wait(bg); !errors.Is(err, ErrKernelFailed) {
		t.Fatalf("output of an op on a poisoned input: %v", err)
	}
	if ran {
		t.Fatal("the kernel ran on a poisoned input")
	}
}
