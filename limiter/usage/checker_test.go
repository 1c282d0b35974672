package usage_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

// t0 is 2025-11-30T08:00:00Z, an hour boundary.
var t0 = time.UnixMilli(1764489600000).UTC()

func newStore(t testing.TB) *window.Store {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{
		Ring:    window.RingConfig{Slot: 10 * time.Second, Slots: 30},
		Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func observe(t testing.TB, st *window.Store, now time.Time, metric, key string, v float64, n uint64) {
	t.Helper()
	if err := st.ObserveAt(now.UnixMilli(), window.Event{TS: now.UnixMilli(), Metric: metric, Key: key, Value: v, Count: n}); err != nil {
		t.Fatalf("observe %s/%s at %v: %v", metric, key, now, err)
	}
}

func mustChecker(t testing.TB, st *window.Store, r usage.Rule) *usage.Checker {
	t.Helper()
	c, err := usage.NewChecker(st, r)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func check(t testing.TB, c *usage.Checker, key string, now time.Time) limiter.Decision {
	t.Helper()
	d, err := c.Check(context.Background(), key, now, 1)
	if err != nil {
		t.Fatalf("check %s at %v: %v", key, now, err)
	}
	return d
}

// TestQuotaDeniesAtTheRightEventAndReleasesAsTheWindowSlides: a 1 h sum quota of 1000 with
// one cost event of 100 a minute. The 11th event pushes the sum to 1100 > 1000 and the very
// next request is denied until the first minute's slot leaves the hour, exactly then.
func TestQuotaDeniesAtTheRightEventAndReleasesAsTheWindowSlides(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, usage.Rule{Name: "tenant-quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1000})

	if d := check(t, c, "tenant-42", t0); !d.Allowed || d.Remaining != 1000 || d.Limit != 1000 || d.Policy != "tenant-quota" {
		t.Fatalf("no usage yet: %+v", d)
	}
	for i := range 12 {
		now := t0.Add(time.Duration(i)*time.Minute + 5*time.Second)
		observe(t, st, now, "cost", "tenant-42", 100, 1)
		d := check(t, c, "tenant-42", now.Add(time.Second))
		sum := 100 * (i + 1)
		if wantAllowed := sum <= 1000; d.Allowed != wantAllowed {
			t.Fatalf("after event %d (sum %d): allowed = %v, want %v", i+1, sum, d.Allowed, wantAllowed)
		}
		if d.Allowed {
			if d.Remaining != int64(1000-sum) || d.RetryAfter != 0 {
				t.Fatalf("after event %d: %+v, want remaining %d", i+1, d, 1000-sum)
			}
			continue
		}
		// Sum 1100 needs one slot (t0's minute) to leave, 1200 two: at t0+1h and t0+1h+1m.
		leaves := t0.Add(time.Hour + time.Duration(sum/100-11)*time.Minute)
		if want := leaves.Sub(now.Add(time.Second)); d.RetryAfter != want || d.Remaining != 0 || d.Policy != "tenant-quota" {
			t.Fatalf("after event %d: %+v, want RetryAfter %v", i+1, d, want)
		}
		if d.Window != time.Hour || d.ResetAfter < d.RetryAfter {
			t.Fatalf("after event %d: window %v, reset %v < retry %v", i+1, d.Window, d.ResetAfter, d.RetryAfter)
		}
	}
	// Sum 1200 over minutes 0..11. Step through the release.
	for _, s := range []struct {
		at      time.Duration
		allowed bool
		retry   time.Duration
	}{
		{time.Hour - time.Millisecond, false, time.Minute + time.Millisecond}, // both first minutes still in
		{time.Hour, false, time.Minute},                                       // minute 0 left: 1100
		{time.Hour + time.Minute - time.Millisecond, false, time.Millisecond}, // still 1100
		{time.Hour + time.Minute, true, 0},                                    // minute 1 left: 1000 is not over 1000
		{2*time.Hour + 12*time.Minute, true, 0},                               // everything left
	} {
		d := check(t, c, "tenant-42", t0.Add(s.at))
		if d.Allowed != s.allowed || d.RetryAfter != s.retry {
			t.Errorf("at t0+%v: allowed %v retry %v, want %v %v", s.at, d.Allowed, d.RetryAfter, s.allowed, s.retry)
		}
	}
	// Other tenants were never limited.
	if d := check(t, c, "tenant-7", t0.Add(10*time.Minute)); !d.Allowed {
		t.Errorf("tenant-7 denied: %+v", d)
	}
}

// TestShedOnGlobalP95: shed every key while the p95 over all series exceeds 800; a denial's
// RetryAfter is the time until the oldest slot holding data leaves.
func TestShedOnGlobalP95(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, usage.Rule{Name: "shed-slow", Metric: "latency_ms", Agg: usage.Agg{Kind: usage.KindQuantile, Q: 0.95}, Window: 5 * time.Minute, Max: 800, Key: "*"})
	// Minute 0: fast traffic on two tenants.
	for i := range 100 {
		observe(t, st, t0.Add(time.Duration(i)*100*time.Millisecond), "latency_ms", fmt.Sprintf("tenant-%d", i%2), 100, 1)
	}
	if d := check(t, c, "anyone", t0.Add(20*time.Second)); !d.Allowed {
		t.Fatalf("fast traffic: %+v", d)
	}
	// At 1m: a burst of 1000 slow requests on a third tenant.
	slow := t0.Add(time.Minute)
	observe(t, st, slow, "latency_ms", "tenant-9", 1000, 1000)
	d := check(t, c, "tenant-0", slow.Add(3*time.Second))
	// Oldest slot with data is t0's [0, 10s): it leaves at t0+5m.
	if d.Allowed || d.Policy != "shed-slow" || d.RetryAfter != t0.Add(5*time.Minute).Sub(slow.Add(3*time.Second)) {
		t.Fatalf("slow burst: %+v, want a denial retrying when t0's slot leaves", d)
	}
	// At 5m the fast slots have left, the slow one has not: still shedding, now until 6m.
	at := t0.Add(5*time.Minute + 30*time.Second)
	if d := check(t, c, "tenant-1", at); d.Allowed || d.RetryAfter != slow.Add(5*time.Minute).Sub(at) {
		t.Fatalf("at 5m30s: %+v, want a denial until the slow slot leaves at 6m", d)
	}
	if d := check(t, c, "tenant-1", slow.Add(5*time.Minute)); !d.Allowed {
		t.Fatalf("after the slow slot left: %+v", d)
	}
}

// TestMaxRetryIsExact: the max of the remaining slots must be within the bound.
func TestMaxRetryIsExact(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, usage.Rule{Name: "spike", Metric: "latency_ms", Agg: usage.Agg{Kind: usage.KindMax}, Window: time.Minute, Max: 600})
	observe(t, st, t0.Add(5*time.Second), "latency_ms", "k", 900, 1)  // slot 0
	observe(t, st, t0.Add(15*time.Second), "latency_ms", "k", 500, 1) // slot 1
	observe(t, st, t0.Add(35*time.Second), "latency_ms", "k", 700, 1) // slot 3
	observe(t, st, t0.Add(45*time.Second), "latency_ms", "k", 300, 1) // slot 4
	now := t0.Add(47 * time.Second)
	d := check(t, c, "k", now)
	// The newest slots within 600 are slot 4 alone (slot 3 holds 700): slots 0..3 must leave,
	// slot 3 leaves the 1-minute window at 3×10s + 60s = 90s.
	if d.Allowed || d.RetryAfter != t0.Add(90*time.Second).Sub(now) {
		t.Fatalf("%+v, want a denial until t0+90s", d)
	}
	if d := check(t, c, "k", t0.Add(90*time.Second)); !d.Allowed {
		t.Fatalf("at t0+90s: %+v", d)
	}
}

// TestRetryAfterAgainstBruteForce: after each denial, an oracle over the raw events probes
// every slot boundary after now (values change only there, and no event is added) for the
// first allowed instant, which must be exactly now + RetryAfter. Count, sum (also with
// negative values, where the sums over the remaining slots move both ways) and max.
func TestRetryAfterAgainstBruteForce(t *testing.T) {
	for _, r := range []usage.Rule{
		{Name: "count", Metric: "latency_ms", Agg: usage.Agg{Kind: usage.KindCount}, Window: 2 * time.Minute, Max: 25},
		{Name: "sum", Metric: "latency_ms", Agg: usage.Agg{Kind: usage.KindSum}, Window: 5 * time.Minute, Max: 2000},
		{Name: "max", Metric: "latency_ms", Agg: usage.Agg{Kind: usage.KindMax}, Window: 3 * time.Minute, Max: 95},
		{Name: "signed", Metric: "delta", Agg: usage.Agg{Kind: usage.KindSum}, Window: 5 * time.Minute, Max: 50},
	} {
		t.Run(r.Name, func(t *testing.T) {
			st := newStore(t)
			c := mustChecker(t, st, r)
			width := st.RingConfig(r.Metric).Slot
			var evs []rawEvent
			denials := 0
			for i := range 60 {
				now := t0.Add(time.Duration(i) * 7 * time.Second)
				v := float64((i*37)%100 + 1)
				if r.Metric == "delta" {
					v -= 45 // values in [-44, 55]
				}
				n := uint64(1 + i%3)
				observe(t, st, now, r.Metric, "k", v, n)
				evs = append(evs, rawEvent{now, v, n})
				d := check(t, c, "k", now)
				if got := oracleValue(r, evs, now, width); (got > r.Max) == d.Allowed {
					t.Fatalf("event %d: allowed %v but the oracle's %s is %v (max %v)", i, d.Allowed, r.Agg, got, r.Max)
				}
				if d.Allowed {
					continue
				}
				denials++
				first := time.Time{}
				for b := now.Truncate(width).Add(width); !b.After(now.Add(r.Window + width)); b = b.Add(width) {
					if !(oracleValue(r, evs, b, width) > r.Max) {
						first = b
						break
					}
				}
				if first.IsZero() {
					t.Fatalf("event %d: the oracle never allows", i)
				}
				if want := first.Sub(now); d.RetryAfter != want {
					t.Fatalf("event %d at t0+%v: RetryAfter %v, oracle %v", i, now.Sub(t0), d.RetryAfter, want)
				}
			}
			if denials < 3 {
				t.Fatalf("the workload triggered the rule %d times; make it bite", denials)
			}
		})
	}
}

type rawEvent struct {
	ts time.Time
	v  float64
	n  uint64
}

// oracleValue is the rule's aggregate at instant at over the events: the window covers the
// slot of at and the Window/width − 1 before it.
func oracleValue(r usage.Rule, evs []rawEvent, at time.Time, width time.Duration) float64 {
	end := at.Truncate(width).Add(width)
	start := end.Add(-r.Window)
	var count uint64
	var sum, mx float64
	for _, e := range evs {
		if e.ts.Before(start) || !e.ts.Before(end) {
			continue
		}
		if count == 0 || e.v > mx {
			mx = e.v
		}
		count += e.n
		sum += e.v * float64(e.n)
	}
	switch r.Agg.Kind {
	case usage.KindCount:
		return float64(count)
	case usage.KindSum:
		return sum
	}
	if count == 0 {
		return -1e300
	}
	return mx
}

// TestWithLimiterService: usage rules run as checkers of the limiter's multi-policy
// decision, and the denial names the rule that denied.
func TestWithLimiterService(t *testing.T) {
	st := newStore(t)
	checkers, err := usage.NewCheckers(st, []usage.Rule{
		{Name: "tenant-quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := limiter.NewService(limiter.Config{
		Policies: []limiter.Policy{{Name: "per-tenant", Algorithm: limiter.FixedWindow, Limit: 100, Window: time.Minute}},
		Checkers: checkers,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	checks := []limiter.Charge{{Policy: "per-tenant", Key: "tenant-42", Cost: 1}, {Policy: "tenant-quota", Key: "tenant-42", Cost: 1}}
	out := make([]limiter.Decision, 2)
	now := t0.Add(30 * time.Second)
	if d, err := svc.Decide(ctx, now, checks, out); err != nil || !d.Allowed {
		t.Fatalf("before usage: %+v, %v", d, err)
	}
	observe(t, st, now, "cost", "tenant-42", 1500, 1)
	d, err := svc.Decide(ctx, now.Add(time.Second), checks, out)
	if err != nil || d.Allowed || d.Policy != "tenant-quota" || d.RetryAfter != t0.Add(time.Hour).Sub(now.Add(time.Second)) {
		t.Fatalf("over quota: %+v, %v; want a denial by tenant-quota until t0+1h", d, err)
	}
	if !out[0].Allowed || out[1].Allowed {
		t.Fatalf("per-check decisions %+v", out)
	}
}

func TestNewCheckerRefusesWindowsTheRingCannotAnswer(t *testing.T) {
	st := newStore(t)
	for _, c := range []struct {
		r   usage.Rule
		msg string
	}{
		{usage.Rule{Name: "q", Metric: "latency_ms", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1}, `1h is longer than the retention 5m of metric "latency_ms" (rings 10s:30); give the metric rings that serve it: --rings cost=1m:60,latency_ms=10s:360`},
		{usage.Rule{Name: "q", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: 90 * time.Second, Max: 1}, `90s is not a multiple of the slot width 1m of metric "cost" (rings 1m:60); give the metric rings that serve it: --rings cost=30s:120`},
		{usage.Rule{Name: "bad name!", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1}, "name"},
		{usage.Rule{Name: "q", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1}, "metric: required"},
		{usage.Rule{Name: "q", Metric: "cost", Window: time.Hour, Max: 1}, "agg: required"},
		{usage.Rule{Name: "q", Metric: "cost", Agg: usage.Agg{Kind: usage.KindCount}, Window: time.Hour, Max: -1}, "never negative"},
		{usage.Rule{Name: "q", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1, Key: "{key}-{key}"}, "once"},
		{usage.Rule{Name: "q", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: math.NaN()}, "finite"},
		{usage.Rule{Name: "q", Metric: "cost", Agg: usage.Agg{Kind: usage.KindQuantile, Q: 1.5}, Window: time.Hour, Max: 1}, "outside [0, 1]"},
	} {
		_, err := usage.NewChecker(st, c.r)
		if !errors.Is(err, usage.ErrInvalidRule) || !errors.Is(err, limiter.ErrInvalidPolicy) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: err %v, want an invalid rule error containing %q", c.r, err, c.msg)
		}
	}
}

// TestKeyTemplate: the rule reads "{key}/checkout" for key tenant-42.
func TestKeyTemplate(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, usage.Rule{Name: "checkout", Metric: "latency_ms", Agg: usage.Agg{Kind: usage.KindCount}, Window: time.Minute, Max: 1, Key: "{key}/checkout"})
	observe(t, st, t0, "latency_ms", "tenant-42/checkout", 1, 2)
	observe(t, st, t0, "latency_ms", "tenant-7", 1, 5)
	if d := check(t, c, "tenant-42", t0); d.Allowed {
		t.Errorf("tenant-42/checkout has 2 > 1: %+v", d)
	}
	if d := check(t, c, "tenant-7", t0); !d.Allowed {
		t.Errorf("tenant-7/checkout has nothing: %+v", d)
	}
}

func TestCheckAllocatesNothingForAnAllowedDecision(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, usage.Rule{Name: "tenant-quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1e9})
	observe(t, st, t0, "cost", "tenant-42", 5, 1)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if d, err := c.Check(ctx, "tenant-42", t0, 1); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per allowed sum check, want 0", allocs)
	}
}

// TestMatchSelectsByLabels (issue #27): a quota with match: 'route="/pay"' sums only the
// key's /pay series: the key's other routes and its unlabelled series, however large, do
// not count, and another key's /pay series belongs to that key. With key "*" it sums every
// key's /pay series.
func TestMatchSelectsByLabels(t *testing.T) {
	st := newStore(t)
	series := func(key, route string) string {
		b, err := window.AppendSeries(nil, key, []window.Label{{Name: "route", Value: route}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	c := mustChecker(t, st, usage.Rule{Name: "pay", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 100, Match: `route="/pay"`})
	observe(t, st, t0, "cost", series("t1", "/pay"), 60, 1)
	observe(t, st, t0, "cost", series("t1", "/search"), 500, 1)
	observe(t, st, t0, "cost", "t1", 500, 1)
	observe(t, st, t0, "cost", series("t2", "/search"), 500, 1)
	now := t0.Add(time.Second)
	if d := check(t, c, "t1", now); !d.Allowed || d.Remaining != 40 {
		t.Errorf("t1 at 60 on /pay: %+v, want allowed with 40 remaining", d)
	}
	if d := check(t, c, "t2", now); !d.Allowed || d.Remaining != 100 {
		t.Errorf("t2 without /pay: %+v, want allowed, nothing used", d)
	}
	observe(t, st, now, "cost", series("t1", "/pay"), 60, 1)
	d := check(t, c, "t1", now.Add(time.Second))
	if d.Allowed || d.RetryAfter <= 0 {
		t.Errorf("t1 at 120 on /pay: %+v, want denied with a RetryAfter", d)
	}
	if d := check(t, c, "t2", now.Add(time.Second)); !d.Allowed {
		t.Errorf("t2 denied by t1's /pay: %+v", d)
	}
	all := mustChecker(t, st, usage.Rule{Name: "pay-all", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 200, Key: "*", Match: `route="/pay"`})
	observe(t, st, now, "cost", series("t2", "/pay"), 70, 1)
	if d := check(t, all, "anyone", now.Add(time.Second)); !d.Allowed {
		t.Errorf("every /pay at 190: %+v, want allowed", d)
	}
	observe(t, st, now, "cost", series("t3", "/pay"), 20, 1)
	if d := check(t, all, "anyone", now.Add(time.Second)); d.Allowed {
		t.Errorf("every /pay at 210: %+v, want denied", d)
	}
}

// TestKeyReadsTheKeyLabel: without match:, a rule's key selects by the key label as the
// cluster's reads and the query API do once a metric has labelled series: an exact key
// sums every series of that key, labelled or not, and a glob matches keys, never the labels
// after them (*-1 selects t-1's /pay series, whose series string does not end in -1).
func TestKeyReadsTheKeyLabel(t *testing.T) {
	st := newStore(t)
	labelled, err := window.AppendSeries(nil, "t-1", []window.Label{{Name: "route", Value: "/pay"}})
	if err != nil {
		t.Fatal(err)
	}
	observe(t, st, t0, "cost", "t-1", 60, 1)
	observe(t, st, t0, "cost", string(labelled), 60, 1)
	observe(t, st, t0, "cost", "t-2", 500, 1)
	now := t0.Add(time.Second)
	for _, key := range []string{"", "*-1"} {
		c := mustChecker(t, st, usage.Rule{Name: "q", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 100, Key: key})
		if d := check(t, c, "t-1", now); d.Allowed || d.RetryAfter <= 0 {
			t.Errorf("key %q: t-1 at 120 over two series: %+v, want denied", key, d)
		}
	}
}

// TestMatchOnAMetricWithoutLabels: on a metric that has no labelled series a rule with
// match: reads its key's series by one lookup, and its matchers still decide: code=""
// selects it (it has no code), code="500" does not.
func TestMatchOnAMetricWithoutLabels(t *testing.T) {
	st := newStore(t)
	observe(t, st, t0, "cost", "t1", 150, 1)
	now := t0.Add(time.Second)
	for match, allowed := range map[string]bool{`code=""`: false, `code="500"`: true} {
		c := mustChecker(t, st, usage.Rule{Name: "q", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 100, Match: match})
		if d := check(t, c, "t1", now); d.Allowed != allowed || !d.Allowed && d.RetryAfter <= 0 {
			t.Errorf("match %s: %+v, want allowed %v", match, d, allowed)
		}
	}
}
