package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/window"
)

// --max-series-per-metric's refusals are exported by metric, every metric with live series
// listed at 0 before its first refusal: increase() reads nothing from a series' first
// sample, so a metric listed from its first refusal (at the count of the whole burst) was
// never alerted on for it (found with increase(slide_store_series_refused_total[1m]) > 0
// under a real Prometheus: POST /v1/events of 80 new keys over the cap refused 31, and
// the rule stayed silent).
func TestSeriesRefusedByMetric(t *testing.T) {
	store, err := window.NewStore(window.StoreConfig{MaxSeriesPerMetric: 1})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	registerStoreMetrics(reg, store, true)
	now := time.Now().UnixMilli()
	observe := func(evs ...window.Event) {
		for _, ev := range evs {
			ev.TS, ev.Value, ev.Count = now, 1, 1
			_ = store.ObserveAt(now, ev)
		}
	}
	compare := func(want string) {
		t.Helper()
		want = `
# HELP slide_store_series_refused_total Events refused because their new series would pass --max-series-per-metric, by metric (0 for every metric with live series).
# TYPE slide_store_series_refused_total counter
` + want
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "slide_store_series_refused_total"); err != nil {
			t.Fatal(err)
		}
	}
	observe(window.Event{Metric: "latency_ms", Key: "t\xffroute=/a"}, window.Event{Metric: "cost", Key: "t"})
	compare(`slide_store_series_refused_total{metric="cost"} 0
slide_store_series_refused_total{metric="latency_ms"} 0
`)
	observe(window.Event{Metric: "latency_ms", Key: "t\xffroute=/b"}, window.Event{Metric: "latency_ms", Key: "t\xffroute=/c"})
	compare(`slide_store_series_refused_total{metric="cost"} 0
slide_store_series_refused_total{metric="latency_ms"} 2
`)
	// Without the cap nothing is refused by metric: no series of zeros.
	store, _ = window.NewStore(window.StoreConfig{})
	reg = prometheus.NewRegistry()
	registerStoreMetrics(reg, store, false)
	observe(window.Event{Metric: "cost", Key: "t"})
	if n, err := testutil.GatherAndCount(reg, "slide_store_series_refused_total"); err != nil || n != 0 {
		t.Errorf("without --max-series-per-metric: %d series (%v), want none", n, err)
	}
}

// The store's fill against its caps is exported, so that an SRE can warn before refusals:
// slide_store_busy_bytes moves by each new series' weight and back as series go, against
// slide_store_max_bytes (from --max-memory) and slide_store_max_series.
func TestStoreFillMetrics(t *testing.T) {
	per := int64(window.DenseSeriesBytes(window.DefaultSlots))
	store, err := window.NewStore(window.StoreConfig{MaxSeries: 7, MaxBytes: 2 * per})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	registerStoreMetrics(reg, store, false)
	read := func(name string) float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == name {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("%s not exported", name)
		return 0
	}
	now := time.Now().UnixMilli()
	for _, k := range []string{"a", "b", "c"} {
		_ = store.ObserveAt(now, window.Event{Metric: "latency_ms", Key: k, TS: now, Value: 1, Count: 1})
	}
	if got := read("slide_store_busy_bytes"); got != float64(2*per) {
		t.Errorf("slide_store_busy_bytes %v after two series admitted and a third refused, want %d", got, 2*per)
	}
	if got := read("slide_store_max_bytes"); got != float64(2*per) {
		t.Errorf("slide_store_max_bytes %v, want %d", got, 2*per)
	}
	if got := read("slide_store_max_series"); got != 7 {
		t.Errorf("slide_store_max_series %v, want 7", got)
	}
	store.Evict(now + int64(time.Hour/time.Millisecond))
	if got := read("slide_store_busy_bytes"); got != 0 {
		t.Errorf("slide_store_busy_bytes %v once every series went, want 0", got)
	}
}
