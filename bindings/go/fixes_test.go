package tensorasync

// Tests of bugs a probe found in the binding, one test (or more) per bug.
// Values are checked against plain Go computations; errors by errors.Is/As
// and their messages. Timeouts only detect hangs.

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hangTimeout bounds waits that must not hang (a hang fails the test rather
// than the whole run).
const hangTimeout = 30 * time.Second

func hangCtx() (context.Context, context.CancelFunc) { return context.WithTimeout(bg, hangTimeout) }

func wantErr(t *testing.T, what string, err error, target error, msg string) *Error {
	t.Helper()
	var e *Error
	if !errors.Is(err, target) || !errors.As(err, &e) || !strings.Contains(e.Message, msg) {
		t.Fatalf("%s: got %v, want %v with a message containing %q", what, err, target, msg)
	}
	return e
}

// Coalesce's hi is exclusive, as in the C API (the doc said inclusive).
func TestCoalesceHiIsExclusive(t *testing.T) {
	const rows, cols, tr, tc = 5, 7, 2, 3
	for _, order := range []Order{OrderRowMajor, OrderColMajor} {
		b, err := NewTiled(DTypeF64, []int{rows, cols}, []int{tr, tc}, order)
		must(t, err)
		defer b.Close()
		grid, err := b.Grid()
		must(t, err)
		// Tile (i, j) holds 10i+j; ref is the whole array computed in Go.
		ref := make([]float64, rows*cols)
		for i := 0; i < grid[0]; i++ {
			for j := 0; j < grid[1]; j++ {
				tile := mk(t)(b.Tile(i, j))
				must(t, tile.Fill(complex(float64(10*i+j), 0)))
				tile.Close()
			}
		}
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				ref[r*cols+c] = float64(10*(r/tr) + c/tc)
			}
		}
		for _, tc2 := range []struct{ lo, hi []int }{
			{[]int{1, 1}, []int{3, 3}}, // tile rows 1-2, tile columns 1-2
			{[]int{1, 1}, []int{2, 2}}, // tile (1, 1) alone
			{[]int{0, 2}, []int{3, 3}}, // the last tile column, ragged
		} {
			v := mk(t)(b.Coalesce(tc2.lo, tc2.hi))
			// The element range, half-open like hi.
			r0, r1 := tc2.lo[0]*tr, min(tc2.hi[0]*tr, rows)
			c0, c1 := tc2.lo[1]*tc, min(tc2.hi[1]*tc, cols)
			shape, err := v.Shape()
			must(t, err)
			if len(shape) != 2 || shape[0] != r1-r0 || shape[1] != c1-c0 {
				t.Fatalf("order %v Coalesce(%v, %v): shape %v, want [%d %d]", order, tc2.lo, tc2.hi, shape, r1-r0, c1-c0)
			}
			var want []float64
			for r := r0; r < r1; r++ {
				want = append(want, ref[r*cols+c0:r*cols+c1]...)
			}
			assertClose(t, "coalesced", readF64(t, v), want, 0)
			v.Close()
		}
		// lo and hi of different lengths: refused (the library would read
		// past the shorter one).
		if _, err := b.Coalesce([]int{0, 0}, []int{1}); !errors.Is(err, ErrShapeMismatch) {
			t.Fatalf("Coalesce with 2 lo and 1 hi: %v", err)
		}
	}
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// Waits inside a Go kernel on a tensor the kernel accesses fail at once with
// ErrWouldDeadlock (they hung until the context ended).
func TestWaitInsideKernelOnItsOwnOperandFails(t *testing.T) {
	x := mk(t)(FromSlice([]float64{1, 2, 3}))
	defer x.Close()
	type result struct {
		what string
		err  error
	}
	results := make(chan result, 8)
	var ev *Event
	must(t, Submit("waiter", func(v []View) error {
		ctx, cancel := hangCtx()
		defer cancel()
		results <- result{"Tensor.Wait", x.Wait(ctx)}
		_, err := Read[float64](ctx, x)
		results <- result{"Read", err}
		dst := make([]float64, 3)
		results <- result{"ReadInto", ReadInto(ctx, x, dst)}
		// An operation on x submitted from inside: it runs after the kernel.
		var later *Event
		if err := x.Scale(2, WithEvent(&later), WithDefer()); err != nil {
			return err
		}
		defer later.Close()
		results <- result{"Event.Wait", later.Wait(ctx)}
		_, err = x.Map(ctx, ModeRead)
		results <- result{"Map", err}
		if ctx.Err() != nil {
			results <- result{"context", ctx.Err()}
		}
		return nil
	}, []Access{Updates(x)}, WithEvent(&ev)))
	defer ev.Close()
	ctx, cancel := hangCtx()
	defer cancel()
	must(t, ev.Wait(ctx))
	close(results)
	n := 0
	for r := range results {
		n++
		if r.what == "context" {
			t.Fatalf("the waits inside the kernel took the whole %v: %v", hangTimeout, r.err)
		}
		wantErr(t, r.what, r.err, ErrWouldDeadlock, "waits for the task")
	}
	if n != 5 {
		t.Fatalf("%d results", n)
	}
	// The scale submitted inside ran after the kernel.
	assertClose(t, "x", readF64(t, x), []float64{2, 4, 6}, 0)
}

// On a runtime of one worker, a kernel that waits on work it submitted does
// not deadlock: the wait runs the work on the worker.
func TestWaitInsideKernelOnOneWorkerRunsQueuedWork(t *testing.T) {
	rt, err := NewRuntime(1)
	must(t, err)
	defer rt.Close()
	must(t, rt.SetSmallInPlace(false))
	x := mk(t)(Zeros(DTypeF64, 4))
	y := mk(t)(FromSlice([]float64{1, 2, 3, 4}))
	z := mk(t)(FromSlice([]float64{10, 20, 30, 40}))
	defer x.Close()
	defer y.Close()
	defer z.Close()
	var ev *Event
	must(t, Submit("waiter", func(v []View) error {
		ctx, cancel := hangCtx()
		defer cancel()
		if err := y.Scale(3, WithRuntime(rt)); err != nil {
			return err
		}
		if err := y.Wait(ctx); err != nil {
			return err
		}
		var axpy *Event
		if err := Axpy(y, 2, z, WithRuntime(rt), WithEvent(&axpy)); err != nil {
			return err
		}
		defer axpy.Close()
		if err := axpy.Wait(ctx); err != nil {
			return err
		}
		if err := y.Scale(-1, WithRuntime(rt)); err != nil {
			return err
		}
		got, err := Read[float64](ctx, y)
		if err != nil {
			return err
		}
		// Stored through the kernel's own view of x.
		a, err := ArrayOf[float64](v[0])
		if err != nil {
			return err
		}
		for i, g := range got {
			a.Set(g, i)
		}
		return nil
	}, []Access{Writes(x)}, WithEvent(&ev), WithRuntime(rt)))
	defer ev.Close()
	ctx, cancel := hangCtx()
	defer cancel()
	must(t, ev.Wait(ctx))
	want := []float64{1, 2, 3, 4}
	for i := range want {
		want[i] = -(3*want[i] + 2*float64(10*(i+1)))
	}
	assertClose(t, "x", readF64(t, x), want, 0)
	assertClose(t, "y", readF64(t, y), want, 0)
}

// A wait inside a kernel on work that does not complete still ends with its
// context.
func TestWaitInsideKernelHonoursContext(t *testing.T) {
	x := mk(t)(Zeros(DTypeF64, 1))
	y := mk(t)(Zeros(DTypeF64, 1))
	defer x.Close()
	defer y.Close()
	release := make(chan struct{})
	defer close(release)
	// y is held by a goroutine kernel until release is closed.
	must(t, SubmitGoroutine("gate", gate(release), []Access{Updates(y)}))
	got := make(chan error, 1)
	var ev *Event
	must(t, Submit("waiter", func([]View) error {
		ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		defer cancel()
		got <- y.Wait(ctx)
		return nil
	}, []Access{Updates(x)}, WithEvent(&ev)))
	defer ev.Close()
	ctx, cancel := hangCtx()
	defer cancel()
	must(t, ev.Wait(ctx))
	if err := <-got; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait inside a kernel past its deadline: %v", err)
	}
}

// waitForBlockedDelivery waits until some queue's reader goroutine is
// blocked handing an entry to C (read from the goroutine dump: the state is
// not observable otherwise).
func waitForBlockedDelivery(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(hangTimeout)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			blocked := strings.Contains(g, "[chan send") || strings.Contains(g, "[select")
			if blocked && strings.Contains(g, "tensorasync.NewCompletionQueue.func1") {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no queue reader blocked on C")
}

// Close does not wait for a reader of C (it hung with entries unread).
func TestCompletionQueueCloseWithUnreadEntries(t *testing.T) {
	for _, buffer := range []int{0, 1} {
		q, err := NewCompletionQueue(buffer)
		must(t, err)
		x := mk(t)(Zeros(DTypeF64, 4))
		for i := 0; i < 4; i++ {
			must(t, x.Scale(2, WithCompletionQueue(q, uint64(i))))
		}
		waitForBlockedDelivery(t)
		ctx, cancel := hangCtx()
		closed := make(chan error, 1)
		go func() { closed <- q.Close() }()
		select {
		case err := <-closed:
			must(t, err)
		case <-ctx.Done():
			t.Fatalf("buffer %d: Close hangs while nobody reads C", buffer)
		}
		cancel()
		// C is closed; what it still holds are entries of the queue, in
		// order.
		next := uint64(0)
		for c := range q.C {
			if c.Tag < next || c.Tag >= 4 || c.Err != nil {
				t.Fatalf("entry %+v after %d", c, next)
			}
			next = c.Tag + 1
		}
		assertClose(t, "x", readF64(t, x), []float64{0, 0, 0, 0}, 0)
		x.Close()
	}
}

// panic(nil) fails the operation (recover gives nil for it on Go 1.19).
func TestKernelPanicNilFails(t *testing.T) {
	for _, goroutine := range []bool{false, true} {
		x := mk(t)(FromSlice([]float64{1, 2}))
		k := func([]View) error { panic(nil) }
		var ev *Event
		if goroutine {
			must(t, SubmitGoroutine("panics_nil", k, []Access{Updates(x)}, WithEvent(&ev)))
		} else {
			must(t, Submit("panics_nil", k, []Access{Updates(x)}, WithEvent(&ev)))
		}
		ctx, cancel := hangCtx()
		e := wantErr(t, "panic(nil)", ev.Wait(ctx), ErrKernelFailed, "panic(nil)")
		cancel()
		if e.Origin != "panics_nil" || e.Code != 1 {
			t.Fatalf("%+v", e)
		}
		_, err := Read[float64](bg, x)
		wantErr(t, "read after panic(nil)", err, ErrKernelFailed, "panic(nil)")
		ev.Close()
		x.Close()
	}
}

// runtime.Goexit in a goroutine kernel fails the operation (dependents hung).
func TestGoroutineKernelGoexitFails(t *testing.T) {
	x := mk(t)(FromSlice([]float64{1, 2}))
	defer x.Close()
	var ev *Event
	must(t, SubmitGoroutine("exits", func([]View) error { runtime.Goexit(); return nil }, []Access{Updates(x)},
		WithEvent(&ev)))
	defer ev.Close()
	ctx, cancel := hangCtx()
	defer cancel()
	wantErr(t, "event", ev.Wait(ctx), ErrKernelFailed, "runtime.Goexit")
	_, err := Read[float64](ctx, x)
	wantErr(t, "dependent read", err, ErrKernelFailed, "runtime.Goexit")
	// The tensor is usable again after an overwrite.
	must(t, x.Fill(4))
	assertClose(t, "refilled", readF64(t, x), []float64{4, 4}, 0)
}

// runtime.Goexit in a Submit kernel cannot be survived on a library worker
// (documented): the process dies saying so, not with the runtime's internal
// "lockOSThread" error. Run in a child process.
func TestSubmitKernelGoexitDiesWithAMessage(t *testing.T) {
	if os.Getenv("TA_GOEXIT_CHILD") == "1" {
		x := mk(t)(Zeros(DTypeF64, 1))
		var ev *Event
		must(t, Submit("exits", func([]View) error { runtime.Goexit(); return nil }, []Access{Updates(x)},
			WithEvent(&ev)))
		_ = ev.Wait(bg)
		t.Fatal("the process survived runtime.Goexit in a Submit kernel")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSubmitKernelGoexitDiesWithAMessage$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TA_GOEXIT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child did not fail:\n%s", out)
	}
	if !strings.Contains(string(out), "a kernel run by Submit called runtime.Goexit") {
		t.Fatalf("the child died without the binding's message:\n%s", out)
	}
}

// A *KernelError's code is kept, and the status is KERNEL_FAILED, for both
// kinds of kernel, 41 (CANCELLED's value) included.
func TestKernelErrorCodesBothKinds(t *testing.T) {
	for _, code := range []uint32{7, 41, 1, 0xFFFFFFFF} {
		for _, goroutine := range []bool{false, true} {
			x := mk(t)(Zeros(DTypeF64, 2))
			k := func([]View) error { return &KernelError{Code: code, Message: "boom"} }
			var ev *Event
			if goroutine {
				must(t, SubmitGoroutine("kerr", k, []Access{Updates(x)}, WithEvent(&ev)))
			} else {
				must(t, Submit("kerr", k, []Access{Updates(x)}, WithEvent(&ev)))
			}
			ctx, cancel := hangCtx()
			err := ev.Wait(ctx)
			cancel()
			want := int64(code)
			e := wantErr(t, "kernel error", err, ErrKernelFailed, "boom")
			if e.Code != want || e.Message != "boom" || e.Origin != "kerr" || errors.Is(err, ErrCancelled) {
				t.Fatalf("code %d goroutine %v: %+v, want code %d", code, goroutine, *e, want)
			}
			_, rerr := Read[float64](bg, x)
			var re *Error
			if !errors.As(rerr, &re) || *re != *e {
				t.Fatalf("code %d goroutine %v: the read gives %v, the event %v", code, goroutine, rerr, err)
			}
			ev.Close()
			x.Close()
		}
	}
}

// 64-bit integers beyond 2^53 fill and scale exactly.
func TestFillAndScaleExact64BitIntegers(t *testing.T) {
	const big = int64(1<<62 + 1)
	i := mk(t)(Zeros(DTypeI64, 3))
	defer i.Close()
	must(t, i.FillInt64(big))
	if got, err := Read[int64](bg, i); err != nil || got[0] != big || got[2] != big {
		t.Fatalf("FillInt64(%d): %v %v", big, got, err)
	}
	must(t, i.FillInt64(math.MinInt64))
	if got, err := Read[int64](bg, i); err != nil || got[1] != math.MinInt64 {
		t.Fatalf("FillInt64(MinInt64): %v %v", got, err)
	}
	u := mk(t)(Zeros(DTypeU64, 2))
	defer u.Close()
	must(t, u.FillUint64(math.MaxUint64))
	if got, err := Read[uint64](bg, u); err != nil || got[0] != math.MaxUint64 || got[1] != math.MaxUint64 {
		t.Fatalf("FillUint64(MaxUint64): %v %v", got, err)
	}
	// Scales wrap as Go's integer arithmetic does.
	in := []int64{3, -2, 1 << 40}
	s := mk(t)(FromSlice(in))
	defer s.Close()
	const alpha = int64(1<<60 + 1)
	var ev *Event
	must(t, s.ScaleInt64(alpha, WithEvent(&ev)))
	must(t, ev.Wait(bg))
	ev.Close()
	got, err := Read[int64](bg, s)
	must(t, err)
	for k, v := range in {
		a := alpha
		if want := v * a; got[k] != want {
			t.Fatalf("ScaleInt64: [%d] = %d, want %d", k, got[k], want)
		}
	}
	uin := []uint64{2, 1 << 63, 12345}
	us := mk(t)(FromSlice(uin))
	defer us.Close()
	must(t, us.ScaleUint64(math.MaxUint64))
	ugot, err := Read[uint64](bg, us)
	must(t, err)
	for k, v := range uin {
		a := uint64(math.MaxUint64)
		if want := v * a; ugot[k] != want {
			t.Fatalf("ScaleUint64: [%d] = %d, want %d", k, ugot[k], want)
		}
	}
	// Values the dtype does not hold are refused at submission.
	b := mk(t)(Zeros(DTypeU8, 1))
	defer b.Close()
	wantErr(t, "FillInt64(-1) of u8", b.FillInt64(-1), ErrInvalidArgument, "")
	wantErr(t, "FillUint64(MaxUint64) of i64", i.FillUint64(math.MaxUint64), ErrInvalidArgument, "")
	// A float tensor takes the nearest value.
	f := mk(t)(Zeros(DTypeF64, 1))
	defer f.Close()
	must(t, f.FillInt64(big))
	assertClose(t, "FillInt64 of f64", readF64(t, f), []float64{float64(big)}, 0)
}

// Options naming a closed runtime or queue fail the submission with
// ErrNullHandle (a closed runtime ran the operation on the default one).
func TestClosedRuntimeAndQueueOptions(t *testing.T) {
	rt, err := NewRuntime(1)
	must(t, err)
	must(t, rt.Close())
	x := mk(t)(FromSlice([]float64{1, 2}))
	defer x.Close()
	ops := map[string]func(Option) error{
		"Scale": func(o Option) error { return x.Scale(2, o, WithDefer()) },
		"Fill":  func(o Option) error { return x.Fill(7, o) },
		"Write": func(o Option) error { return Write(x, []float64{5, 6}, nil, o) },
		"Clone": func(o Option) error { _, err := x.Clone(o); return err },
		"Submit": func(o Option) error {
			return Submit("k", func([]View) error { return errors.New("ran") }, []Access{Updates(x)}, o)
		},
		"SubmitGoroutine": func(o Option) error {
			return SubmitGoroutine("k", func([]View) error { return errors.New("ran") }, []Access{Updates(x)}, o)
		},
	}
	for name, op := range ops {
		wantErr(t, name+" WithRuntime(closed)", op(WithRuntime(rt)), ErrNullHandle, "runtime is closed")
	}
	q, err := NewCompletionQueue(4)
	must(t, err)
	must(t, q.Close())
	for name, op := range ops {
		wantErr(t, name+" WithCompletionQueue(closed)", op(WithCompletionQueue(q, 1)), ErrNullHandle,
			"completion queue is closed")
	}
	var ev *Event
	must(t, x.Fill(1, WithEvent(&ev)))
	defer ev.Close()
	if err := ev.Notify(q, 5); !errors.Is(err, ErrNullHandle) {
		t.Fatalf("Notify on a closed queue: %v", err)
	}
	// Nothing was submitted by the refused calls.
	must(t, ev.Wait(bg))
	assertClose(t, "x", readF64(t, x), []float64{1, 1}, 0)
}

// ReadInto refuses a dst of another length than the tensor's (a longer one
// had its tail overwritten with zeros).
func TestReadIntoLength(t *testing.T) {
	x := mk(t)(FromSlice([]float64{1, 2, 3, 4}, 2, 2))
	defer x.Close()
	long := []float64{9, 9, 9, 9, 9, 9}
	wantErr(t, "long dst", ReadInto(bg, x, long), ErrShapeMismatch, "dst holds 6 elements; the tensor has 4")
	assertClose(t, "long dst untouched", long, []float64{9, 9, 9, 9, 9, 9}, 0)
	short := []float64{9, 9, 9}
	wantErr(t, "short dst", ReadInto(bg, x, short), ErrBufferTooSmall, "dst holds 3 elements; the tensor has 4")
	exact := make([]float64, 4)
	must(t, ReadInto(bg, x, exact))
	assertClose(t, "exact dst", exact, []float64{1, 2, 3, 4}, 0)
}

// Negative Go ints where the C API takes size_t are refused with
// ErrInvalidArgument naming them (they became huge extents).
func TestNegativeExtentsAndIndices(t *testing.T) {
	x := mk(t)(FromSlice([]float64{1, 2, 3, 4}, 2, 2))
	defer x.Close()
	b, err := NewTiled(DTypeF64, []int{4, 4}, []int{2, 2}, OrderRowMajor)
	must(t, err)
	defer b.Close()
	out := mk(t)(New(DTypeF64))
	defer out.Close()
	cases := []struct {
		what string
		err  func() error
		msg  string
	}{
		{"Zeros", func() error { _, err := Zeros(DTypeF64, -3); return err }, "negative extent -3"},
		{"FromSlice", func() error { _, err := FromSlice([]float64{1, 2}, -1, -2); return err }, "negative extent -1"},
		{"Reshape", func() error { _, err := x.Reshape(-1, -4); return err }, "negative extent -1"},
		{"Write", func() error { return Write(x, []float64{1, 2, 3, 4}, []int{-2, -2}) }, "negative extent -2"},
		{"NewTiled", func() error { _, err := NewTiled(DTypeF64, []int{4, -4}, []int{2, 2}, OrderRowMajor); return err },
			"negative extent -4"},
		{"NewTiled tile", func() error { _, err := NewTiled(DTypeF64, []int{4, 4}, []int{-2, 2}, OrderRowMajor); return err },
			"negative tile extent -2"},
		{"NewBlockList", func() error { _, err := NewBlockList(DTypeF64, [][]int{{2}, {-3}}, OrderRowMajor); return err },
			"-3"},
		{"Tile", func() error { _, err := b.Tile(-1, 0); return err }, "negative tile index -1"},
		{"Block", func() error { _, err := b.Block(-1); return err }, "negative block index -1"},
		{"Coalesce", func() error { _, err := b.Coalesce([]int{0, -1}, []int{1, 1}); return err }, "negative tile index -1"},
		{"Permute", func() error { _, err := x.Permute(-1, 0); return err }, "negative axis -1"},
		{"PermuteInto", func() error { return PermuteInto(out, x, []int{1, -1}) }, "negative axis -1"},
		{"Sum", func() error { return Sum(out, x, []int{-1}) }, "negative axis -1"},
		{"Contract", func() error { return Contract(out, 1, x, x, []int{-1}, []int{0}, nil) }, "negative axis -1"},
	}
	for _, c := range cases {
		wantErr(t, c.what, c.err(), ErrInvalidArgument, c.msg)
	}
	if _, err := out.Shape(); !errors.Is(err, ErrUnconstructed) {
		t.Fatalf("out was written: %v", err)
	}
}

// Sum's axes: nil sums everything into a 0-d out; an empty, non-nil list sums
// over no axis (the C API's NULL against naxes == 0).
func TestSumNilAndEmptyAxes(t *testing.T) {
	in := []float64{1, 2, 3, 4, 5, 6}
	x := mk(t)(FromSlice(in, 2, 3))
	defer x.Close()
	all := mk(t)(New(DTypeF64))
	defer all.Close()
	must(t, Sum(all, x, nil))
	total := 0.0
	for _, v := range in {
		total += v
	}
	if s, err := all.Shape(); err != nil || len(s) != 0 {
		t.Fatalf("nil axes: shape %v %v", s, err)
	}
	assertClose(t, "nil axes", readF64(t, all), []float64{total}, 0)
	none := mk(t)(New(DTypeF64))
	defer none.Close()
	must(t, Sum(none, x, []int{}))
	if s, err := none.Shape(); err != nil || len(s) != 2 || s[0] != 2 || s[1] != 3 {
		t.Fatalf("empty axes: shape %v %v", s, err)
	}
	assertClose(t, "empty axes", readF64(t, none), in, 0)
	rows := mk(t)(New(DTypeF64))
	defer rows.Close()
	must(t, Sum(rows, x, []int{1}))
	assertClose(t, "axis 1", readF64(t, rows), []float64{in[0] + in[1] + in[2], in[3] + in[4] + in[5]}, 0)
}
