package tensorasync

import (
	"sort"
	"testing"
	"time"

	"tensorasync/internal/cbench"
)

// BenchmarkScaleChain and BenchmarkScaleChainC run one pattern, n dependent
// scales of a 1-element f64 tensor then one wait, through the Go binding and
// as a C loop (internal/cbench), in one `go test -bench ScaleChain` run: the
// ns/op of the two is the per-operation cost with and without the binding.
func BenchmarkScaleChain(b *testing.B) {
	x, err := Zeros(DTypeF64, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := x.Scale(1); err != nil {
			b.Fatal(err)
		}
	}
	if err := x.WaitBlocking(-1); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkScaleChainC(b *testing.B) {
	if err := cbench.ScaleChain(b.N); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEventWait is one submission and one Event.Wait round trip.
func BenchmarkEventWait(b *testing.B) {
	x, err := Zeros(DTypeF64, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	ctx := bg
	for i := 0; i < b.N; i++ {
		var ev *Event
		if err := x.Scale(1, WithEvent(&ev)); err != nil {
			b.Fatal(err)
		}
		if err := ev.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		ev.Close()
	}
}

// BenchmarkScaleChainRatio alternates the two loops (Go binding, then C) in
// rounds of b.N operations and reports the medians of the rounds' ns/op and
// their ratio, so that both sides see the same machine state.
func BenchmarkScaleChainRatio(b *testing.B) {
	const rounds = 5
	var goNs, cNs []float64
	for r := 0; r < rounds; r++ {
		x, err := Zeros(DTypeF64, 1)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if err := x.Scale(1); err != nil {
				b.Fatal(err)
			}
		}
		if err := x.WaitBlocking(-1); err != nil {
			b.Fatal(err)
		}
		goNs = append(goNs, float64(time.Since(start).Nanoseconds())/float64(b.N))
		x.Close()
		start = time.Now()
		if err := cbench.ScaleChain(b.N); err != nil {
			b.Fatal(err)
		}
		cNs = append(cNs, float64(time.Since(start).Nanoseconds())/float64(b.N))
	}
	sort.Float64s(goNs)
	sort.Float64s(cNs)
	b.ReportMetric(goNs[rounds/2], "go-ns/op")
	b.ReportMetric(cNs[rounds/2], "c-ns/op")
	b.ReportMetric(goNs[rounds/2]/cNs[rounds/2], "go/c")
}

// BenchmarkSubmitChain is n dependent Go kernels (Submit, updating a
// 1-element tensor) then one wait: the per-kernel cost of the cgo callback.
func BenchmarkSubmitChain(b *testing.B) {
	x, err := Zeros(DTypeF64, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	k := func(v []View) error { return nil }
	acc := []Access{Updates(x)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Submit("bench", k, acc); err != nil {
			b.Fatal(err)
		}
	}
	if err := x.WaitBlocking(-1); err != nil {
		b.Fatal(err)
	}
}
