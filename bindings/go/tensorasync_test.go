package tensorasync

import (
	"context"
	"errors"
	"math"
	"math/cmplx"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var bg = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mk(t)(f()) is f's tensor, failing the test on f's error.
func mk(t *testing.T) func(*Tensor, error) *Tensor {
	return func(x *Tensor, err error) *Tensor {
		t.Helper()
		must(t, err)
		return x
	}
}

func readF64(t *testing.T, x *Tensor) []float64 {
	t.Helper()
	v, err := Read[float64](bg, x)
	must(t, err)
	return v
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

func assertClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !near(got[i], want[i], tol) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func randVec(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.Float64()*2 - 1
	}
	return v
}

// matmul is the plain Go reference: row-major (m×k)·(k×n).
func matmul(a, b []float64, m, k, n int) []float64 {
	c := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for p := 0; p < k; p++ {
				s += a[i*k+p] * b[p*n+j]
			}
			c[i*n+j] = s
		}
	}
	return c
}

func TestGeneratedLayerIsFresh(t *testing.T) {
	out, err := exec.Command("go", "run", "./internal/gen", "-check").CombinedOutput()
	if err != nil {
		t.Fatalf("zz_generated.go is stale: %v\n%s", err, out)
	}
	// The check fails on a header with one more status.
	hdr, err := os.ReadFile("../../include/tensorasync.h")
	must(t, err)
	changed := strings.Replace(string(hdr), "#define TA_STATUS_OK 0",
		"#define TA_STATUS_OK 0\n\n/**\n * New.\n */\n#define TA_STATUS_BRAND_NEW 98", 1)
	p := filepath.Join(t.TempDir(), "h.h")
	must(t, os.WriteFile(p, []byte(changed), 0o644))
	out, err = exec.Command("go", "run", "./internal/gen", "-check", "-header", p).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "stale") {
		t.Fatalf("the freshness check passed for a changed header: %v %s", err, out)
	}
}

func TestStatusTables(t *testing.T) {
	if StatusShapeMismatch.Name() != "TA_STATUS_SHAPE_MISMATCH" || ErrShapeMismatch.Error() != "TA_STATUS_SHAPE_MISMATCH" {
		t.Fatal(StatusShapeMismatch.Name())
	}
	for s, n := range statusNames {
		if got := Status(s).Name(); got != n {
			t.Fatalf("%d: %s vs %s", s, got, n)
		}
		if s.String() == "unknown status" {
			t.Fatalf("library does not know %s", n)
		}
	}
	if Version() != HeaderVersion {
		t.Fatalf("library %s, header %s", Version(), HeaderVersion)
	}
}

func TestSubmissionErrorsAreErrorObjects(t *testing.T) {
	x := mk(t)(Zeros(DTypeF64, 3))
	y := mk(t)(Zeros(DTypeF64, 4))
	defer x.Close()
	defer y.Close()
	err := Axpy(y, 1, x)
	if !errors.Is(err, ErrShapeMismatch) || errors.Is(err, ErrDtypeMismatch) {
		t.Fatalf("axpy of 3 into 4: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusShapeMismatch || e.Code != int64(StatusShapeMismatch) {
		t.Fatalf("%#v", err)
	}
	if !strings.Contains(e.Message, "3") || !strings.Contains(e.Message, "4") || e.Origin == "" {
		t.Fatalf("message %q origin %q should name the shapes and the operation", e.Message, e.Origin)
	}
	z := mk(t)(Zeros(DTypeF32, 3))
	defer z.Close()
	if err := Axpy(z, 1, x); !errors.Is(err, ErrDtypeMismatch) {
		t.Fatalf("f32 += f64: %v", err)
	}
	if err := Axpy(x, 1, x); !errors.Is(err, ErrAlias) {
		t.Fatalf("x += x: %v", err)
	}
	c := mk(t)(x.Conj())
	defer c.Close()
	if err := c.Fill(1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("fill of a conj view: %v", err)
	}
}

func TestClosedTensor(t *testing.T) {
	x := mk(t)(Zeros(DTypeF64, 2))
	must(t, x.Close())
	must(t, x.Close()) // idempotent
	if err := x.Fill(1); !errors.Is(err, ErrNullHandle) {
		t.Fatalf("fill after Close: %v", err)
	}
}

func TestElementwiseAgainstGo(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	xs, ys := randVec(r, 100), randVec(r, 100)
	x := mk(t)(FromSlice(xs))
	y := mk(t)(FromSlice(ys, 10, 10))
	defer x.Close()
	defer y.Close()
	xr := mk(t)(x.Reshape(10, 10))
	defer xr.Close()
	must(t, Axpy(y, 2.5, xr))
	must(t, y.Scale(-0.5))
	want := make([]float64, 100)
	for i := range want {
		want[i] = (2.5*xs[i] + ys[i]) * -0.5
	}
	assertClose(t, "y", readF64(t, y), want, 1e-14)

	// A Write copies at once: reusing the slice does not change the tensor.
	buf := []float64{1, 2, 3}
	u := mk(t)(New(DTypeF64))
	defer u.Close()
	must(t, Write(u, buf, []int{3}))
	buf[0] = 100
	assertClose(t, "u", readF64(t, u), []float64{1, 2, 3}, 0)
	s, err := u.Shape()
	must(t, err)
	if len(s) != 1 || s[0] != 3 {
		t.Fatalf("shape %v", s)
	}
	must(t, u.Fill(7))
	assertClose(t, "fill", readF64(t, u), []float64{7, 7, 7}, 0)
	v := mk(t)(New(DTypeF64))
	defer v.Close()
	must(t, Copy(v, u))
	assertClose(t, "copy", readF64(t, v), []float64{7, 7, 7}, 0)
}

func TestIntegerAndComplexData(t *testing.T) {
	is := []int32{1, -2, 3}
	x := mk(t)(FromSlice(is))
	defer x.Close()
	must(t, x.Scale(3))
	got, err := Read[int32](bg, x)
	must(t, err)
	if got[0] != 3 || got[1] != -6 || got[2] != 9 {
		t.Fatal(got)
	}
	if _, err := Read[float64](bg, x); !errors.Is(err, ErrDtypeMismatch) || !strings.Contains(err.Error(), "TA_DTYPE_I32") {
		t.Fatalf("read of an i32 tensor as float64: %v", err)
	}
	zs := []complex128{1 + 2i, -1i, 3}
	z := mk(t)(FromSlice(zs))
	defer z.Close()
	must(t, z.Scale(2i))
	zg, err := Read[complex128](bg, z)
	must(t, err)
	for i := range zs {
		if cmplx.Abs(zg[i]-2i*zs[i]) > 1e-15 {
			t.Fatal(zg)
		}
	}
	// dot with conjugation against a Go reference.
	d := mk(t)(New(DTypeC128))
	defer d.Close()
	must(t, Dot(d, z, z, true))
	dg, err := Read[complex128](bg, d)
	must(t, err)
	var ref complex128
	for _, v := range zg {
		ref += cmplx.Conj(v) * v
	}
	if cmplx.Abs(dg[0]-ref) > 1e-12 {
		t.Fatalf("dot %v want %v", dg, ref)
	}
}

func TestLinearAlgebraAgainstGo(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	m, k, n := 5, 7, 3
	as, bs, cs := randVec(r, m*k), randVec(r, k*n), randVec(r, m*n)
	a := mk(t)(FromSlice(as, m, k))
	b := mk(t)(FromSlice(bs, k, n))
	c := mk(t)(FromSlice(cs, m, n))
	defer a.Close()
	defer b.Close()
	defer c.Close()
	must(t, Gemm(c, 2, a, b, -1))
	ab := matmul(as, bs, m, k, n)
	want := make([]float64, m*n)
	for i := range want {
		want[i] = 2*ab[i] - cs[i]
	}
	assertClose(t, "gemm", readF64(t, c), want, 1e-12)

	p := mk(t)(New(DTypeF64))
	defer p.Close()
	must(t, AssignProduct(p, 1, a, b))
	must(t, AddProduct(p, 1, a, b))
	for i := range want {
		want[i] = 2 * ab[i]
	}
	assertClose(t, "assign+add product", readF64(t, p), want, 1e-12)

	// Transposed view: (Aᵀ)ᵀ·B through a view of a k×m copy.
	at := make([]float64, k*m)
	for i := 0; i < m; i++ {
		for j := 0; j < k; j++ {
			at[j*m+i] = as[i*k+j]
		}
	}
	atT := mk(t)(FromSlice(at, k, m))
	defer atT.Close()
	atv := mk(t)(atT.T())
	defer atv.Close()
	q := mk(t)(New(DTypeF64))
	defer q.Close()
	must(t, AssignProduct(q, 1, atv, b))
	assertClose(t, "product of a transposed view", readF64(t, q), ab, 1e-12)

	// Contract A (m×k) with B (k×n) over k is the matrix product.
	ct := mk(t)(New(DTypeF64))
	defer ct.Close()
	must(t, Contract(ct, 1, a, b, []int{1}, []int{0}, nil))
	assertClose(t, "contract", readF64(t, ct), ab, 1e-12)

	// Sums and norms.
	s := mk(t)(New(DTypeF64))
	rows := mk(t)(New(DTypeF64))
	nrm := mk(t)(New(DTypeF64))
	defer s.Close()
	defer rows.Close()
	defer nrm.Close()
	must(t, Sum(s, a, nil))
	must(t, Sum(rows, a, []int{1}))
	must(t, Norm2(nrm, a))
	var tot, sq float64
	rs := make([]float64, m)
	for i := 0; i < m; i++ {
		for j := 0; j < k; j++ {
			tot += as[i*k+j]
			sq += as[i*k+j] * as[i*k+j]
			rs[i] += as[i*k+j]
		}
	}
	assertClose(t, "sum", readF64(t, s), []float64{tot}, 1e-12)
	assertClose(t, "row sums", readF64(t, rows), rs, 1e-12)
	assertClose(t, "norm2", readF64(t, nrm), []float64{math.Sqrt(sq)}, 1e-12)
}

func TestCholeskyTilesAgainstGo(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	n := 6
	g := randVec(r, n*n)
	spd := matmul(g, transpose(g, n, n), n, n, n)
	for i := 0; i < n; i++ {
		spd[i*n+i] += float64(n)
	}
	a := mk(t)(FromSlice(spd, n, n))
	defer a.Close()
	must(t, Potrf(a, UploLower))
	l := readF64(t, a)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			l[i*n+j] = 0 // the strict upper triangle is untouched, not zero
		}
	}
	assertClose(t, "L·Lᵀ", matmul(l, transpose(l, n, n), n, n, n), spd, 1e-12)

	// trsm: solve L·X = B, check L·X = B.
	bs := randVec(r, n*2)
	lt := mk(t)(FromSlice(l, n, n))
	b := mk(t)(FromSlice(bs, n, 2))
	defer lt.Close()
	defer b.Close()
	must(t, Trsm(b, SideLeft, UploLower, DiagNonUnit, 1, lt))
	assertClose(t, "L·X", matmul(l, readF64(t, b), n, n, 2), bs, 1e-12)

	// syrk: lower triangle of C = A·Aᵀ.
	c := mk(t)(Zeros(DTypeF64, n, n))
	defer c.Close()
	must(t, Syrk(c, UploLower, 1, lt, 0))
	llt := matmul(l, transpose(l, n, n), n, n, n)
	got := readF64(t, c)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			if !near(got[i*n+j], llt[i*n+j], 1e-12) {
				t.Fatalf("syrk[%d,%d] = %v want %v", i, j, got[i*n+j], llt[i*n+j])
			}
		}
	}

	// Not positive definite: the factorisation fails at run time and
	// poisons A; the error reaches a later reader.
	bad := mk(t)(FromSlice([]float64{1, 2, 2, 1}, 2, 2))
	defer bad.Close()
	must(t, Potrf(bad, UploLower))
	_, err := Read[float64](bg, bad)
	var e *Error
	if !errors.As(err, &e) || e.Message == "" || e.Origin == "" {
		t.Fatalf("potrf of an indefinite matrix: %v", err)
	}
	if werr := bad.Wait(bg); !errors.Is(werr, e.Status) {
		t.Fatalf("wait: %v, read: %v", werr, err)
	}
}

func transpose(a []float64, m, n int) []float64 {
	t := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			t[j*m+i] = a[i*n+j]
		}
	}
	return t
}

func TestViews(t *testing.T) {
	xs := make([]float64, 20)
	for i := range xs {
		xs[i] = float64(i)
	}
	x := mk(t)(FromSlice(xs, 4, 5))
	defer x.Close()
	// x[1:4:2, ::-1] -> rows 1, 3 reversed.
	v := mk(t)(x.Slice(Step(1, 4, 2), Rev()))
	defer v.Close()
	shape, err := v.Shape()
	must(t, err)
	if len(shape) != 2 || shape[0] != 2 || shape[1] != 5 {
		t.Fatalf("shape %v", shape)
	}
	assertClose(t, "strided slice", readF64(t, v), []float64{9, 8, 7, 6, 5, 19, 18, 17, 16, 15}, 0)
	isView, err := v.IsView()
	must(t, err)
	if !isView {
		t.Fatal("a slice is not a view")
	}
	// A column, axis dropped, written through the view.
	col := mk(t)(x.Slice(All(), At(2)))
	defer col.Close()
	must(t, col.Fill(-1))
	got := readF64(t, x)
	for i := 0; i < 4; i++ {
		for j := 0; j < 5; j++ {
			want := float64(i*5 + j)
			if j == 2 {
				want = -1
			}
			if got[i*5+j] != want {
				t.Fatalf("x[%d,%d] = %v want %v", i, j, got[i*5+j], want)
			}
		}
	}
	tr := mk(t)(x.T())
	defer tr.Close()
	assertClose(t, "transpose", readF64(t, tr), transpose(got, 4, 5), 0)
	pm := mk(t)(x.Permute(1, 0))
	defer pm.Close()
	assertClose(t, "permute", readF64(t, pm), transpose(got, 4, 5), 0)
	if _, err := x.Slice(Span(0, 9), All()); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("slice past the end: %v", err)
	}
}

func TestBlockArrays(t *testing.T) {
	b, err := NewTiled(DTypeF64, []int{5, 4}, []int{2, 3}, OrderRowMajor)
	must(t, err)
	defer b.Close()
	n, err := b.Count()
	must(t, err)
	grid, err := b.Grid()
	must(t, err)
	if n != 6 || len(grid) != 2 || grid[0] != 3 || grid[1] != 2 {
		t.Fatalf("count %d grid %v", n, grid)
	}
	// Fill tile (i, j) with 10i+j, each from its own goroutine.
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		for j := 0; j < 2; j++ {
			wg.Add(1)
			go func(i, j int) {
				defer wg.Done()
				tile, err := b.Tile(i, j)
				if err != nil {
					t.Error(err)
					return
				}
				defer tile.Close()
				if err := tile.Fill(complex(float64(10*i+j), 0)); err != nil {
					t.Error(err)
				}
			}(i, j)
		}
	}
	wg.Wait()
	all := mk(t)(b.All())
	defer all.Close()
	got := readF64(t, all)
	for r := 0; r < 5; r++ {
		for c := 0; c < 4; c++ {
			want := float64(10*(r/2) + c/3)
			if got[r*4+c] != want {
				t.Fatalf("[%d,%d] = %v want %v", r, c, got[r*4+c], want)
			}
		}
	}
	if _, err := b.Tile(3, 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("tile past the grid: %v", err)
	}
	l, err := NewBlockList(DTypeF64, [][]int{{2, 3}, {1, 3}, {4}}, OrderRowMajor)
	must(t, err)
	defer l.Close()
	top := mk(t)(l.CoalesceRange(0, 1))
	defer top.Close()
	s, err := top.Shape()
	must(t, err)
	if len(s) != 2 || s[0] != 3 || s[1] != 3 {
		t.Fatalf("coalesced shape %v", s)
	}
	if _, err := l.CoalesceRange(1, 2); !errors.Is(err, ErrNotContiguous) {
		t.Fatalf("coalesce of a 1x3 and a 4: %v", err)
	}
}

func TestGoKernel(t *testing.T) {
	x := mk(t)(FromSlice([]float64{1, 2, 3, 4, 5, 6}, 2, 3))
	y := mk(t)(Zeros(DTypeF64, 3, 2))
	defer x.Close()
	defer y.Close()
	xt := mk(t)(x.T()) // a strided view: the kernel sees its strides
	defer xt.Close()
	// y = 10 * xᵀ, by a Go kernel.
	must(t, Submit("times_ten", func(v []View) error {
		src, err := ArrayOf[float64](v[0])
		if err != nil {
			return err
		}
		dst, err := ArrayOf[float64](v[1])
		if err != nil {
			return err
		}
		for i := 0; i < src.Shape[0]; i++ {
			for j := 0; j < src.Shape[1]; j++ {
				dst.Set(10*src.At(i, j), i, j)
			}
		}
		return nil
	}, []Access{Reads(xt), Writes(y)}))
	assertClose(t, "kernel", readF64(t, y), []float64{10, 40, 20, 50, 30, 60}, 0)

	// A failing kernel poisons its output; the error object carries the
	// kernel's code, its message and its name, and reaches later readers.
	must(t, Submit("refuses", func([]View) error {
		return &KernelError{Code: 7, Message: "no thanks"}
	}, []Access{Updates(y)}))
	_, err := Read[float64](bg, y)
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusKernelFailed || e.Code != 7 || e.Message != "no thanks" || e.Origin != "refuses" {
		t.Fatalf("%#v", err)
	}
	z := mk(t)(New(DTypeF64))
	defer z.Close()
	must(t, Copy(z, y))
	if err := z.Wait(bg); !errors.Is(err, ErrKernelFailed) {
		t.Fatalf("copy of a poisoned tensor: %v", err)
	}
	// A panic is caught and fails the operation.
	must(t, Submit("panics", func([]View) error { panic("boom") }, []Access{Writes(y)}))
	if err := y.Wait(bg); !errors.Is(err, ErrKernelFailed) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panicking kernel: %v", err)
	}
	// A dtype mismatch inside a kernel is an error, not a crash.
	must(t, Submit("wrongtype", func(v []View) error {
		_, err := ArrayOf[float32](v[0])
		return err
	}, []Access{Reads(x)}))
	must(t, x.Wait(bg))
}

// gate returns a kernel that blocks its worker until release is closed.
func gate(release <-chan struct{}) KernelFunc {
	return func([]View) error { <-release; return nil }
}

func TestEventWaitHonoursContext(t *testing.T) {
	x := mk(t)(Zeros(DTypeF64, 1))
	defer x.Close()
	release := make(chan struct{})
	var ev *Event
	must(t, Submit("gate", gate(release), []Access{Updates(x)}, WithEvent(&ev)))
	defer ev.Close()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ev.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context: %v", err)
	}
	dctx, dcancel := context.WithTimeout(bg, time.Millisecond)
	defer dcancel()
	if err := ev.Wait(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past a deadline: %v", err)
	}
	if done, _ := ev.Poll(); done {
		t.Fatal("the gated kernel completed before its gate opened")
	}
	select {
	case <-ev.Done():
		t.Fatal("Done closed before completion")
	default:
	}
	// The tensor is awaited through its readiness event, with the context.
	tctx, tcancel := context.WithTimeout(bg, time.Millisecond)
	defer tcancel()
	if err := x.Wait(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("tensor wait past a deadline: %v", err)
	}
	ready, err := x.Ready()
	must(t, err)
	defer ready.Close()
	close(release)
	must(t, ready.Wait(bg))
	<-ev.Done()
	if ev.Err() != nil {
		t.Fatal(ev.Err())
	}
	must(t, ev.Wait(bg))
	// A failed operation's event gives its error object.
	var bad *Event
	must(t, Submit("fails", func([]View) error { return errors.New("nope") }, []Access{Updates(x)}, WithEvent(&bad)))
	defer bad.Close()
	if err := bad.Wait(bg); !errors.Is(err, ErrKernelFailed) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("event of a failed kernel: %v", err)
	}
}

func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	must(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Threads:") {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, "Threads:")))
			must(t, err)
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}

// Many goroutines waiting on pending events hold no OS thread each: they
// park in select on channels that the dispatcher goroutine (parked in the
// netpoller on the completion fd) closes.
func TestWaitersDoNotHoldThreads(t *testing.T) {
	const waiters = 500
	release := make(chan struct{})
	x := mk(t)(Zeros(DTypeF64, 1))
	defer x.Close()
	must(t, Submit("gate", gate(release), []Access{Updates(x)}))
	before := threads(t)
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	started := make(chan struct{}, waiters)
	for i := 0; i < waiters; i++ {
		var ev *Event
		must(t, x.Scale(1, WithEvent(&ev)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ev.Close()
			started <- struct{}{}
			errs <- ev.Wait(bg)
		}()
	}
	for i := 0; i < waiters; i++ {
		<-started
	}
	runtime.Gosched()
	during := threads(t)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	if during-before > 50 {
		t.Fatalf("%d waiters added %d OS threads", waiters, during-before)
	}
}

func TestCompletionQueueManySubmitters(t *testing.T) {
	q, err := NewCompletionQueue(64)
	must(t, err)
	defer q.Close()
	const goroutines, per = 16, 50
	var wg sync.WaitGroup
	results := make([]*Tensor, goroutines)
	for g := 0; g < goroutines; g++ {
		results[g] = mk(t)(Zeros(DTypeF64, 4))
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			inc := mk(t)(FromSlice([]float64{1, 2, 3, float64(g)}))
			defer inc.Close()
			for i := 0; i < per; i++ {
				if err := Axpy(results[g], 1, inc, WithCompletionQueue(q, uint64(g*per+i))); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	seen := make(map[uint64]bool)
	for len(seen) < goroutines*per {
		c := <-q.C
		if c.Err != nil || seen[c.Tag] || c.Tag >= goroutines*per {
			t.Fatalf("entry %+v (seen before: %v)", c, seen[c.Tag])
		}
		seen[c.Tag] = true
	}
	wg.Wait()
	for g, r := range results {
		assertClose(t, "sum", readF64(t, r), []float64{per, 2 * per, 3 * per, float64(g * per)}, 0)
		r.Close()
	}
	// A failure arrives as an entry with its error object.
	y := mk(t)(Zeros(DTypeF64, 1))
	defer y.Close()
	must(t, Submit("fails", func([]View) error { return errors.New("broken") }, []Access{Updates(y)},
		WithCompletionQueue(q, 999)))
	c := <-q.C
	if c.Tag != 999 || !errors.Is(c.Err, ErrKernelFailed) || !strings.Contains(c.Err.Error(), "broken") {
		t.Fatalf("%+v", c)
	}
	var ev *Event
	must(t, y.Fill(1, WithEvent(&ev)))
	must(t, ev.Notify(q, 1000))
	if c := <-q.C; c.Tag != 1000 || c.Err != nil {
		t.Fatalf("%+v", c)
	}
	ev.Close()
	must(t, q.Close())
	if _, ok := <-q.C; ok {
		t.Fatal("C open after Close")
	}
}

func TestRuntimeOption(t *testing.T) {
	rt, err := NewRuntime(1)
	must(t, err)
	n, err := rt.Threads()
	must(t, err)
	if n != 1 {
		t.Fatalf("%d threads", n)
	}
	x := mk(t)(Zeros(DTypeF64, 3))
	defer x.Close()
	must(t, x.Fill(2, WithRuntime(rt)))
	must(t, rt.WaitIdle(-1))
	assertClose(t, "fill on a runtime", readF64(t, x), []float64{2, 2, 2}, 0)
	must(t, rt.Shutdown(ShutdownDrain))
	if err := x.Fill(3, WithRuntime(rt)); !errors.Is(err, ErrShutdown) {
		t.Fatalf("submission after shutdown: %v", err)
	}
	must(t, rt.Close())
}

func TestFinalizerFreesForgottenHandles(t *testing.T) {
	base := HandlesLive()
	func() {
		for i := 0; i < 100; i++ {
			if _, err := Zeros(DTypeF64, 2); err != nil {
				t.Fatal(err)
			}
		}
	}()
	for i := 0; i < 100 && HandlesLive() > base; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if live := HandlesLive(); live > base {
		t.Fatalf("%d handles still live after GC (base %d)", live, base)
	}
}
