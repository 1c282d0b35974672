package query_test

import (
	"net/url"
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

// TestMatchOfAbsentLabelSaysSo: a match= of a label no series of the metric has (a typo,
// http_rout for http_route, or a span attribute --span-dimensions does not name) was a 404
// "no series matches" with no word of why, where by= of such a label warns; the 404 now
// names the label, the nearest label the series have, and where they are listed. A label
// the series have, with a value none has, stays the plain 404.
func TestMatchOfAbsentLabelSaysSo(t *testing.T) {
	e := newEnv(t, nil)
	s, err := window.AppendSeries(nil, "checkout", []window.Label{{Name: "http_route", Value: "/cart"}, {Name: "span_kind", Value: "SPAN_KIND_SERVER"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.ObserveAt(t0, window.Event{TS: t0, Metric: "duration_ms", Key: string(s), Value: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	hint := `no series of duration_ms has the label \"http_rout\" (did you mean \"http_route\"?); its labels: http_route, span_kind (/v1/series?metric=duration_ms lists them)`
	for _, c := range []struct{ path, want, not string }{
		{"/v1/window?metric=duration_ms&key=checkout&match=" + url.QueryEscape(`http_rout="/cart"`), hint, ""},
		{"/v1/range?metric=duration_ms&key=checkout&window=1m&step=10s&match=" + url.QueryEscape(`http_rout=~"/c.*"`), hint, ""},
		{"/v1/window?metric=duration_ms&match=" + url.QueryEscape(`http_route="/nope"`), `no series matches metric=\"duration_ms\"`, "has the label"},
	} {
		status, body, _ := e.do("GET", c.path, nil)
		if status != 404 || !strings.Contains(string(body), c.want) || c.not != "" && strings.Contains(string(body), c.not) {
			t.Errorf("GET %s = %d %s\nwant 404 containing %s", c.path, status, body, c.want)
		}
	}
}
