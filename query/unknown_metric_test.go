package query_test

import (
	"strings"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// TestUnknownMetricNamesTheKnownOnes: a metric with no series is answered 404 naming the
// metrics there are, the closest first, by every read that names a metric; a known metric
// without the key stays "no series", and a ranking of a known metric with nothing selected
// stays an empty 200.
func TestUnknownMetricNamesTheKnownOnes(t *testing.T) {
	e := newEnv(t, nil)
	for _, m := range []string{"cost", "latency_ms", "tokens"} {
		if err := e.store.ObserveAt(t0, window.Event{TS: t0, Metric: m, Key: "tenant-1", Value: 1, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/v1/window?metric=latency&key=tenant-1", 404, `no metric \"latency\" (did you mean \"latency_ms\"?); known metrics: latency_ms, `},
		{"/v1/top?metric=latency", 404, `no metric \"latency\" (did you mean \"latency_ms\"?); known metrics: latency_ms, `},
		{"/v1/range?metric=tokns&key=tenant-1&window=1m&step=10s", 404, `(did you mean \"tokens\"?); known metrics: tokens, `},
		{"/v1/window?metric=zzz&key=tenant-1", 404, `no metric \"zzz\"; known metrics: `},
		{"/v1/window?metric=latency_ms&key=tenant-2", 404, `no series metric=\"latency_ms\" key=\"tenant-2\"`},
		{"/v1/top?metric=latency_ms&key=nobody*", 200, `"top":[]`},
	} {
		status, body, _ := e.do("GET", c.path, nil)
		if status != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("GET %s = %d %s\nwant %d containing %s", c.path, status, body, c.status, c.want)
		}
	}
}
