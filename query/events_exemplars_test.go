package query_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// TestEventsTraceIDsAreExemplars: slide JSON events POSTed to /v1/events with trace_id and
// span_id, into a store that keeps exemplars (slide serve --exemplars), come back from
// /api/v1/query_exemplars as each slot's slowest event that carried a trace: its ids in
// lowercase hex whatever case they came in, a 64-bit id as the last 8 bytes, and an event with
// an invalid id or none counted but never an exemplar.
func TestEventsTraceIDsAreExemplars(t *testing.T) {
	e := newEnv(t, func(c *query.Config) {
		st, err := window.NewStore(window.StoreConfig{Ring: window.RingConfig{Slot: 10 * time.Second, Slots: 30}, Exemplars: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := promapi.New(promapi.Config{Store: st, Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		c.Store, c.Events, c.PromAPI = st, intake(t, st), p.Handler()
	})
	e.clock.set(t0 + 25_000)
	const (
		traceA = "4bf92f3577b34da6a3ce929d0e0e4736"
		traceB = "5B8EFFF798038103D269B633813FC60C" // upper case: answered in lower
		spanB  = "EEE19B7EC3C1B174"
	)
	lines := []string{
		// Slot [t0, t0+10s) of tenant-1: the slowest with a trace is B (the 99 has none, the
		// 120 a zero trace id, the 150 a span id of 15 digits).
		fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":12,"trace_id":"%s","span_id":"00f067aa0ba902b7"}`, t0+1000, traceA),
		fmt.Sprintf(`{"span_id": "%s", "value": 30.5, "trace_id": "%s", "key": "tenant-1", "metric": "latency_ms", "ts": %d}`, spanB, traceB, t0+2000),
		fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":99}`, t0+3000),
		fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":120,"trace_id":"00000000000000000000000000000000"}`, t0+4000),
		fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":150,"trace_id":"%s","span_id":"00f067aa0ba902b"}`, t0+5000, traceA),
		// Slot [t0+10s, t0+20s): a 64-bit trace id without a span id, labelled.
		fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":7,"trace_id":"463ac35c9f6413ad","labels":{"route":"/pay"}}`, t0+12_000),
	}
	if a := e.post([]byte(strings.Join(lines, "\n"))); a.Accepted != len(lines) {
		t.Fatalf("accepted %d of %d: %+v", a.Accepted, len(lines), a)
	}
	var answer struct {
		Status string `json:"status"`
		Data   []struct {
			SeriesLabels map[string]string `json:"seriesLabels"`
			Exemplars    []struct {
				Labels    map[string]string `json:"labels"`
				Value     string            `json:"value"`
				Timestamp float64           `json:"timestamp"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	e.getJSON("/api/v1/query_exemplars?"+url.Values{"query": {`latency_ms_max{key="tenant-1"}`},
		"start": {fmt.Sprint(t0 / 1000)}, "end": {fmt.Sprint(t0/1000 + 25)}}.Encode(), 200, &answer)
	got := map[string]string{} // by series: its exemplars
	for _, s := range answer.Data {
		for _, x := range s.Exemplars {
			got[s.SeriesLabels["route"]] += fmt.Sprintf("%s %s %s %.3f;", x.Labels["trace_id"], x.Labels["span_id"], x.Value, x.Timestamp)
		}
	}
	want := map[string]string{
		"":     fmt.Sprintf("%s %s 30.5 %.3f;", strings.ToLower(traceB), strings.ToLower(spanB), float64(t0+2000)/1000),
		"/pay": fmt.Sprintf("0000000000000000463ac35c9f6413ad  7 %.3f;", float64(t0+12_000)/1000),
	}
	if answer.Status != "success" || len(got) != len(want) || got[""] != want[""] || got["/pay"] != want["/pay"] {
		t.Fatalf("exemplars %v (%s), want %v", got, answer.Status, want)
	}
}
