package promapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slide-metrics/slide/window"
)

// exemplarDemo is a store with exemplars of spans over the retention: per slot, services
// a and b on routes /pay and /search, each span with its own trace id, and an oracle of each
// (series, slot)'s slowest span.
func exemplarDemo(t *testing.T) (*demo, map[string]map[int64]window.Event) {
	t.Helper()
	now := t0.UnixMilli()
	st, err := window.NewStore(window.StoreConfig{Exemplars: true, Now: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	slowest := map[string]map[int64]window.Event{}
	cur := window.FloorDiv(now, 10_000)
	var n byte
	for i := cur - 29; i <= cur; i++ {
		for _, svc := range []string{"a", "b"} {
			for _, route := range []string{"/pay", "/search"} {
				key, err := window.AppendSeries(nil, svc, []window.Label{{Name: "route", Value: route}})
				if err != nil {
					t.Fatal(err)
				}
				for range 1 + rng.IntN(6) {
					n++
					ev := window.Event{TS: min(i*10_000+rng.Int64N(10_000), now), Metric: "duration_ms", Key: string(key),
						Value: float64(1 + rng.IntN(500)), TraceID: [16]byte{0: byte(i), 1: n, 15: 1}, SpanID: [8]byte{0: n, 7: 2}}
					if rng.IntN(5) == 0 {
						ev.TraceID, ev.SpanID = [16]byte{}, [8]byte{} // a span of no trace: counted, never an exemplar
					}
					at := min(window.FloorDiv(ev.TS, 10_000)*10_000+9_999, now)
					if err := st.ObserveAt(at, ev); err != nil {
						t.Fatal(err)
					}
					if ev.TraceID == [16]byte{} {
						continue
					}
					m := slowest[string(key)]
					if m == nil {
						m = map[int64]window.Event{}
						slowest[string(key)] = m
					}
					if old, ok := m[i]; !ok || ev.Value > old.Value {
						m[i] = ev
					}
				}
			}
		}
	}
	return &demo{store: st, now: t0}, slowest
}

// TestQueryExemplars: client_golang's QueryExemplars reads each slot's slowest span of the
// series a query's selectors select, on the histogram and on _max, with Prometheus' labels
// (trace_id and span_id in hex), its value and its time; within [start, end] only; none
// on _count; and a query of several selectors lists a series once.
func TestQueryExemplars(t *testing.T) {
	d, slowest := exemplarDemo(t)
	srv := serveDemo(t, d, Config{})
	c := clientOf(t, srv.URL)
	ctx := context.Background()
	start, end := d.now.Add(-time.Minute), d.now
	res, err := c.QueryExemplars(ctx, `histogram_quantile(0.95, sum by (route) (rate(duration_ms{key="a"}[1m]))) > 0 or max_over_time(duration_ms_max{route="/pay"}[1m])`, start, end)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]window.Event{} // by the series' labels as the client prints them
	for _, name := range []string{"duration_ms", "duration_ms_max"} {
		for series, bySlot := range slowest {
			route := ""
			window.EachLabel(series, func(n, v string) bool {
				if n == "route" {
					route = v
				}
				return true
			})
			if name == "duration_ms" && window.SeriesKeyOf(series) != "a" || name == "duration_ms_max" && route != "/pay" {
				continue
			}
			ls := model.LabelSet{"__name__": model.LabelValue(name), "key": model.LabelValue(window.SeriesKeyOf(series)), "route": model.LabelValue(route)}
			for _, ev := range bySlot {
				if ev.TS >= start.UnixMilli() && ev.TS <= end.UnixMilli() {
					want[ls.String()] = append(want[ls.String()], ev)
				}
			}
		}
	}
	if len(res) != len(want) {
		t.Fatalf("%d series, want %d: %v", len(res), len(want), res)
	}
	for i, r := range res {
		if i > 0 && !(res[i-1].SeriesLabels.String() < r.SeriesLabels.String()) {
			t.Errorf("series %v after %v: not sorted", r.SeriesLabels, res[i-1].SeriesLabels)
		}
		evs := want[r.SeriesLabels.String()]
		if len(r.Exemplars) != len(evs) {
			t.Fatalf("%v: %d exemplars, want %d", r.SeriesLabels, len(r.Exemplars), len(evs))
		}
		for _, e := range r.Exemplars {
			found := false
			for _, ev := range evs {
				if e.Labels["trace_id"] == model.LabelValue(hex.EncodeToString(ev.TraceID[:])) {
					found = true
					if e.Labels["span_id"] != model.LabelValue(hex.EncodeToString(ev.SpanID[:])) || float64(e.Value) != ev.Value || e.Timestamp != model.Time(ev.TS) || len(e.Labels) != 2 {
						t.Errorf("%v: exemplar %v, want span %x, value %v at %d", r.SeriesLabels, e, ev.SpanID, ev.Value, ev.TS)
					}
				}
			}
			if !found {
				t.Errorf("%v: exemplar %v is no slot's slowest span", r.SeriesLabels, e)
			}
		}
	}
	// Two selectors of one series list it once.
	if res, err := c.QueryExemplars(ctx, `duration_ms{key="a"} or duration_ms{route="/pay"}`, start, end); err != nil || len(res) != 3 {
		t.Errorf("overlapping selectors: %d series (%v), want a's two and b's /pay", len(res), err)
	}
	// _count carries none; a selector that matches no series answers none.
	for _, q := range []string{`rate(duration_ms_count[5m])`, `duration_ms{key="nosuch"}`} {
		if res, err := c.QueryExemplars(ctx, q, start, end); err != nil || len(res) != 0 {
			t.Errorf("%s: %v %v, want none", q, res, err)
		}
	}
	// Absent start and end are Prometheus' whole range: every slot of the retention.
	resp, err := http.Get(srv.URL + "/api/v1/query_exemplars?" + url.Values{"query": {`duration_ms{key="b",route="/search"}`}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	key, _ := window.AppendSeries(nil, "b", []window.Label{{Name: "route", Value: "/search"}})
	for _, ev := range slowest[string(key)] {
		if tr := fmt.Sprintf(`"trace_id":"%x"`, ev.TraceID); !strings.Contains(body, tr) {
			t.Fatalf("the whole range lacks %s: %s", tr, body)
		}
	}
}

// TestQueryExemplarsCapped: past Config.MaxExemplars the answer stops, says so in a warning,
// and holds exactly the cap.
func TestQueryExemplarsCapped(t *testing.T) {
	d, _ := exemplarDemo(t)
	srv := serveDemo(t, d, Config{MaxExemplars: 7})
	res, err := http.Get(srv.URL + "/api/v1/query_exemplars?" + url.Values{"query": {"duration_ms"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Data []struct {
			Exemplars []json.RawMessage
		}
		Warnings []string
	}
	raw := readAll(t, res)
	if err := json.Unmarshal([]byte(raw), &body); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range body.Data {
		n += len(r.Exemplars)
	}
	if n != 7 || len(body.Warnings) != 1 || !strings.Contains(body.Warnings[0], "exemplars truncated at 7") {
		t.Fatalf("%d exemplars, warnings %q, want 7 and the truncation's: %.300s", n, body.Warnings, raw)
	}
}
