package tensorasync_test

import (
	"context"
	"fmt"
	"time"

	ta "tensorasync"
)

// The README's example.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, _ := ta.FromSlice([]float64{1, 2, 3, 4}, 2, 2) // copied in
	y, _ := ta.Zeros(ta.DTypeF64, 2, 2)
	defer x.Close()
	defer y.Close()
	ta.Axpy(y, 3, x) // y = 3x + y, on a worker
	y.Scale(2)       // ordered after the axpy by y's epoch queue
	out, err := ta.Read[float64](ctx, y)
	fmt.Println(out, err)
	// Output: [6 12 18 24] <nil>
}

// A Go kernel over a strided view, and its failure as an error value.
func ExampleSubmit() {
	ctx := context.Background()
	x, _ := ta.FromSlice([]float64{1, 2, 3, 4, 5, 6}, 2, 3)
	col, _ := x.Slice(ta.All(), ta.At(1)) // column 1: [2 5]
	ta.Submit("negate", func(v []ta.View) error {
		a, err := ta.ArrayOf[float64](v[0])
		if err != nil {
			return err
		}
		for i := 0; i < a.Shape[0]; i++ {
			a.Set(-a.At(i), i)
		}
		return nil
	}, []ta.Access{ta.Updates(col)})
	out, _ := ta.Read[float64](ctx, x)
	fmt.Println(out)
	ta.Submit("refuse", func([]ta.View) error { return fmt.Errorf("not today") }, []ta.Access{ta.Updates(col)})
	err := x.Wait(ctx)
	fmt.Println(err)
	// Output:
	// [1 -2 3 4 -5 6]
	// refuse: TA_STATUS_KERNEL_FAILED: not today
}

// Completions delivered on a channel.
func ExampleCompletionQueue() {
	q, _ := ta.NewCompletionQueue(8)
	defer q.Close()
	x, _ := ta.Zeros(ta.DTypeF64, 1000)
	defer x.Close()
	x.Fill(1, ta.WithCompletionQueue(q, 42))
	c := <-q.C
	fmt.Println(c.Tag, c.Err)
	// Output: 42 <nil>
}
