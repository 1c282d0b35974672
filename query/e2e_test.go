package query_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// oracle keeps every accepted event and answers window questions exactly.
type oracle struct{ evs []event }

type exact struct {
	count    uint64
	sum      float64
	min, max float64
	values   []event // value and weight, sorted by value
	keys     map[string]bool
}

// over aggregates the events of metric whose key satisfies match with ts in [from, to).
func (o *oracle) over(metric string, match func(string) bool, from, to int64) exact {
	x := exact{keys: map[string]bool{}}
	for _, ev := range o.evs {
		if ev.metric != metric || !match(ev.key) || ev.ts < from || ev.ts >= to {
			continue
		}
		n := max(ev.count, 1)
		if x.count == 0 || ev.value < x.min {
			x.min = ev.value
		}
		if x.count == 0 || ev.value > x.max {
			x.max = ev.value
		}
		x.count += n
		x.sum += ev.value * float64(n)
		x.values = append(x.values, ev)
		x.keys[ev.key] = true
	}
	slices.SortFunc(x.values, func(a, b event) int { return cmp.Compare(a.value, b.value) })
	return x
}

// quantile is the value of rank floor(q × (count − 1)) in the weighted sorted values, the
// rank the sketches estimate.
func (x exact) quantile(q float64) float64 {
	rank := uint64(q * float64(x.count-1))
	var cum uint64
	for _, ev := range x.values {
		cum += max(ev.count, 1)
		if cum > rank {
			return ev.value
		}
	}
	return math.NaN()
}

// within1pct reports |got − want| ≤ 1% of |want|, the DDSketch guarantee.
func within1pct(got, want float64) bool { return math.Abs(got-want) <= 0.01*math.Abs(want)+1e-9 }

func exactKey(k string) func(string) bool { return func(s string) bool { return s == k } }

func globFunc(pattern string) func(string) bool {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`)
	return re.MatchString
}

// checkWindow asks /v1/window and compares the answer with the oracle over the span the
// answer reports: count, sum, min and max exactly, quantiles within 1%.
func checkWindow(t *testing.T, e *env, o *oracle, metric, key, win string, qs []string, wantSeries int) windowAnswer {
	t.Helper()
	path := "/v1/window?" + url.Values{"metric": {metric}, "key": {key}, "window": {win}, "q": {strings.Join(qs, ",")}}.Encode()
	var a windowAnswer
	e.getJSON(path, 200, &a)
	d, _ := time.ParseDuration(win)
	if a.To-a.From != d.Milliseconds() || a.To <= e.clock.millis() || a.To-10_000 > e.clock.millis() {
		t.Fatalf("%s: span [%d, %d) is not a %s window ending with the slot of now %d", path, a.From, a.To, win, e.clock.millis())
	}
	match := exactKey(key)
	if strings.Contains(key, "*") {
		match = globFunc(key)
	}
	x := o.over(metric, match, a.From, a.To)
	if a.Series != wantSeries {
		t.Errorf("%s: series = %d, want %d", path, a.Series, wantSeries)
	}
	if a.Count != x.count || a.Sum != x.sum {
		t.Errorf("%s: count, sum = %d, %v; oracle %d, %v", path, a.Count, a.Sum, x.count, x.sum)
	}
	if x.count == 0 {
		if a.Avg != nil || a.Min != nil || a.Max != nil {
			t.Errorf("%s: empty window with avg/min/max %v/%v/%v, want null", path, a.Avg, a.Min, a.Max)
		}
		return a
	}
	if a.Min == nil || a.Max == nil || *a.Min != x.min || *a.Max != x.max {
		t.Errorf("%s: min, max = %v, %v; oracle %v, %v", path, deref(a.Min), deref(a.Max), x.min, x.max)
	}
	if a.Avg == nil || math.Abs(*a.Avg-x.sum/float64(x.count)) > 1e-9*math.Abs(*a.Avg) {
		t.Errorf("%s: avg = %v, oracle %v", path, deref(a.Avg), x.sum/float64(x.count))
	}
	elapsed := float64(min(e.clock.millis(), a.To)-a.From) / 1000
	wantRate := float64(x.count) / elapsed
	if math.Abs(a.RatePerS-wantRate) > 1e-9*wantRate {
		t.Errorf("%s: rate_per_s = %v, oracle %v", path, a.RatePerS, wantRate)
	}
	if a.ElapsedS == nil || *a.ElapsedS != elapsed {
		t.Errorf("%s: elapsed_s = %v, oracle %v (the denominator of rate_per_s)", path, deref(a.ElapsedS), elapsed)
	}
	if len(a.Quantiles) != len(qs) {
		t.Errorf("%s: %d quantiles, want %d: %v", path, len(a.Quantiles), len(qs), a.Quantiles)
	}
	for _, qs := range qs {
		var q float64
		fmt.Sscan(qs, &q)
		got, want := a.Quantiles[qs], x.quantile(q)
		if got == nil || !within1pct(*got, want) {
			t.Errorf("%s: q%s = %v, oracle %v (more than 1%% off)", path, qs, deref(got), want)
		}
	}
	return a
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// traffic makes the e2e workload: keys with latency scales 1..n so their quantiles are far
// apart, integer values so sums are exact in float64, some weighted events, and arrival
// slightly out of order within each 5-second batch.
type traffic struct {
	rng  *rand.Rand
	keys []string
}

func newTraffic(seed uint64) *traffic {
	tr := &traffic{rng: rand.New(rand.NewPCG(seed, 42))}
	for i := range 12 {
		tr.keys = append(tr.keys, fmt.Sprintf("tenant-%02d", i))
	}
	tr.keys = append(tr.keys, "other-1", "other-2")
	return tr
}

// batch returns the events of (end − 5 s, end].
func (tr *traffic) batch(end int64) []event {
	var evs []event
	for i, k := range tr.keys {
		n := 1 + tr.rng.IntN(i%5+2)
		for range n {
			ev := event{
				ts:     end - tr.rng.Int64N(5000),
				key:    k,
				metric: "latency_ms",
				value:  math.Round(1 + tr.rng.ExpFloat64()*float64(10*(i+1))),
			}
			if tr.rng.IntN(10) == 0 {
				ev.count = uint64(2 + tr.rng.IntN(3))
			}
			evs = append(evs, ev)
		}
	}
	return evs
}

// TestWindowEndToEnd sends seven minutes of events through POST /v1/events, moving the clock
// with them, and checks /v1/window against the exact oracle for single keys and globs at
// several instants and windows.
func TestWindowEndToEnd(t *testing.T) {
	e := newEnv(t, nil)
	tr := newTraffic(1)
	o := &oracle{}
	qs := []string{"0.5", "0.95", "0.99"}
	checks := map[int64]bool{
		t0 + 2*60_000 + 15_000: true, // before the ring is full
		t0 + 5*60_000:          true, // exactly a slot boundary
		t0 + 7*60_000 + 5_000:  true, // after slots have left
	}
	for end := t0 + 5000; end <= t0+7*60_000+5_000; end += 5000 {
		e.clock.set(end)
		evs := tr.batch(end)
		a := e.post(ndjson(evs))
		if a.Accepted != len(evs) || len(a.Rejected) != 0 {
			t.Fatalf("batch at %d: accepted %d of %d, rejected %v", end, a.Accepted, len(evs), a.Rejected)
		}
		o.evs = append(o.evs, evs...)
		if !checks[end] {
			continue
		}
		t.Run(fmt.Sprintf("at+%ds", (end-t0)/1000), func(t *testing.T) {
			for _, win := range []string{"10s", "30s", "1m", "5m"} {
				for _, k := range []string{"tenant-00", "tenant-07", "tenant-11", "other-2"} {
					checkWindow(t, e, o, "latency_ms", k, win, qs, 1)
				}
				checkWindow(t, e, o, "latency_ms", "tenant-0*", win, qs, 10)
				checkWindow(t, e, o, "latency_ms", "*", win, qs, 14)
				checkWindow(t, e, o, "latency_ms", "*-1*", win, qs, 3) // tenant-10, tenant-11, other-1
			}
			checkWindow(t, e, o, "latency_ms", "tenant-03", "5m", []string{"0", "0.25", "0.75", "0.999", "1"}, 1)
		})
	}

	// Time passes with no events: the window empties slot by slot and then answers count 0.
	e.clock.set(t0 + 7*60_000 + 5_000 + 5*60_000 + 10_000)
	a := checkWindow(t, e, o, "latency_ms", "tenant-05", "5m", qs, 1)
	if a.Count != 0 || a.Quantiles["0.5"] != nil {
		t.Fatalf("idle window: %+v, want count 0 and null quantiles", a)
	}
	code, body, _ := e.do("GET", "/v1/window?metric=latency_ms&key=tenant-05&window=5m&q=0.5", nil)
	if want := `"count":0,"sum":0,"avg":null,"min":null,"max":null,"rate_per_s":0,"elapsed_s":`; code != 200 || !strings.Contains(string(body), want) {
		t.Fatalf("empty window body = %d %s, want ...%s", code, body, want)
	}
}

// TestEventsRefusalsAreCountedByReason: the HTTP path reports the decoder's and the store's
// reasons, and refused lines do not stop the others.
func TestEventsRefusalsAreCountedByReason(t *testing.T) {
	e := newEnv(t, nil)
	e.clock.set(t0 + 10*60_000)
	now := e.clock.millis()
	body := strings.Join([]string{
		fmt.Sprintf(`{"ts":%d,"key":"a","metric":"latency_ms","value":5}`, now),
		`not json`,
		fmt.Sprintf(`{"ts":%d,"metric":"latency_ms","value":5}`, now),
		fmt.Sprintf(`{"ts":%d,"key":"a","metric":"latency_ms","value":5}`, now-6*60_000),
		fmt.Sprintf(`{"ts":%d,"key":"a","metric":"latency_ms","value":5}`, now+60_000),
		``,
		`{"key":"b","metric":"latency_ms","value":7}`,
	}, "\n")
	a := e.post([]byte(body))
	want := map[string]int{"invalid_json": 1, "missing_field": 1, "late": 1, "future": 1}
	if a.Accepted != 2 || fmt.Sprint(a.Rejected) != fmt.Sprint(want) {
		t.Fatalf("answer %+v, want 2 accepted and rejected %v", a, want)
	}
	first := map[string]string{
		"invalid_json":  "line 2: invalid JSON: no opening brace at byte 0",
		"missing_field": `line 3: no field "key"`,
		"late":          "line 4: ts 2025-11-30T08:04:00Z is 6m0s behind now (retention 5m0s)",
		"future":        "line 5: ts 2025-11-30T08:11:00Z is 1m0s ahead of now (skew 10s)",
	}
	if fmt.Sprint(a.First) != fmt.Sprint(first) {
		t.Errorf("first %q, want %q", a.First, first)
	}
	for result, n := range map[string]float64{"accepted": 2, "future": 1, "invalid_json": 1, "late": 1, "missing_field": 1, "bad_field": 0} {
		if got := gathered(t, e.reg, "slide_http_events_total", "result", result); got != n {
			t.Errorf("slide_http_events_total{result=%q} = %v, want %v", result, got, n)
		}
	}
	// The event without ts took the request time.
	var w windowAnswer
	e.getJSON("/v1/window?metric=latency_ms&key=b&window=10s", 200, &w)
	if w.Count != 1 || w.Sum != 7 {
		t.Fatalf("event without ts: %+v, want count 1 sum 7 in the current slot", w)
	}
}

// TestEventsRefusalsSayWhat: the answer gives the first refusal of each reason with its line
// and what is wrong, beside the counts; a body with no refusal has no "first".
func TestEventsRefusalsSayWhat(t *testing.T) {
	e := newEnv(t, nil)
	body := strings.Join([]string{
		`{"key":"a","metric":"latency_ms","value":5}`,
		`{"key":"a","metric":"latency_ms"}`,
		`{"key":"a","metric":"latency_ms","value":5,"ts":"1764489600123"}`,
		`{"key":"a","metric":"latency_ms","value":5,"labels":{"Bad-Name":"x"}}`,
		`{"metric":"latency_ms","value":5}`,
	}, "\n")
	code, b, _ := e.do("POST", "/v1/events", []byte(body))
	want := `{"accepted":1,"rejected":{"bad_field":2,"missing_field":2},"first":{` +
		`"bad_field":"line 3: field \"ts\": \"1764489600123\" is a string of digits, not unix ms or RFC 3339",` +
		`"missing_field":"line 2: no field \"value\""}}` + "\n"
	if code != 200 || string(b) != want {
		t.Fatalf("POST = %d %s\nwant %s", code, b, want)
	}
	a := e.post([]byte(`{"key":"a","metric":"latency_ms","value":5,"labels":{"Bad-Name":"x"}}`))
	if want := `line 1: label "Bad-Name": not a Prometheus label name`; a.First["bad_field"] != want {
		t.Errorf("first bad_field %q, want %q", a.First["bad_field"], want)
	}
	// A field given twice is refused as /v1/allow refuses it, not read as the last of them.
	a = e.post([]byte("{\"key\":\"a\",\"metric\":\"latency_ms\",\"value\":5}\n{\"key\":\"a\",\"key\":\"b\",\"metric\":\"latency_ms\",\"value\":5}"))
	if want := `line 2: field "key": given twice (a field appears at most once)`; a.Accepted != 1 || a.First["bad_field"] != want {
		t.Errorf("a key given twice: %+v, want 1 accepted and bad_field %q", a, want)
	}
	code, b, _ = e.do("POST", "/v1/events", []byte(`{"key":"a","metric":"latency_ms","value":5}`))
	if want := `{"accepted":1,"rejected":{}}` + "\n"; code != 200 || string(b) != want {
		t.Fatalf("POST = %d %s, want %s", code, b, want)
	}
}

// TestTopOrder checks /v1/top against the oracle's ranking by count, sum, max and p95.
func TestTopOrder(t *testing.T) {
	e := newEnv(t, nil)
	tr := newTraffic(7)
	o := &oracle{}
	for end := t0 + 5000; end <= t0+6*60_000; end += 5000 {
		e.clock.set(end)
		evs := tr.batch(end)
		e.post(ndjson(evs))
		o.evs = append(o.evs, evs...)
	}
	for _, c := range []struct {
		by, win string
		k       int
		key     string
	}{
		{"count", "5m", 5, ""}, {"sum", "1m", 3, ""}, {"max", "5m", 14, ""}, {"p95", "5m", 10, ""},
		{"p50", "30s", 4, "tenant-*"}, {"avg", "5m", 20, ""}, {"min", "2m", 3, "*-0*"}, {"rate", "5m", 2, ""},
	} {
		path := "/v1/top?" + url.Values{"metric": {"latency_ms"}, "by": {c.by}, "window": {c.win}, "k": {fmt.Sprint(c.k)}, "key": {c.key}, "q": {"0.99"}}.Encode()
		var a topAnswer
		e.getJSON(path, 200, &a)
		match := func(string) bool { return true }
		if c.key != "" {
			match = globFunc(c.key)
		}
		type ranked struct {
			key string
			v   float64
			x   exact
		}
		var want []ranked
		for _, k := range tr.keys {
			if !match(k) {
				continue
			}
			x := o.over("latency_ms", exactKey(k), a.From, a.To)
			if x.count == 0 {
				continue
			}
			var v float64
			switch c.by {
			case "count":
				v = float64(x.count)
			case "sum":
				v = x.sum
			case "max":
				v = x.max
			case "min":
				v = x.min
			case "avg":
				v = x.sum / float64(x.count)
			case "rate":
				v = float64(x.count) / (float64(min(e.clock.millis(), a.To)-a.From) / 1000)
			case "p95":
				v = x.quantile(0.95)
			case "p50":
				v = x.quantile(0.5)
			}
			want = append(want, ranked{k, v, x})
		}
		slices.SortFunc(want, func(a, b ranked) int {
			if c := cmp.Compare(b.v, a.v); c != 0 {
				return c
			}
			return strings.Compare(a.key, b.key)
		})
		want = want[:min(c.k, len(want))]
		if len(a.Top) != len(want) {
			t.Fatalf("%s: %d entries, want %d", path, len(a.Top), len(want))
		}
		for i, w := range want {
			got := a.Top[i]
			if got.Key != w.key {
				t.Errorf("%s: rank %d is %s (%v), oracle %s (%v)", path, i, got.Key, got.Value, w.key, w.v)
				continue
			}
			sketched := strings.HasPrefix(c.by, "p")
			if (sketched && !within1pct(got.Value, w.v)) || (!sketched && math.Abs(got.Value-w.v) > 1e-9*math.Abs(w.v)) {
				t.Errorf("%s: %s value %v, oracle %v", path, w.key, got.Value, w.v)
			}
			if elapsed := float64(min(e.clock.millis(), a.To)-a.From) / 1000; got.ElapsedS == nil || *got.ElapsedS != elapsed {
				t.Errorf("%s: %s elapsed_s %v, want %v", path, w.key, deref(got.ElapsedS), elapsed)
			}
			if got.Count != w.x.count || got.Quantiles["0.99"] == nil || !within1pct(*got.Quantiles["0.99"], w.x.quantile(0.99)) {
				t.Errorf("%s: %s count %d q0.99 %v, oracle %d %v", path, w.key, got.Count, deref(got.Quantiles["0.99"]), w.x.count, w.x.quantile(0.99))
			}
		}
		// The sketch may swap two keys whose exact values are within 2%; the data keeps the
		// keys' scales apart so that the oracle's order is unambiguous.
		for i := 1; i < len(want) && strings.HasPrefix(c.by, "p"); i++ {
			if want[i-1].v < want[i].v*1.02 {
				t.Fatalf("%s: test data has near-tied %s values %v, %v; pick another seed", path, c.by, want[i-1].v, want[i].v)
			}
		}
	}
}
