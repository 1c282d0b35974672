package promapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// TestRangePastRetentionWarns: a range selector longer than the metric's retention
// (a Grafana stat panel's increase(M_count[$__range]) over the last hour, a ring of 5
// minutes) reads only the retention, so its answer is the retention's count, not the
// hour's. Prometheus itself would say nothing (its data is what it is); slide knows what
// it keeps, and /v1/window refuses such a window, so the answer carries a warning naming
// the retention, on the engine and on the pushdown alike, and a range within it none.
func TestRangePastRetentionWarns(t *testing.T) {
	d := newDemo(t, "native:5", 3, 5)
	for _, off := range []bool{false, true} {
		c := clientOf(t, serveDemo(t, d, Config{DisablePushdown: off}).URL)
		for _, q := range []string{
			`sum(increase(latency_ms_count[1h]))`,
			`histogram_quantile(0.95, sum by (key) (rate(latency_ms[1h])))`,
			`max_over_time(latency_ms_max[6m])`,
		} {
			v, warn, _, err := c.Query(context.Background(), q, d.now)
			if err != nil || v.String() == "" || len(warn) != 1 ||
				!strings.Contains(warn[0], `is longer than the retention 5m of slide metric "latency_ms" (30 slots of 10s)`) {
				t.Errorf("%s (engine only: %v): %v %q %v, want its answer and the retention's warning", q, off, v, warn, err)
			}
		}
		for _, q := range []string{
			`sum(increase(latency_ms_count[5m]))`,
			`histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`,
			`latency_ms_max`,
		} {
			if _, warn, _, err := c.Query(context.Background(), q, d.now); err != nil || len(warn) != 0 {
				t.Errorf("%s (engine only: %v): %q %v, want no warning", q, off, warn, err)
			}
		}
		_, warn, _, err := c.QueryRange(context.Background(), `sum(rate(latency_ms_count[10m]))`,
			v1.Range{Start: d.now.Add(-2 * time.Minute), End: d.now, Step: 30 * time.Second})
		if err != nil || len(warn) != 1 || !strings.Contains(warn[0], "[10m] is longer than the retention 5m") {
			t.Errorf("range query (engine only: %v): %q %v", off, warn, err)
		}
	}
}

// TestPastWindowPartlyEvictedWarns: a window that reaches back past what the rings hold
// (increase(M_count[5m]) at an instant 2 minutes ago, a ring of 5 minutes; a range query's
// early steps) reads only its part inside the retention, from the zero its series start
// at there, so it counts less than its range held; the answer says so in its warnings, on
// the engine and the pushdown alike. Prometheus answers from what it has; slide knows what
// it dropped. A window within the retention, the retention's own at now, and a series
// that began inside the retention (whose zero is its true start) give none.
func TestPastWindowPartlyEvictedWarns(t *testing.T) {
	d := newDemo(t, "native:5", 3, 5)
	ctx := context.Background()
	const partial = `slide metric "latency_ms" keeps 5m (30 slots of 10s), from 2027-01-15T07:55:10Z: a [5m] window ending before 2027-01-15T08:00:10Z reaches back past it and reads only its part after it`
	for _, off := range []bool{false, true} {
		c := clientOf(t, serveDemo(t, d, Config{DisablePushdown: off}).URL)
		for _, q := range []string{
			`sum(increase(latency_ms_count[5m]))`,
			`histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`,
		} {
			v, warn, _, err := c.Query(ctx, q, d.now.Add(-2*time.Minute))
			if err != nil || v.String() == "" || len(warn) != 1 || warn[0] != partial {
				t.Errorf("%s 2m ago (engine only: %v): %v %q %v, want its answer and the warning %q", q, off, v, warn, err, partial)
			}
			// A range query's early steps ramp up from the ring's start on its graph: no
			// warning, or every panel of a dashboard wider than the ring would carry one.
			_, warn, _, err = c.QueryRange(ctx, q, v1.Range{Start: d.now.Add(-2 * time.Minute), End: d.now, Step: 15 * time.Second})
			if err != nil || len(warn) != 0 {
				t.Errorf("%s over the last 2m (engine only: %v): %q %v, want no warning", q, off, warn, err)
			}
			for _, at := range []time.Time{d.now, d.now.Add(-time.Second)} {
				if _, warn, _, err := c.Query(ctx, q, at); err != nil || len(warn) != 0 {
					t.Errorf("%s at %v (engine only: %v): %q %v, want no warning", q, at, off, warn, err)
				}
			}
		}
		short := `histogram_quantile(0.95, sum by (key) (rate(latency_ms[1m])))`
		if _, warn, _, err := c.Query(ctx, short, d.now.Add(-2*time.Minute)); err != nil || len(warn) != 0 {
			t.Errorf("%s 2m ago (engine only: %v): %q %v, want no warning", short, off, warn, err)
		}
		if _, warn, _, err := c.QueryRange(ctx, short, v1.Range{Start: d.now.Add(-3 * time.Minute), End: d.now, Step: 15 * time.Second}); err != nil || len(warn) != 0 {
			t.Errorf("%s over the last 3m (engine only: %v): %q %v, want no warning", short, off, warn, err)
		}
	}
	st, _ := seriesStartStore(t)
	a, err := New(Config{Store: st, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	c := clientOf(t, srv.URL)
	if v, warn, _, err := c.Query(ctx, `increase(m_count{key="new"}[5m])`, t0.Add(-time.Minute)); err != nil || v.String() == "" || len(warn) != 0 {
		t.Errorf("a series begun inside the retention: %v %q %v, want its answer and no warning", v, warn, err)
	}
	if _, warn, _, err := c.Query(ctx, `increase(m_count{key="old"}[5m])`, t0.Add(-time.Minute)); err != nil || len(warn) != 1 {
		t.Errorf("a series with events from the retention's start: %q %v, want a warning", warn, err)
	}
}

// TestRangeShorterThanTwoSlotsWarns: a metric's samples are a slot apart, so rate, increase
// and the like over a range shorter than two slots have no answer wherever the window holds
// one sample (a 1m ring under Grafana's $__rate_interval of 40 s: every past step), and the
// empty panel would not say why; the answer's warnings name the slot and the range to use,
// on the engine and the pushdown alike. Two slots or more, or a function that reads one
// sample (max_over_time), give none.
func TestRangeShorterThanTwoSlotsWarns(t *testing.T) {
	d := newDemo(t, "native:5", 3, 5)
	ctx := context.Background()
	want := func(f, r string) string {
		return "the range [" + r + "] of " + f + ` over slide metric "latency_ms" is shorter than two of its slots (10s), one sample each: a window holding one sample has no answer; use at least [20s]`
	}
	for _, off := range []bool{false, true} {
		c := clientOf(t, serveDemo(t, d, Config{DisablePushdown: off}).URL)
		for _, q := range []struct{ q, f, r string }{
			{`sum(rate(latency_ms_count[15s]))`, "rate", "15s"},
			{`increase(latency_ms_sum{key="k0aa"}[10s])`, "increase", "10s"},
			{`histogram_quantile(0.95, sum by (key) (rate(latency_ms[15s])))`, "rate", "15s"},
			{`histogram_quantile(0.95, increase(latency_ms[5s]))`, "increase", "5s"},
			{`irate(latency_ms_count[19s])`, "irate", "19s"},
		} {
			_, warn, _, err := c.QueryRange(ctx, q.q, v1.Range{Start: d.now.Add(-2 * time.Minute), End: d.now, Step: 10 * time.Second})
			if err != nil || len(warn) != 1 || warn[0] != want(q.f, q.r) {
				t.Errorf("%s (engine only: %v): %q %v, want %q", q.q, off, warn, err, want(q.f, q.r))
			}
		}
		for _, q := range []string{
			`sum(rate(latency_ms_count[20s]))`,
			`histogram_quantile(0.95, sum by (key) (rate(latency_ms[30s])))`,
			`max_over_time(latency_ms_max[5s])`,
		} {
			if _, warn, _, err := c.QueryRange(ctx, q, v1.Range{Start: d.now.Add(-2 * time.Minute), End: d.now, Step: 10 * time.Second}); err != nil || len(warn) != 0 {
				t.Errorf("%s (engine only: %v): %q %v, want no warning", q, off, warn, err)
			}
		}
	}
}
