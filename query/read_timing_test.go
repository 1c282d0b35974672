package query_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// BenchmarkRead: the read routes through the server's handler in process (no network, so
// the window reads are most of what is timed), at a clock in the rings' current slot: one
// full series' 5-minute p50/p95/p99 (/v1/window), a glob over 200 series, the series'
// history (/v1/range) and the top 10 of the 200. The pair for issue #25's non-mutating
// reads is this benchmark on the build before and after, alternated.
func BenchmarkRead(b *testing.B) {
	e := newEnv(b, nil)
	for ts := t0; ts < t0+5*60_000; ts += 100 { // 100 events per slot
		if err := e.store.ObserveAt(ts, window.Event{TS: ts, Metric: "latency_ms", Key: "tenant-42", Value: float64(1 + (ts/100)%997)}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 200 {
		for ts := t0 + 200_000; ts < t0+5*60_000; ts += 2_000 {
			if err := e.store.ObserveAt(ts, window.Event{TS: ts, Metric: "latency_ms", Key: "g-" + strconv.Itoa(i), Value: float64(1 + (ts/7+int64(i))%997)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	e.clock.set(t0 + 5*60_000 - 1)
	e.store.Evict(e.clock.millis()) // every ring at the clock, as ingest leaves them
	h := e.srv.Handler()
	for _, c := range []struct{ name, path string }{
		{"window_5m", "/v1/window?metric=latency_ms&key=tenant-42&window=5m&q=0.5,0.95,0.99"},
		{"window_glob_5m", "/v1/window?metric=latency_ms&key=g-*&window=5m&q=0.5,0.95,0.99"},
		{"range", "/v1/range?metric=latency_ms&key=tenant-42&q=0.5,0.95,0.99"},
		{"top_5m", "/v1/top?metric=latency_ms&by=p95&k=10&window=5m"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", c.path, nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
				}
			}
		})
	}
}
