package query_test

import (
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// BenchmarkHTTPRange: GET /v1/range of one full series, 30 points (one per 10 s slot of
// the retention, p50/p95/p99 each), over loopback (ours) against one GET /v1/window 5m read
// of p50/p95/p99 of the same series (anchor). Goal: ours ≥ 0.5× the anchor's req/s.
func BenchmarkHTTPRange(b *testing.B) {
	e := newEnv(b, nil)
	for ts := t0; ts < t0+5*60_000; ts += 100 { // 100 events per slot
		e.clock.set(ts)
		if err := e.store.ObserveAt(ts, window.Event{TS: ts, Metric: "latency_ms", Key: "tenant-42", Value: float64(1 + (ts/100)%997)}); err != nil {
			b.Fatal(err)
		}
	}
	rangeURL := e.http.URL + "/v1/range?metric=latency_ms&key=tenant-42&q=0.5,0.95,0.99"
	windowURL := e.http.URL + "/v1/window?metric=latency_ms&key=tenant-42&window=5m&q=0.5,0.95,0.99"
	get := func(u string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest("GET", u, nil)
			return req
		}
	}
	b.Run("ours", func(b *testing.B) { runLoad(b, e.http, 200, get(rangeURL)) })
	b.Run("anchor", func(b *testing.B) { runLoad(b, e.http, 200, get(windowURL)) })
}

// BenchmarkScrapeHistograms: one protobuf scrape (as Prometheus with native histograms asks
// for it) of 10,000 series exported as native histograms of their 5-minute window (ours,
// --export-histograms over native:5 rings, 100 lognormal latencies a series: about 70
// buckets each) against the same 10,000 series exported as one gauge each, their window max
// (anchor, --export-windows latency_ms:5m:max). Both go through promhttp. Goal: ours ≥ 0.5×
// the anchor's speed, i.e. ours ÷ anchor ≤ 2 in ns/op.
func BenchmarkScrapeHistograms(b *testing.B) {
	const series = 10_000
	st, now := scrapeStore(b, series, false)
	hists, _ := query.ParseHistogramSpecs("latency_ms:5m")
	gauges, _ := query.ParseExportSpecs("latency_ms:5m:max")
	ours, anchor := scrapeHandler(b, st, now, series, func(c *query.Config) { c.ExportHistograms = hists }), scrapeHandler(b, st, now, series, func(c *query.Config) { c.Export = gauges })
	// The first full-window read of a series folds its current slot into the ring's kept
	// aggregate (a one-time allocation): do it for every series before either is timed.
	anchor.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	b.Run("ours", func(b *testing.B) { benchScrape(b, ours) })
	b.Run("anchor", func(b *testing.B) { benchScrape(b, anchor) })
}

// BenchmarkScrapeHistogramsExemplars: BenchmarkScrapeHistograms' ours over a store that
// keeps exemplars (--exemplars), exported (--export-exemplars), every event traced: each histogram carries the 25
// exemplars of its window's slots. Compare with BenchmarkScrapeHistograms/ours for the
// exemplars' cost.
func BenchmarkScrapeHistogramsExemplars(b *testing.B) {
	const series = 10_000
	st, now := scrapeStore(b, series, true)
	hists, _ := query.ParseHistogramSpecs("latency_ms:5m")
	h := scrapeHandler(b, st, now, series, func(c *query.Config) { c.ExportHistograms, c.ExportExemplars = hists, true })
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	benchScrape(b, h)
}

// scrapeStore holds series series of latency_ms over native:5 rings, 100 lognormal
// latencies each over 250 s (each with a trace id when exemplars), and the time to read it at.
func scrapeStore(b *testing.B, series int, exemplars bool) (*window.Store, int64) {
	st, err := window.NewStore(window.StoreConfig{
		Metrics:   map[string]window.RingConfig{"latency_ms": {Sketch: sketch.Kind{Name: sketch.NameNative}}},
		Exemplars: exemplars,
	})
	if err != nil {
		b.Fatal(err)
	}
	now := t0 + 250_000
	rng := rand.New(rand.NewPCG(15, 4))
	for i := range series {
		key := "tenant-" + strconv.Itoa(i)
		for j := range 100 {
			ev := window.Event{TS: t0 + int64(j)*2500, Metric: "latency_ms", Key: key, Value: math.Exp(math.Log(60) + rng.NormFloat64())}
			if exemplars {
				ev.TraceID, ev.SpanID = [16]byte{0: byte(i), 1: byte(i >> 8), 2: byte(j), 15: 1}, [8]byte{0: byte(j), 7: 1}
			}
			if err := st.ObserveAt(now, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	return st, now
}

// scrapeHandler serves st's /metrics at now with the exports mod sets.
func scrapeHandler(b *testing.B, st *window.Store, now int64, series int, mod func(*query.Config)) http.Handler {
	reg := prometheus.NewRegistry()
	cfg := query.Config{Store: st, Now: func() time.Time { return time.UnixMilli(now) }, Registerer: reg, Gatherer: reg, ExportMaxSeries: series}
	mod(&cfg)
	s, err := query.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return s.Handler()
}

// benchScrape times protobuf scrapes of h.
func benchScrape(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	var bytes int
	for b.Loop() {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("scrape: %d", rec.Code)
		}
		bytes = rec.Body.Len()
		_, _ = io.Copy(io.Discard, rec.Body)
	}
	b.ReportMetric(float64(bytes), "bytes/scrape")
}
