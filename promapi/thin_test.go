package promapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// TestThinnedRateIsExact: an instant rate() or increase() hands the engine only the first
// and last samples of a window when the answer cannot change (thinned); every answer equals
// the one the engine gives over all of them, here a range query of one step at the same
// instant (a range query is never thinned), value for value, histograms bucket for bucket:
// live and past instants, aligned and not, offsets, a range past the retention, a float
// series that falls (negative values), and a gauge.
func TestThinnedRateIsExact(t *testing.T) {
	d := newDemo(t, "native:5", 6, 4)
	now := d.now.UnixMilli()
	for i := range 30 { // a sum that falls: values of both signs
		ts := now - int64(i)*10_000 - 1_000
		d.add(t, "delta", "k0", "/pay", ts, float64(7-i%5*3))
	}
	a, err := New(Config{Store: d.store, Now: d.now_})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()
	get := func(path string, v url.Values) map[string]string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path+"?"+v.Encode(), nil))
		var body struct {
			Status string
			Data   struct {
				Result []struct {
					Metric     map[string]string
					Value      []json.RawMessage
					Values     [][]json.RawMessage
					Histogram  []json.RawMessage
					Histograms [][]json.RawMessage
				}
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Status != "success" {
			t.Fatalf("%s %v: %d %.300s", path, v, rec.Code, rec.Body.String())
		}
		out := map[string]string{}
		for _, r := range body.Data.Result {
			m, _ := json.Marshal(r.Metric)
			var pt []json.RawMessage
			switch {
			case r.Value != nil:
				pt = r.Value
			case r.Histogram != nil:
				pt = r.Histogram
			case len(r.Values) == 1:
				pt = r.Values[0]
			case len(r.Histograms) == 1:
				pt = r.Histograms[0]
			default:
				t.Fatalf("%s %v: %s has %d points", path, v, m, len(r.Values)+len(r.Histograms))
			}
			out[string(m)] = string(pt[1])
		}
		return out
	}
	queries := []string{
		`rate(latency_ms_count[5m])`,
		`increase(latency_ms_count[1m])`,
		`rate(latency_ms_sum[2m])`,
		`increase(delta_sum[5m])`,
		`rate(latency_ms[5m])`,
		`histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`,
		`histogram_count(increase(latency_ms[90s]))`,
		`rate(latency_ms_count[10m])`, // past the retention: the first sample is its start
		`rate(latency_ms_count[3m] offset 40s)`,
		`rate(latency_ms_max[5m])`,
	}
	checked := 0
	for _, back := range []time.Duration{0, 4500 * time.Millisecond, 37300 * time.Millisecond, 2 * time.Minute} {
		at := strconv.FormatFloat(float64(now-back.Milliseconds())/1000, 'f', 3, 64)
		for _, q := range queries {
			inst := get("/api/v1/query", url.Values{"query": {q}, "time": {at}})
			full := get("/api/v1/query_range", url.Values{"query": {q}, "start": {at}, "end": {at}, "step": {"10"}})
			if len(inst) == 0 || len(inst) != len(full) {
				t.Errorf("%s at -%s: %d series instant, %d over all samples", q, back, len(inst), len(full))
			}
			for m, v := range inst {
				if full[m] != v {
					t.Errorf("%s at -%s, %s: %s thinned, %s over all samples", q, back, m, v, full[m])
				}
				checked++
			}
		}
	}
	if checked < 200 {
		t.Errorf("only %d answers compared", checked)
	}
}

// TestThinnedKeepsWhatExtrapolationNeeds: thinned keeps every sample when a window's first or
// last sample lies more than an average gap from its edge (the engine would then extrapolate
// half a gap, a length that thinning changes), or when a float series falls, and thins a
// dense rising one to its first and last sample inside the window.
func TestThinnedKeepsWhatExtrapolationNeeds(t *testing.T) {
	series := func(ts ...int64) []sample {
		out := make([]sample, len(ts))
		for i, x := range ts {
			out[i] = sample{t: x, f: float64(i)}
		}
		return out
	}
	for _, c := range []struct {
		name   string
		smp    []sample
		lo, hi int64
		want   int
	}{
		{"dense", series(0, 10, 20, 30, 40, 50), 5, 50, 2},
		{"starts late in the window", series(100, 110, 120, 130), 0, 130, 4},
		{"ends early in the window", series(0, 10, 20, 30), -5, 100, 4},
		{"two samples", series(10, 20), 5, 20, 2},
	} {
		got := thinned(c.smp, c.lo, c.hi)
		if len(got) != c.want || got[0].t <= c.lo || got[len(got)-1].t > c.hi {
			t.Errorf("%s: %d samples from %d to %d, want %d inside (%d, %d]", c.name, len(got), got[0].t, got[len(got)-1].t, c.want, c.lo, c.hi)
		}
	}
	falls := series(0, 10, 20, 30)
	falls[2].f = -1
	if got := thinned(falls, -5, 30); len(got) != 4 {
		t.Errorf("a falling series thinned to %d samples", len(got))
	}
}
