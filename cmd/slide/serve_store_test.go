package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/window"
)

// --max-series-per-metric's refusals are exported by metric, a metric listed from its first.
func TestSeriesRefusedByMetric(t *testing.T) {
	store, err := window.NewStore(window.StoreConfig{MaxSeriesPerMetric: 1})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	registerStoreMetrics(reg, store)
	now := time.Now().UnixMilli()
	for _, ev := range []window.Event{
		{Metric: "latency_ms", Key: "t\xffroute=/a"}, {Metric: "latency_ms", Key: "t\xffroute=/b"},
		{Metric: "latency_ms", Key: "t\xffroute=/c"}, {Metric: "cost", Key: "t"},
	} {
		ev.TS, ev.Value, ev.Count = now, 1, 1
		_ = store.ObserveAt(now, ev)
	}
	want := `
# HELP slide_store_series_refused_total Events refused because their new series would pass --max-series-per-metric, by metric (a metric is listed from its first refusal).
# TYPE slide_store_series_refused_total counter
slide_store_series_refused_total{metric="latency_ms"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "slide_store_series_refused_total"); err != nil {
		t.Fatal(err)
	}
}
