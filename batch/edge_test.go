package batch

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// runWithin runs f in a goroutine and fails the test if it has not returned within a
// generous deadline: a guard for inputs that once made a job loop forever.
func runWithin(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not return (an endless loop)")
	}
}

// Timestamps within one span of the earliest int64 (a corrupt or sentinel value in an
// export) once made now − span wrap around to the far future: every row "left" its window
// over and over and slide batch spun forever with no output. Nothing has left such a window.
func TestTimeWindowNearMinInt64(t *testing.T) {
	in := "ts,amount\n-9223372036854775800,1\n-9223372036854775700,2\n-9223372036854775000,4\n0,8\n"
	for _, agg := range []string{AggSum, AggCount, AggMax, AggMin, AggP50} {
		var res Result
		var series []string
		var err error
		runWithin(t, func() { res, series, err = runJob(t, Job{Span: time.Second, Agg: agg}, in) })
		if err != nil {
			t.Fatalf("%v: %v", agg, err)
		}
		want := map[string][]float64{"sum": {1, 3, 7, 8}, "count": {1, 2, 3, 1}, "max": {1, 2, 4, 8},
			"min": {1, 1, 1, 8}, "p50": {1, 1, 2, 8}}[agg]
		if len(series) != len(want) {
			t.Fatalf("%v: windows %q, want %v", agg, series, want)
		}
		for i, s := range series {
			// p50 is within the sketch's accuracy (and clamped to min and max); the others exact.
			if v, err := strconv.ParseFloat(s, 64); err != nil || math.Abs(v-want[i]) > 0.02*want[i] {
				t.Errorf("%v: windows %q, want %v (best %v)", agg, series, want, res.Best)
				break
			}
		}
	}
}
