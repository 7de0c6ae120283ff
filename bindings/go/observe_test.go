package tensorasync

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type traceFile struct {
	TraceEvents []struct {
		Name string  `json:"name"`
		Cat  string  `json:"cat"`
		Ph   string  `json:"ph"`
		Ts   float64 `json:"ts"`
		Dur  float64 `json:"dur"`
		Args struct {
			ID       uint64  `json:"id"`
			Outcome  string  `json:"outcome"`
			Status   string  `json:"status"`
			SubmitUs float64 `json:"submit_us"`
			ReadyUs  float64 `json:"ready_us"`
			StartUs  float64 `json:"start_us"`
			FinishUs float64 `json:"finish_us"`
			EndUs    float64 `json:"end_us"`
			Accesses []struct {
				Mode string `json:"mode"`
			} `json:"accesses"`
			Preds []struct {
				Op uint64 `json:"op"`
			} `json:"preds"`
		} `json:"args"`
	} `json:"traceEvents"`
	OtherData struct {
		Capacity uint64 `json:"capacity"`
		Recorded uint64 `json:"recorded"`
		Dropped  uint64 `json:"dropped"`
	} `json:"otherData"`
}

// The trace writes microseconds with three decimals.
const traceEps = 0.002

func TestTraceRecordsEachOperationOnceWithIntervalsAndEdges(t *testing.T) {
	rt, err := NewRuntime(2)
	must(t, err)
	defer rt.Close()
	on := WithRuntime(rt)
	x := mk(t)(Zeros(DTypeF64, 3))
	defer x.Close()
	y := mk(t)(Zeros(DTypeF64, 3))
	defer y.Close()
	path := filepath.Join(t.TempDir(), "run.json")
	must(t, rt.TraceStart(0))
	// The gate holds the chain back until all of it is submitted, so that
	// every operation waits for the one before it.
	release := make(chan struct{})
	must(t, Submit("obs_gate", gate(release), []Access{Updates(x)}, on))
	must(t, x.Fill(1, on))
	must(t, Submit("obs_triple", func(v []View) error {
		a, err := ArrayOf[float64](v[0])
		if err != nil {
			return err
		}
		for i := range a.Data {
			a.Data[i] *= 3
		}
		return nil
	}, []Access{Updates(x)}, on))
	must(t, Copy(y, x, on))
	must(t, y.Scale(2, on))
	close(release)
	must(t, rt.WaitIdle(-1))
	must(t, rt.TraceStop(path))
	assertClose(t, "y", readF64(t, y), []float64{6, 6, 6}, 0)

	raw, err := os.ReadFile(path)
	must(t, err)
	var tr traceFile
	must(t, json.Unmarshal(raw, &tr))
	byName := map[string]int{}
	count := map[string]int{}
	for i, e := range tr.TraceEvents {
		if e.Cat == "task" && e.Ph == "X" {
			count[e.Name]++
			byName[e.Name] = i
		}
	}
	want := []string{"obs_gate", "fill", "obs_triple", "copy", "scale"}
	if len(count) != len(want) {
		t.Fatalf("trace tasks %v, want each of %v once", count, want)
	}
	for _, n := range want {
		if count[n] != 1 {
			t.Fatalf("trace tasks %v, want each of %v once", count, want)
		}
	}
	if tr.OtherData.Recorded != 5 || tr.OtherData.Dropped != 0 {
		t.Fatalf("otherData %+v", tr.OtherData)
	}
	for _, n := range want {
		e := tr.TraceEvents[byName[n]]
		a := e.Args
		if a.Outcome != "ok" || a.Status != "TA_STATUS_OK" {
			t.Fatalf("%s: outcome %s status %s", n, a.Outcome, a.Status)
		}
		if !(a.SubmitUs <= a.ReadyUs+traceEps && a.ReadyUs <= a.StartUs+traceEps &&
			a.StartUs-e.Ts < traceEps && e.Ts-a.StartUs < traceEps &&
			e.Ts+e.Dur <= a.EndUs+traceEps && a.StartUs <= a.FinishUs+traceEps && a.FinishUs <= a.EndUs+traceEps) {
			t.Fatalf("%s: intervals out of order: %+v ts %v dur %v", n, a, e.Ts, e.Dur)
		}
	}
	// Each operation waited for the one before it (the program's
	// dependencies) and started after that one released its accesses.
	for i := 1; i < len(want); i++ {
		pred := tr.TraceEvents[byName[want[i-1]]].Args
		succ := tr.TraceEvents[byName[want[i]]].Args
		found := false
		for _, p := range succ.Preds {
			found = found || p.Op == pred.ID
		}
		if !found {
			t.Fatalf("%s's predecessors %+v lack %s (#%d)", want[i], succ.Preds, want[i-1], pred.ID)
		}
		if pred.FinishUs > succ.StartUs+traceEps {
			t.Fatalf("%s started at %v before %s finished at %v", want[i], succ.StartUs, want[i-1], pred.FinishUs)
		}
	}
	if p := tr.TraceEvents[byName["obs_gate"]].Args.Preds; len(p) != 0 {
		t.Fatalf("the gate waited for %+v", p)
	}
	if m := tr.TraceEvents[byName["copy"]].Args.Accesses; len(m) != 2 || m[0].Mode == m[1].Mode ||
		(m[0].Mode != "read" && m[0].Mode != "write") || (m[1].Mode != "read" && m[1].Mode != "write") {
		t.Fatalf("copy's accesses %+v", m)
	}
}

func TestTraceStopErrors(t *testing.T) {
	rt, err := NewRuntime(1)
	must(t, err)
	defer rt.Close()
	dir := t.TempDir()
	if err := rt.TraceStop(filepath.Join(dir, "none.json")); !errors.Is(err, ErrInvalidArgument) || err.(*Error).Message == "" {
		t.Fatalf("stop without a recording: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.json")); !os.IsNotExist(err) {
		t.Fatalf("a file was written: %v", err)
	}
	must(t, rt.TraceStart(8))
	must(t, rt.TraceStop("")) // discarded
	if err := rt.TraceStop(""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("second stop: %v", err)
	}
	must(t, rt.TraceStart(0))
	if err := rt.TraceStop(filepath.Join(dir, "no-such-dir", "t.json")); !errors.Is(err, ErrInternal) || err.(*Error).Message == "" {
		t.Fatalf("unwritable path: %v", err)
	}
}

func TestStatsCountsExactly(t *testing.T) {
	rt, err := NewRuntime(2)
	must(t, err)
	defer rt.Close()
	on := WithRuntime(rt)
	s0, err := rt.Stats()
	must(t, err)
	if s0 != (Stats{Threads: 2}) {
		t.Fatalf("a new runtime's counters: %+v", s0)
	}
	x := mk(t)(Zeros(DTypeF64, 8))
	defer x.Close()
	const n = 7
	for i := 0; i < n; i++ {
		must(t, x.Fill(complex(float64(i), 0), on))
	}
	must(t, rt.WaitIdle(-1))
	s1, err := rt.Stats()
	must(t, err)
	if s1.TasksSubmitted != n || s1.TasksCompleted != n || s1.TasksFailed != 0 || s1.TasksCancelled != 0 ||
		s1.Pending != 0 || s1.QueueDepth != 0 || s1.Threads != 2 || s1.PeakPending > n {
		t.Fatalf("after %d fills: %+v", n, s1)
	}
	// A failing kernel, and a later reader of what it poisoned: both failed.
	must(t, Submit("obs_fails", func([]View) error { return errors.New("obs failure") }, []Access{Updates(x)}, on))
	must(t, x.Scale(2, on))
	must(t, rt.WaitIdle(-1))
	s2, err := rt.Stats()
	must(t, err)
	if s2.TasksSubmitted != n+2 || s2.TasksCompleted != n+2 || s2.TasksFailed != 2 || s2.TasksCancelled != 0 || s2.Pending != 0 {
		t.Fatalf("after a failure: %+v", s2)
	}
	if s2.BusyNs < s1.BusyNs || s2.Steals < s1.Steals {
		t.Fatalf("counters went back: %+v then %+v", s1, s2)
	}
	if err := x.WaitBlocking(-1); !errors.Is(err, ErrKernelFailed) || !strings.Contains(err.Error(), "obs failure") {
		t.Fatalf("poisoned tensor: %v", err)
	}
	// Work held back by a kernel that waits on a channel: pending until released.
	y := mk(t)(Zeros(DTypeF64, 2))
	defer y.Close()
	release := make(chan struct{})
	must(t, Submit("obs_gate", gate(release), []Access{Updates(y)}, on))
	for i := 0; i < 3; i++ {
		must(t, y.Fill(1, on))
	}
	s3, err := rt.Stats()
	must(t, err)
	if s3.TasksSubmitted != n+6 || s3.Pending != 4 || s3.PeakPending < 4 || s3.TasksCompleted != n+2 {
		t.Fatalf("behind a held kernel: %+v", s3)
	}
	close(release)
	must(t, rt.WaitIdle(-1))
	s4, err := rt.Stats()
	must(t, err)
	if s4.TasksCompleted != n+6 || s4.Pending != 0 || s4.TasksFailed != 2 {
		t.Fatalf("after the release: %+v", s4)
	}
}

func TestSmallOperationsRunInPlaceUnlessDeferredOrTurnedOff(t *testing.T) {
	rt, err := NewRuntime(2)
	must(t, err)
	defer rt.Close()
	on := WithRuntime(rt)
	x := mk(t)(Zeros(DTypeF64, 4))
	defer x.Close()
	inPlace, err := rt.SmallInPlace()
	must(t, err)
	if !inPlace {
		t.Fatal("in place is off on a new runtime")
	}
	stats := func() Stats {
		s, err := rt.Stats()
		must(t, err)
		return s
	}
	s0 := stats()
	must(t, x.Fill(2, on))
	s1 := stats() // no wait: it completed before Fill returned
	if s1.TasksCompleted-s0.TasksCompleted != 1 || s1.Steals != s0.Steals {
		t.Fatalf("a small fill in place: %+v then %+v", s0, s1)
	}
	must(t, x.Fill(3, on, WithDefer()))
	must(t, rt.WaitIdle(-1))
	s2 := stats()
	if s2.TasksCompleted-s1.TasksCompleted != 1 || s2.Steals-s1.Steals != 1 {
		t.Fatalf("a deferred fill: %+v then %+v", s1, s2)
	}
	must(t, rt.SetSmallInPlace(false))
	if inPlace, err = rt.SmallInPlace(); err != nil || inPlace {
		t.Fatalf("turned off: %v %v", inPlace, err)
	}
	must(t, x.Scale(2, on))
	must(t, rt.WaitIdle(-1))
	if s3 := stats(); s3.Steals-s2.Steals != 1 {
		t.Fatalf("with in place off: %+v then %+v", s2, s3)
	}
	must(t, rt.SetSmallInPlace(true))
	for _, v := range readF64(t, x) {
		if v != 6 {
			t.Fatalf("x = %v, want 6s", readF64(t, x))
		}
	}
}

func TestDumpNamesAnOperationBlockedBehindAWriteMapping(t *testing.T) {
	rt, err := DefaultRuntime()
	must(t, err)
	defer rt.Close()
	x := mk(t)(Zeros(DTypeF64, 4))
	defer x.Close()
	must(t, x.WaitBlocking(-1))
	must(t, rt.Track(true))
	defer rt.Track(false)
	m, err := x.Map(bg, ModeWrite)
	must(t, err)
	a, err := MappedArray[float64](m)
	must(t, err)
	for i := range a.Data {
		a.Data[i] = 1
	}
	var fill *Event
	must(t, x.Fill(2, WithEvent(&fill)))
	defer fill.Close()
	text, err := rt.Dump(DumpText)
	must(t, err)
	dot, err := rt.Dump(DumpDot)
	must(t, err)
	if done, _ := fill.Poll(); done {
		t.Fatal("the fill ran while a WRITE mapping was live")
	}
	must(t, m.Release())
	must(t, fill.Wait(bg))
	must(t, rt.Track(false))

	acq := regexp.MustCompile(`(?m)^op #(\d+) "(ta_tensor_acquire\w*)": RUNNING`).FindStringSubmatch(text)
	fl := regexp.MustCompile(`(?m)^op #(\d+) "fill": WAITING`).FindStringSubmatchIndex(text)
	if acq == nil || fl == nil {
		t.Fatalf("dump lacks the mapping or the fill:\n%s", text)
	}
	fillID := text[fl[2]:fl[3]]
	block := strings.SplitN(text[fl[0]:], "\nop #", 2)[0]
	waits := regexp.MustCompile(fmt.Sprintf(`waits for op #%s "%s" \(running\) on tensor t\d+ \(f64\)`, acq[1], acq[2]))
	if !waits.MatchString(block) || !strings.Contains(block, "write") {
		t.Fatalf("the fill's entry does not name the mapping it waits for:\n%s", text)
	}
	if !strings.HasPrefix(dot, "digraph") || !strings.Contains(dot, fmt.Sprintf("op%s -> op%s", acq[1], fillID)) {
		t.Fatalf("dot:\n%s", dot)
	}
	after, err := rt.Dump(DumpText)
	must(t, err)
	if strings.Contains(after, "op #"+fillID+" ") {
		t.Fatalf("the finished fill is still listed:\n%s", after)
	}
	assertClose(t, "x", readF64(t, x), []float64{2, 2, 2, 2}, 0)
}

func TestDumpGrowsItsBuffer(t *testing.T) {
	rt, err := NewRuntime(1)
	must(t, err)
	defer rt.Close()
	on := WithRuntime(rt)
	must(t, rt.Track(true))
	src := mk(t)(Zeros(DTypeF64, 1))
	defer src.Close()
	release := make(chan struct{})
	must(t, Submit("obs_gate", gate(release), []Access{Updates(src)}, on))
	const n = 60
	for i := 0; i < n; i++ {
		d := mk(t)(Zeros(DTypeF64, 1))
		defer d.Close()
		must(t, Copy(d, src, on))
	}
	text, err := rt.Dump(DumpText)
	close(release)
	must(t, err)
	must(t, rt.WaitIdle(-1))
	if len(text) <= 4096 {
		t.Fatalf("report of %d bytes does not exercise the growth", len(text))
	}
	if c := len(regexp.MustCompile(`(?m)^op #\d+ "copy": WAITING`).FindAllString(text, -1)); c != n {
		t.Fatalf("%d waiting copies listed, want %d:\n%s", c, n, text)
	}
	if _, err := rt.Dump(DumpFormat(7)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown format: %v", err)
	}
}
