package promapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/slide-metrics/slide/query"
)

// BenchmarkPromQLQuantile: an instant histogram_quantile(0.95, sum by (key)
// (rate(latency_ms[5m]))) over 1,000 series (500 keys × 2 routes, 30 slots of a native:5
// ring) through the API's handler (ours), against /v1/top by p95 over the same series
// through query's handler (anchor: one window read per series, its p95, the ranking), both
// answered in process into a recorder. The goal (#28) is ours ≤ 3× anchor.
func BenchmarkPromQLQuantile(b *testing.B) {
	d := newDemo(b, "native:5", 500, 4)
	a, err := New(Config{Store: d.store, Now: d.now_})
	if err != nil {
		b.Fatal(err)
	}
	qs, err := query.New(query.Config{Store: d.store, Now: d.now_, MaxTopK: 1000})
	if err != nil {
		b.Fatal(err)
	}
	ours := "/api/v1/query?" + url.Values{"query": {`histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`}}.Encode()
	anchor := "/v1/top?metric=latency_ms&by=p95&window=5m&k=1000"
	run := func(b *testing.B, h http.Handler, target string) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
			if rec.Code != 200 || rec.Body.Len() < 1000 {
				b.Fatalf("%s: %d %.200s", target, rec.Code, rec.Body.String())
			}
		}
	}
	b.Run("ours", func(b *testing.B) { run(b, a.Handler(), ours) })
	b.Run("anchor", func(b *testing.B) { run(b, qs.Handler(), anchor) })
}
