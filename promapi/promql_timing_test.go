package promapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
)

// BenchmarkPromQLQuantile: an instant histogram_quantile(0.95, sum by (key)
// (rate(latency_ms[5m]))) over 1,000 series (500 keys × 2 routes, 30 slots of a native:5
// ring) through the API's handler (ours: the default config, which pushes the query down;
// engine: the same with Config.DisablePushdown, the engine's evaluation), against /v1/top by p95 over the same series
// through query's handler (anchor: one window read per series, its p95, the ranking), both
// answered in process into a recorder. The goal (#28) is ours ≤ 3× anchor in CPU per query
// (cpu_ns/op, the process's: on a machine shared with other work it varies far less than
// ns/op, and the engine's garbage collection is charged to it).
func BenchmarkPromQLQuantile(b *testing.B) {
	d := newDemo(b, "native:5", 500, 4)
	a, err := New(Config{Store: d.store, Now: d.now_})
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Config{Store: d.store, Now: d.now_, DisablePushdown: true})
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
		cpu0 := processCPU()
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
			if rec.Code != 200 || rec.Body.Len() < 1000 {
				b.Fatalf("%s: %d %.200s", target, rec.Code, rec.Body.String())
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
	}
	b.Run("ours", func(b *testing.B) { run(b, a.Handler(), ours) })
	b.Run("engine", func(b *testing.B) { run(b, e.Handler(), ours) })
	b.Run("anchor", func(b *testing.B) { run(b, qs.Handler(), anchor) })
}

// processCPU is the CPU time the process has used (user and system, every thread).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
