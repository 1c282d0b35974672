package promapi

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/slide-metrics/slide/window"
)

func testEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
}

func instant(t *testing.T, q *Queryable, expr string, at time.Time) promql.Vector {
	t.Helper()
	qry, err := testEngine().NewInstantQuery(context.Background(), q, nil, expr, at)
	if err != nil {
		t.Fatal(err)
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQuantilePerKeyMatchesOracle: histogram_quantile over rate of the native histogram,
// per key, is within 2.5% of the exact nearest-rank p95 of the key's events in the window,
// for a native:5 ring (exact buckets) and a ddsketch ring (re-bucketed).
func TestQuantilePerKeyMatchesOracle(t *testing.T) {
	for _, kind := range []string{"native:5", "ddsketch:0.01"} {
		t.Run(kind, func(t *testing.T) {
			d := newDemo(t, kind, 5, 40)
			q := NewQueryable(d.store, func() time.Time { return d.now }, 0)
			v := instant(t, q, `histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`, d.now)
			want := d.valuesBy(math.MinInt64, math.MaxInt64, func(e demoEvent) string { return e.key })
			if len(v) != len(want) {
				t.Fatalf("%d keys answered, want %d: %v", len(v), len(want), v)
			}
			for _, s := range v {
				key := s.Metric.Get("key")
				exact := nearestRank(want[key], 0.95)
				if rel := math.Abs(s.F-exact) / exact; rel > 0.025 {
					t.Errorf("key %s: p95 %g, exact %g: off by %.2f%%", key, s.F, exact, 100*rel)
				}
			}
		})
	}
}

// TestIncreaseOfCountIsExactAtNow: the counters start at zero at the retention's start and
// end with a sample at now, so increase over the whole retention extrapolates nothing.
func TestIncreaseOfCountIsExactAtNow(t *testing.T) {
	d := newDemo(t, "native:5", 3, 20)
	q := NewQueryable(d.store, func() time.Time { return d.now }, 0)
	want := d.valuesBy(math.MinInt64, math.MaxInt64, func(e demoEvent) string { return e.key + " " + e.route })
	// At now, and a second before it (a client's clock behind the server's: liveSkew), the
	// last sample holds the slot in progress.
	for _, at := range []time.Time{d.now, d.now.Add(-time.Second)} {
		v := instant(t, q, `sum by (key, route) (increase(latency_ms_count[5m]))`, at)
		if len(v) != len(want) {
			t.Fatalf("%d series, want %d", len(v), len(want))
		}
		for _, s := range v {
			n := float64(len(want[s.Metric.Get("key")+" "+s.Metric.Get("route")]))
			if math.Abs(s.F-n) > 1e-9*n {
				t.Errorf("at %v: %v: increase %g, want exactly %g", at, s.Metric, s.F, n)
			}
		}
	}
}

// TestIncreaseExtrapolation: at a past instant on a slot boundary, increase(M_count[1m])
// reads the six slot ends in (t-1m, t]: their difference is the count of the last five slots
// of the minute, which PromQL extrapolates to the whole minute (the first sample is one
// sample interval after the range's start: under 1.1 intervals, so it extends all the way),
// × 6/5. So the answer is exactly 6/5 × the last five slots' count, and it differs from the
// minute's exact count by (the five slots' mean − the first slot's count): Prometheus' own
// extrapolation of any scraped counter, nothing of ours.
func TestIncreaseExtrapolation(t *testing.T) {
	d := newDemo(t, "native:5", 3, 20)
	q := NewQueryable(d.store, func() time.Time { return d.now }, 0)
	at := window.FloorDiv(d.now.UnixMilli(), 10_000)*10_000 - 60_000 // a boundary a minute back
	v := instant(t, q, `sum by (key) (increase(latency_ms_count[1m]))`, time.UnixMilli(at))
	perSlot := map[string][6]float64{} // by key, slots of the minute oldest first
	for _, e := range d.events {
		if e.ts >= at-60_000 && e.ts < at {
			c := perSlot[e.key]
			c[(e.ts-(at-60_000))/10_000]++
			perSlot[e.key] = c
		}
	}
	if len(v) != len(perSlot) || len(v) == 0 {
		t.Fatalf("%d keys answered, %d in the oracle", len(v), len(perSlot))
	}
	for _, s := range v {
		c := perSlot[s.Metric.Get("key")]
		last5 := c[1] + c[2] + c[3] + c[4] + c[5]
		if want := last5 * 6 / 5; math.Abs(s.F-want) > 1e-9*want {
			t.Errorf("%v: increase %g, want 6/5 × %g = %g", s.Metric, s.F, last5, want)
		}
		exact := last5 + c[0]
		if err := s.F - exact; math.Abs(err-(last5/5-c[0])) > 1e-9*exact {
			t.Errorf("%v: off the exact %g by %g, want the five slots' mean − the first's count = %g", s.Metric, exact, err, last5/5-c[0])
		}
	}
}

// TestSelectNamesAndMatchers: names resolve to a metric's four series, a regexp on
// __name__ across them, label matchers select as Prometheus', a label no series can have
// reads as "", and a derived name that is itself a slide metric is that metric.
func TestSelectNamesAndMatchers(t *testing.T) {
	d := newDemo(t, "native:5", 2, 2)
	if err := d.store.ObserveAt(d.now.UnixMilli(), window.Event{TS: d.now.UnixMilli(), Metric: "errors_count", Key: "k0aa", Value: 7, Count: 1}); err != nil {
		t.Fatal(err)
	}
	q := NewQueryable(d.store, d.now_, 0)
	count := func(expr string) map[string]int {
		t.Helper()
		out := map[string]int{}
		for _, s := range instant(t, q, expr, d.now) {
			out[s.Metric.Get("__name__")+" "+s.Metric.Get("route")]++
		}
		return out
	}
	names := func(m map[string]int) int { return len(m) }
	if got := count(`{__name__=~"latency_ms.*", route="/pay"}`); names(got) != 4 || got["latency_ms /pay"] != 2 || got["latency_ms_max /pay"] != 2 {
		t.Errorf("regexp on __name__: %v", got)
	}
	if got := count(`latency_ms_count{__reserved__="x"}`); len(got) != 0 {
		t.Errorf("a label no series has, = x: %v", got)
	}
	if got := count(`latency_ms_count{__reserved__=""}`); got["latency_ms_count /pay"] != 2 || got["latency_ms_count /search"] != 2 {
		t.Errorf("a label no series has, = \"\": %v", got)
	}
	if got := count(`latency_ms_sum{key!~"k0.*"}`); got["latency_ms_sum /pay"] != 1 {
		t.Errorf("key!~: %v", got)
	}
	// errors_count is a slide metric: the name is its histogram, errors' counter is hidden.
	v := instant(t, q, `errors_count`, d.now)
	if len(v) != 1 || v[0].H == nil || v[0].H.Count != 1 {
		t.Errorf("errors_count: %v, want the one histogram of the metric errors_count", v)
	}
}

// TestBucketsStayInTheirSlot: re-bucketed slots (ddsketch) whose buckets meet the previous
// slot's or series' last bucket keep their own counts: every cumulative histogram's
// buckets hold exactly its count (histogram_fraction over every value is 1), at each slot
// end, for two series of one value a slot in the same bucket.
func TestBucketsStayInTheirSlot(t *testing.T) {
	now := t0.UnixMilli()
	st, err := window.NewStore(window.StoreConfig{Now: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	cur := window.FloorDiv(now, 10_000)
	for i := cur - 29; i <= cur; i++ {
		for _, key := range []string{"a", "b"} {
			at := min(i*10_000+9_999, now)
			if err := st.ObserveAt(at, window.Event{TS: min(i*10_000+1, now), Metric: "m", Key: key, Value: 100, Count: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	q := NewQueryable(st, func() time.Time { return t0 }, 0)
	for i := cur - 29; i < cur; i++ {
		at := time.UnixMilli((i + 1) * 10_000)
		v := instant(t, q, `histogram_fraction(0, 1e9, m)`, at)
		if len(v) != 2 {
			t.Fatalf("at slot %d: %v", i, v)
		}
		for _, s := range v {
			if s.F != 1 {
				t.Errorf("at the end of slot %d, %s: buckets hold %g of the count, want 1", i, s.Metric, s.F)
			}
		}
	}
}
