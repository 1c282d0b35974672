package query_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

type rangeAnswer struct {
	Metric string `json:"metric"`
	Key    string `json:"key"`
	Window string `json:"window"`
	Step   string `json:"step"`
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Series int    `json:"series"`
	Points []struct {
		From      int64               `json:"from"`
		To        int64               `json:"to"`
		Count     uint64              `json:"count"`
		Sum       float64             `json:"sum"`
		Min       *float64            `json:"min"`
		Max       *float64            `json:"max"`
		RatePerS  float64             `json:"rate_per_s"`
		ElapsedS  float64             `json:"elapsed_s"`
		Quantiles map[string]*float64 `json:"quantiles"`
	} `json:"points"`
}

func floatEq(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestRangeEqualsWindowAtEachStepAndOracle posts 40 slots of events (some slots empty),
// reads /v1/window at the end of every slot, then one /v1/range: each point equals the
// /v1/window answer of its slot (count, sum, min, max, quantiles; rate over the whole span
// for points whose span has elapsed) and the exact oracle over its [from, to).
func TestRangeEqualsWindowAtEachStepAndOracle(t *testing.T) {
	e := newEnv(t, nil)
	rng := rand.New(rand.NewPCG(15, 2))
	var all []event
	type snap struct{ one, glob windowAnswer }
	seen := map[int64]snap{} // by window end
	for j := int64(0); j < 40; j++ {
		lo := t0 + j*10_000
		var evs []event
		if j%5 != 2 {
			for range 100 {
				evs = append(evs, event{ts: lo + rng.Int64N(10_000), key: "tenant-" + strconv.Itoa(rng.IntN(3)), metric: "latency_ms", value: math.Round(math.Exp(rng.NormFloat64())*5000) / 100})
			}
		}
		e.clock.set(lo + 9_999)
		if len(evs) > 0 {
			if a := e.post(ndjson(evs)); a.Accepted != len(evs) {
				t.Fatalf("accepted %d of %d: %v", a.Accepted, len(evs), a.Rejected)
			}
		}
		all = append(all, evs...)
		var s snap
		e.getJSON("/v1/window?metric=latency_ms&key=tenant-1&window=1m&q=0.5,0.95,0.99", 200, &s.one)
		e.getJSON("/v1/window?metric=latency_ms&key=tenant-*&window=1m&q=0.5,0.95,0.99", 200, &s.glob)
		seen[s.one.To] = s
	}
	for _, key := range []string{"tenant-1", "tenant-*"} {
		var r rangeAnswer
		e.getJSON("/v1/range?metric=latency_ms&key="+key+"&window=1m&step=10s&q=0.5,0.95,0.99", 200, &r)
		if r.Window != "1m" || r.Step != "10s" || len(r.Points) != 25 {
			t.Fatalf("%s: window %s step %s, %d points, want 1m 10s 25", key, r.Window, r.Step, len(r.Points))
		}
		if key == "tenant-*" && r.Series != 3 {
			t.Errorf("series %d, want 3", r.Series)
		}
		for i, p := range r.Points {
			s, ok := seen[p.To]
			if !ok {
				t.Fatalf("%s point %d: no /v1/window answer ended at %d", key, i, p.To)
			}
			w := s.one
			if key != "tenant-1" {
				w = s.glob
			}
			sumOK := math.Abs(p.Sum-w.Sum) <= 1e-9*math.Abs(w.Sum)
			if p.From != w.From || p.Count != w.Count || !sumOK || !floatEq(p.Min, w.Min) || !floatEq(p.Max, w.Max) {
				t.Errorf("%s point %d: %+v, window %+v", key, i, p, w)
			}
			for q, v := range w.Quantiles {
				if !floatEq(p.Quantiles[q], v) {
					t.Errorf("%s point %d q%s: %v, window %v", key, i, q, p.Quantiles[q], v)
				}
			}
			// The exact oracle over the point's span.
			var vals []float64
			sum := 0.0
			for _, ev := range all {
				if ev.ts >= p.From && ev.ts < p.To && (key == "tenant-*" || ev.key == key) {
					vals = append(vals, ev.value)
					sum += ev.value
				}
			}
			slices.Sort(vals)
			if p.Count != uint64(len(vals)) || math.Abs(p.Sum-sum) > 1e-9*sum {
				t.Errorf("%s point %d: count %d sum %v, oracle %d %v", key, i, p.Count, p.Sum, len(vals), sum)
			}
			if len(vals) == 0 {
				continue
			}
			if *p.Min != vals[0] || *p.Max != vals[len(vals)-1] {
				t.Errorf("%s point %d: min %v max %v, oracle %v %v", key, i, *p.Min, *p.Max, vals[0], vals[len(vals)-1])
			}
			if want := float64(len(vals)) / 60; p.To <= e.clock.millis() && (math.Abs(p.RatePerS-want) > 1e-9*want || p.ElapsedS != 60) {
				t.Errorf("%s point %d: rate %v over %v s, want %v over 60 s", key, i, p.RatePerS, p.ElapsedS, want)
			}
			for _, q := range []float64{0.5, 0.95, 0.99} {
				ex := vals[int(q*float64(len(vals)-1))]
				got := *p.Quantiles[strconv.FormatFloat(q, 'g', -1, 64)]
				if math.Abs(got-ex) > 0.0101*ex {
					t.Errorf("%s point %d p%v: %v, exact %v", key, i, q*100, got, ex)
				}
			}
		}
	}
}

func TestRangeParameters(t *testing.T) {
	e := newEnv(t, nil)
	e.post(ndjson([]event{{ts: t0, key: "tenant-1", metric: "latency_ms", value: 5}, {ts: t0, key: "tenant-1", metric: "cost", value: 2}}))
	var r rangeAnswer
	e.getJSON("/v1/range?metric=latency_ms&key=tenant-1", 200, &r)
	if r.Window != "10s" || r.Step != "10s" || len(r.Points) != 30 || r.Points[29].Count != 1 {
		t.Errorf("defaults: %+v", r)
	}
	e.getJSON("/v1/range?metric=cost&key=tenant-1&window=1h&step=1m", 200, &r)
	if len(r.Points) != 1 || r.Points[0].Count != 1 {
		t.Errorf("cost over 1h: %+v", r)
	}
	for _, c := range []struct{ q, param string }{
		{"metric=latency_ms&key=tenant-1&window=1h", "window"},
		{"metric=latency_ms&key=tenant-1&step=7s", "step"},
		{"metric=latency_ms&key=tenant-1&step=10m", "step"},
		{"metric=latency_ms&key=tenant-1&stp=10s", "stp"},
		{"metric=latency_ms&key=tenant-1&q=2", "q"},
		{"key=tenant-1", "metric"},
	} {
		var a errorAnswer
		e.getJSON("/v1/range?"+c.q, 400, &a)
		if a.Error.Param != c.param {
			t.Errorf("%s: param %q, want %q (%s)", c.q, a.Error.Param, c.param, a.Error.Message)
		}
	}
	var a errorAnswer
	e.getJSON("/v1/range?metric=latency_ms&key=nobody", 404, &a)
	e.getJSON("/v1/range?metric=latency_ms&key=x*", 404, &a)
}

// TestRangeBoundsQuantileValues: a grouped range read's points are bounded by the store
// (groups × slots), but each quantile asked for adds to every point. 820 groups of 30 points
// with 32 quantiles is 787,200 quantile values, past the bound: a 400 naming q, where the
// server used to build the whole answer in memory (120 MB at the store's most groups). The
// same groups with one point each, or with the default quantiles, are answered.
func TestRangeBoundsQuantileValues(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 820 {
		e.seed(event{ts: t0, key: fmt.Sprintf("tenant-%d", i), metric: "latency_ms", value: float64(i)})
	}
	var qs []string
	for i := range 32 {
		qs = append(qs, fmt.Sprintf("0.%02d", i+50))
	}
	q := "&q=" + strings.Join(qs, ",")
	code, b, _ := e.do("GET", "/v1/range?metric=latency_ms&by=key&step=10s"+q, nil)
	var a errorAnswer
	_ = json.Unmarshal(b, &a)
	if code != 400 || a.Error.Param != "q" || !strings.Contains(a.Error.Message, "more than 819 groups × 30 points × 32 quantiles") {
		t.Errorf("32 quantiles over 820 groups of 30 points: %d, a %d-byte answer %.200s", code, len(b), b)
	}
	var r struct {
		Groups []struct {
			Points []struct{ Quantiles map[string]*float64 }
		}
	}
	e.getJSON("/v1/range?metric=latency_ms&by=key&window=5m&step=5m"+q, 200, &r)
	if len(r.Groups) != 820 || len(r.Groups[0].Points) != 1 || len(r.Groups[0].Points[0].Quantiles) != 32 {
		t.Errorf("one point per group: %d groups", len(r.Groups))
	}
	e.getJSON("/v1/range?metric=latency_ms&by=key&step=10s&q=0.5,0.95,0.99", 200, &r)
	if len(r.Groups) != 820 || len(r.Groups[0].Points) != 30 {
		t.Errorf("3 quantiles: %d groups", len(r.Groups))
	}
}

// TestRangeRefusedBeforeReading: the quantile-value bound of /v1/range is checked before the
// slots are read. A range read's points per series or group follow from the ring, the
// window and the step, so one series past the bound is refused without visiting a series,
// and a grouped read stops at the first series of a group past it. The bound was checked
// on the composed answer: a refused by=key read over 8,000 series cost its whole read
// (2.8 s and 70 MB) to say 400.
func TestRangeRefusedBeforeReading(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{
		Ring:    window.RingConfig{Slot: 10 * time.Second, Slots: 30},
		Metrics: map[string]window.RingConfig{"fine": {Slot: time.Second, Slots: 30_000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := st.ObserveAt(t0, window.Event{TS: t0, Metric: "latency_ms", Key: fmt.Sprintf("tenant-%04d", i), Value: float64(i), Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.ObserveAt(t0, window.Event{TS: t0, Metric: "fine", Key: "tenant-1", Value: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *query.Config) { c.Store = st })
	var visits atomic.Int64
	query.SetVisitHook(e.srv, func() { visits.Add(1) })
	var qs []string
	for i := range 32 {
		qs = append(qs, fmt.Sprintf("0.%02d", i+50))
	}
	q := "&q=" + strings.Join(qs, ",")
	for _, c := range []struct {
		path      string
		maxVisits int64
	}{
		{"/v1/range?metric=fine&key=tenant-*" + q, 0},            // 30,000 points × 32 quantiles in the one merge
		{"/v1/range?metric=latency_ms&by=key&step=10s" + q, 820}, // 819 groups of 30 points pass; the 820th series is one too many
	} {
		visits.Store(0)
		var a errorAnswer
		e.getJSON(c.path, 400, &a)
		if a.Error.Param != "q" || !strings.Contains(a.Error.Message, "quantile values") {
			t.Errorf("%s: %+v, want a 400 naming q", c.path, a.Error)
		}
		if n := visits.Load(); n > c.maxVisits {
			t.Errorf("%s: refused after reading %d series, want at most %d", c.path, n, c.maxVisits)
		}
	}
	// Under the bound nothing changes: 3 quantiles over the 2,000 groups are answered.
	var r struct{ Groups []json.RawMessage }
	e.getJSON("/v1/range?metric=latency_ms&by=key&step=10s&q=0.5,0.95,0.99", 200, &r)
	if len(r.Groups) != 2000 {
		t.Errorf("3 quantiles: %d groups, want 2000", len(r.Groups))
	}
}
