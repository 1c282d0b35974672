package promapi

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// pdStore is a random store for the pushdown's differential test: lat (native:3, 10 s ×
// 30 slots) and dur (DDSketch re-bucketed, 5 s × 40), keys k0..k3 by route /a /b, values of
// both signs and zeros, series with gaps, series that start or end inside the retention.
func pdStore(t *testing.T, rng *rand.Rand, now int64) *window.Store {
	native, err := sketch.ParseKind("native:3")
	if err != nil {
		t.Fatal(err)
	}
	st, err := window.NewStore(window.StoreConfig{Now: func() int64 { return now }, Metrics: map[string]window.RingConfig{
		"lat": {Slot: 10 * time.Second, Slots: 30, Sketch: native},
		"dur": {Slot: 5 * time.Second, Slots: 40},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name  string
		width int64
		slots int64
	}{{"lat", 10_000, 30}, {"dur", 5_000, 40}} {
		cur := window.FloorDiv(now, m.width)
		for k := range 4 {
			for _, route := range []string{"/a", "/b"} {
				series, err := window.AppendSeries(nil, "k"+strconv.Itoa(k), []window.Label{{Name: "route", Value: route}})
				if err != nil {
					t.Fatal(err)
				}
				from, to := cur-m.slots+1, cur
				switch rng.IntN(4) {
				case 0: // starts inside the retention
					from += rng.Int64N(m.slots)
				case 1: // ends inside it
					to -= rng.Int64N(m.slots)
				}
				for i := from; i <= to; i++ {
					if rng.IntN(5) == 0 {
						continue // a gap
					}
					for range 1 + rng.IntN(4) {
						v := math.Exp(rng.NormFloat64() + 3)
						switch rng.IntN(12) {
						case 0:
							v = -v
						case 1:
							v = 0
						}
						ts := min(i*m.width+rng.Int64N(m.width), now)
						at := min(i*m.width+m.width-1, now)
						if err := st.ObserveAt(at, window.Event{TS: ts, Metric: m.name, Key: string(series), Value: v, Count: 1}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
	}
	return st
}

// pdAnswer is an answer reduced for comparison: result type, warnings, and each series'
// points by its labels.
type pdAnswer struct {
	code   int
	err    string // an error's answer
	typ    string
	warn   []string
	points map[string][][2]string
}

// pushedAndEngine are two APIs over st at now: the default one (pushdown on) and one that
// sends every query to the engine.
func pushedAndEngine(t *testing.T, st *window.Store, now int64) (pushed, engine *API) {
	t.Helper()
	clock := func() time.Time { return time.UnixMilli(now) }
	pushed, err := New(Config{Store: st, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	engine, err = New(Config{Store: st, Now: clock, DisablePushdown: true})
	if err != nil {
		t.Fatal(err)
	}
	return pushed, engine
}

// samePoints fails unless got has want's series, each with want's timestamps and values
// (to closeValues), and calls each for every pair of points compared.
func samePoints(t *testing.T, what string, got, want pdAnswer, each func(got, want [2]string)) {
	t.Helper()
	for m, wp := range want.points {
		gp := got.points[m]
		if len(gp) != len(wp) {
			t.Fatalf("%s, %s: %d points pushed, %d by the engine", what, m, len(gp), len(wp))
		}
		for k := range wp {
			if gp[k][0] != wp[k][0] || !closeValues(gp[k][1], wp[k][1]) {
				t.Fatalf("%s, %s: point %d pushed %v, engine %v", what, m, k, gp[k], wp[k])
			}
			each(gp[k], wp[k])
		}
	}
}

func pdGet(t *testing.T, h http.Handler, path string, v url.Values) pdAnswer {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path+"?"+v.Encode(), nil))
	var body struct {
		Status   string
		Error    string
		Warnings []string
		Data     struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  []any
				Values [][]any
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %v: %d %.300s", path, v, rec.Code, rec.Body.String())
	}
	a := pdAnswer{code: rec.Code, err: body.Error, typ: body.Data.ResultType, warn: body.Warnings, points: map[string][][2]string{}}
	for _, r := range body.Data.Result {
		m, _ := json.Marshal(r.Metric)
		if _, dup := a.points[string(m)]; dup {
			t.Fatalf("%s %v: %s twice", path, v, m)
		}
		vs := r.Values
		if r.Value != nil {
			vs = [][]any{r.Value}
		}
		for _, p := range vs {
			a.points[string(m)] = append(a.points[string(m)], [2]string{fmt.Sprint(p[0]), fmt.Sprint(p[1])})
		}
	}
	return a
}

// closeValues: equal to 1e-9 relative, NaN where NaN, infinities alike.
func closeValues(x, y string) bool {
	a, err1 := strconv.ParseFloat(x, 64)
	b, err2 := strconv.ParseFloat(y, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return x == y
	}
	return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b))
}

// TestPushdownEqualsEngine: over a random store, random quantile queries of the pushdown's
// shape (φ inside and outside [0, 1] and NaN, rate and increase, ranges that are and are not
// slot multiples, no grouping, by and without), instant at random times (live and past)
// and ranges at random steps, answer as the engine does: the same result type, warnings,
// series, timestamps, and values to 1e-9 relative. Shapes the pushdown declines (two
// metrics, float series, offset) answer as well, by the engine.
func TestPushdownEqualsEngine(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 28))
	now := int64(1_800_000_000_000 + 4_500)
	st := pdStore(t, rng, now)
	pushed, engine := pushedAndEngine(t, st, now)
	phis := []string{"0", "1", "0.5", "0.95", "0.99", "0.25", "0.001", "-0.5", "1.5", "NaN"}
	ranges := []string{"10s", "17s", "30s", "45s", "1m", "95s", "5m", "7m"}
	groupings := []string{"", "by (key)", "by (route)", "without (route)", "without (key)", "by ()", "by (key, route)", "by (nosuch)", "without ()"}
	selectors := []string{"lat", "dur", `lat{route="/a"}`, `dur{key=~"k[12]"}`, "nosuch"}
	declined := []string{
		`histogram_quantile(0.9, sum by (key) (rate({__name__=~"lat|dur"}[1m])))`,
		`histogram_quantile(0.9, sum by (key) (rate({__name__=~"lat.*"}[1m])))`,
		`histogram_quantile(0.9, sum by (key) (rate(lat[1m] offset 20s)))`,
		`histogram_quantile(0.9, max by (key) (rate(lat[1m])))`,
	}
	query := func() string {
		if rng.IntN(8) == 0 {
			return declined[rng.IntN(len(declined))]
		}
		inner := fmt.Sprintf("%s(%s[%s])", []string{"rate", "increase"}[rng.IntN(2)], selectors[rng.IntN(len(selectors))], ranges[rng.IntN(len(ranges))])
		if g := groupings[rng.IntN(len(groupings))]; g != "" {
			inner = "sum " + g + " (" + inner + ")"
		}
		return fmt.Sprintf("histogram_quantile(%s, %s)", phis[rng.IntN(len(phis))], inner)
	}
	sec := func(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }
	points, exact, warned, empty, nans, infs := 0, 0, 0, 0, 0, 0
	before := pushed.pushed.Load()
	for i := range 260 {
		q := query()
		v := url.Values{"query": {q}}
		path := "/api/v1/query"
		if i%3 == 0 {
			path = "/api/v1/query_range"
			start := now - rng.Int64N(330_000)
			v.Set("start", sec(start))
			v.Set("end", sec(start+rng.Int64N(200_000)))
			v.Set("step", strconv.Itoa(1+rng.IntN(40)))
		} else {
			at := now + 3_000 - rng.Int64N(320_000)
			if rng.IntN(4) == 0 {
				at = now - rng.Int64N(3)*10_000 // at a slot boundary or the live now
			}
			v.Set("time", sec(at))
		}
		got, want := pdGet(t, pushed.Handler(), path, v), pdGet(t, engine.Handler(), path, v)
		if got.code != want.code || got.err != want.err || got.typ != want.typ || !slices.Equal(got.warn, want.warn) || len(got.points) != len(want.points) {
			t.Fatalf("%s %v:\npushed %d %s %s %q %d series\nengine %d %s %s %q %d series", path, v,
				got.code, got.err, got.typ, got.warn, len(got.points), want.code, want.err, want.typ, want.warn, len(want.points))
		}
		if len(want.warn) > 0 {
			warned++
		}
		if want.code == http.StatusOK && len(want.points) == 0 {
			empty++
		}
		samePoints(t, fmt.Sprintf("%s %v", path, v), got, want, func(g, w [2]string) {
			points++
			if g[1] == w[1] {
				exact++
			}
			switch w[1] {
			case "NaN":
				nans++
			case "+Inf", "-Inf":
				infs++
			}
		})
	}
	n := pushed.pushed.Load() - before
	t.Logf("%d queries pushed down, %d points compared (%d byte-equal, %d NaN, %d infinite), %d answers with warnings, %d empty",
		n, points, exact, nans, infs, warned, empty)
	if n < 180 || points < 1000 || nans == 0 || infs == 0 || warned == 0 || empty == 0 {
		t.Errorf("%d queries pushed down, %d points, %d NaN, %d infinite, %d warned, %d empty: the test compares too little",
			n, points, nans, infs, warned, empty)
	}
	if m := engine.pushed.Load(); m != 0 {
		t.Errorf("DisablePushdown: %d queries pushed down", m)
	}
}

// TestPushdownBelowOne: values under 1 (latencies in seconds) fall in buckets of negative
// index on both sides; the pushdown's spans over them answer as the engine's. (Its first
// span was once told by a negative "next index", so a run ending at index -2 began a new
// span whose offset was read as absolute: quantiles of 1e-30 for values near 0.05.)
func TestPushdownBelowOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 28))
	now := int64(1_800_000_000_000 + 4_500)
	native, err := sketch.ParseKind("native:3")
	if err != nil {
		t.Fatal(err)
	}
	st, err := window.NewStore(window.StoreConfig{Now: func() int64 { return now }, Metrics: map[string]window.RingConfig{
		"lat": {Slot: 10 * time.Second, Slots: 30, Sketch: native}}})
	if err != nil {
		t.Fatal(err)
	}
	cur := window.FloorDiv(now, 10_000)
	for k := range 4 {
		series, err := window.AppendSeries(nil, "k"+strconv.Itoa(k), []window.Label{{Name: "route", Value: "/a"}})
		if err != nil {
			t.Fatal(err)
		}
		for i := cur - 29; i <= cur; i++ {
			for range 3 {
				v := math.Exp(rng.NormFloat64()*1.5 - 2) // mostly under 1, some above
				if rng.IntN(6) == 0 {
					v = -v
				}
				ev := window.Event{TS: min(i*10_000+rng.Int64N(10_000), now), Metric: "lat", Key: string(series), Value: v, Count: 1}
				if err := st.ObserveAt(min(i*10_000+9_999, now), ev); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	pushed, engine := pushedAndEngine(t, st, now)
	points := 0
	for _, q := range []string{
		"histogram_quantile(0.05, rate(lat[5m]))",
		"histogram_quantile(0.5, sum by (route) (rate(lat[5m])))",
		"histogram_quantile(0.95, sum by (key) (increase(lat[1m])))",
		"histogram_quantile(0.99, sum without (route) (rate(lat[2m])))",
	} {
		for _, path := range []string{"/api/v1/query", "/api/v1/query_range"} {
			v := url.Values{"query": {q}, "time": {strconv.FormatInt(now/1000, 10)}}
			if path == "/api/v1/query_range" {
				v = url.Values{"query": {q}, "start": {strconv.FormatInt(now/1000-120, 10)}, "end": {strconv.FormatInt(now/1000, 10)}, "step": {"15"}}
			}
			got, want := pdGet(t, pushed.Handler(), path, v), pdGet(t, engine.Handler(), path, v)
			if got.code != http.StatusOK || got.code != want.code || len(got.points) != len(want.points) || len(want.points) == 0 {
				t.Fatalf("%s %s: pushed %d, %d series; engine %d, %d series", path, q, got.code, len(got.points), want.code, len(want.points))
			}
			samePoints(t, path+" "+q, got, want, func(_, _ [2]string) { points++ })
		}
	}
	if n := pushed.pushed.Load(); n != 8 || points < 40 {
		t.Fatalf("%d queries pushed down, %d points compared: the test compares too little", n, points)
	}
}

// TestPushdownLeavesLimitsToTheEngine: a query of the pushdown's shape selecting more
// series than MaxSeries is the engine's, which answers cost_limit as for any other query.
func TestPushdownLeavesLimitsToTheEngine(t *testing.T) {
	d := newDemo(t, "native:5", 4, 2)
	a, err := New(Config{Store: d.store, Now: d.now_, MaxSeries: 3})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	q := url.Values{"query": {`histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`}}
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/query?"+q.Encode(), nil))
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `"cost_limit"`) || a.pushed.Load() != 0 {
		t.Errorf("8 series over MaxSeries 3: %d %s, %d pushed down", rec.Code, rec.Body.String(), a.pushed.Load())
	}
}

// TestPushdownHoldsMaxSamples: a range query of the pushdown's shape that would hold more
// than MaxSamples (its groups' points and its series' samples) is the engine's, which
// refuses it; the same query over fewer steps is pushed down.
func TestPushdownHoldsMaxSamples(t *testing.T) {
	d := newDemo(t, "native:5", 4, 2)
	a, err := New(Config{Store: d.store, Now: d.now_, MaxSamples: 2_000})
	if err != nil {
		t.Fatal(err)
	}
	end := d.now_().Unix()
	get := func(start, step int64) *httptest.ResponseRecorder {
		q := url.Values{"query": {`histogram_quantile(0.95, sum by (key) (rate(latency_ms[1m])))`},
			"start": {strconv.FormatInt(start, 10)}, "end": {strconv.FormatInt(end, 10)}, "step": {strconv.FormatInt(step, 10)}}
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/query_range?"+q.Encode(), nil))
		return rec
	}
	// 4 groups × 3,601 steps: 14,404 points, over 2,000.
	if rec := get(end-3600, 1); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "too many samples") || a.pushed.Load() != 0 {
		t.Errorf("14,404 points over MaxSamples 2,000: %d %s, %d pushed down", rec.Code, rec.Body.String(), a.pushed.Load())
	}
	if rec := get(end-120, 30); rec.Code != http.StatusOK || a.pushed.Load() != 1 {
		t.Errorf("20 points under MaxSamples 2,000: %d %s, %d pushed down", rec.Code, rec.Body.String(), a.pushed.Load())
	}
}

// TestRecogniseShapes: what the pushdown takes and what it leaves to the engine.
func TestRecogniseShapes(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for q, want := range map[string]bool{
		`histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`:         true,
		`histogram_quantile(-1, sum without (route) (increase(x{a="b"}[90s])))`: true,
		`histogram_quantile(NaN, rate(x[1m]))`:                                  true,
		`histogram_quantile(0.9, sum(rate(x[1m])))`:                             true,
		`histogram_quantile(0.9, sum by (key) (rate(x[1m] offset 1m)))`:         false,
		`histogram_quantile(0.9, sum by (key) (rate(x[1m] @ 100)))`:             false,
		`histogram_quantile(0.9, sum by (key) (irate(x[1m])))`:                  false,
		`histogram_quantile(0.9, avg by (key) (rate(x[1m])))`:                   false,
		`histogram_quantile(0.9, topk by (key) (1, rate(x[1m])))`:               false,
		`histogram_quantile(scalar(y), rate(x[1m]))`:                            false,
		`histogram_quantile((0.9), rate(x[1m]))`:                                false,
		`histogram_quantile(0.9, rate(x[1m:10s]))`:                              false,
		`histogram_quantile(0.9, sum by (__name__) (rate(x[1m])))`:              false,
		`histogram_quantile(0.9, rate(x[1m])) * 2`:                              false,
		`histogram_quantile(0.9, x)`:                                            false,
	} {
		expr, err := p.ParseExpr(q)
		if err != nil {
			t.Fatal(q, err)
		}
		if _, got := recognise(expr); got != want {
			t.Errorf("%s: recognised %v, want %v", q, got, want)
		}
	}
}
