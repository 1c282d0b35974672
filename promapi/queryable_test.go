package promapi

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
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
	v := instant(t, q, `sum by (key, route) (increase(latency_ms_count[5m]))`, d.now)
	want := d.valuesBy(math.MinInt64, math.MaxInt64, func(e demoEvent) string { return e.key + " " + e.route })
	if len(v) != len(want) {
		t.Fatalf("%d series, want %d", len(v), len(want))
	}
	for _, s := range v {
		n := float64(len(want[s.Metric.Get("key")+" "+s.Metric.Get("route")]))
		if math.Abs(s.F-n) > 1e-9*n {
			t.Errorf("%v: increase %g, want exactly %g", s.Metric, s.F, n)
		}
	}
}
