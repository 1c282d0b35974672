package main

import (
	"context"
	_ "embed"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/window"
)

func evictLoop(ctx context.Context, store *window.Store, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			store.Evict(now.UnixMilli())
		}
	}
}

// registerStoreMetrics exports the store's refusal counters and its fill against its caps;
// perMetricCap says that --max-series-per-metric is set.
func registerStoreMetrics(reg prometheus.Registerer, store *window.Store, perMetricCap bool) {
	counter := func(name, help string, f func(window.StoreStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(store.Stats())) })
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	maxSeries, maxBytes := store.Caps()
	reg.MustRegister(
		gauge("slide_store_max_series", "The store's series cap (--max-series, or what --max-memory sets): slide_ingest_series is held under it.",
			func() float64 { return float64(maxSeries) }),
		gauge("slide_store_busy_bytes", "What the live series may take when busy, each weighed by its metric's ring with its tiers: the sum --max-memory bounds.",
			func() float64 { return float64(store.BusyBytes()) }),
		gauge("slide_store_max_bytes", "The byte budget of the store's series (from --max-memory; 0: none): a new series that would take slide_store_busy_bytes past it is refused.",
			func() float64 { return float64(maxBytes) }),
		counter("slide_store_evicted_series_total", "Idle series removed from the window store.", func(s window.StoreStats) uint64 { return s.Evicted }),
		seriesRefusedByMetric{store, perMetricCap, prometheus.NewDesc("slide_store_series_refused_total",
			"Events refused because their new series would pass --max-series-per-metric, by metric (0 for every metric with live series).",
			[]string{"metric"}, nil)},
	)
}

// seriesRefusedByMetric exports window.Store.EachMetricRefused at scrape time. With the
// cap set, every metric with live series is exported too, at 0 until its first refusal:
// Prometheus' increase() reads nothing from a series' first sample, so a series born at
// the count of the first burst would let that burst pass unalerted. (A metric whose series
// all went and that was never refused drops out, as the store forgets it.)
type seriesRefusedByMetric struct {
	store  *window.Store
	capped bool // --max-series-per-metric is set
	desc   *prometheus.Desc
}

func (c seriesRefusedByMetric) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c seriesRefusedByMetric) Collect(ch chan<- prometheus.Metric) {
	if !c.capped {
		return // nothing is refused by metric
	}
	refused := map[string]uint64{}
	c.store.EachMetricRefused(func(metric string, n uint64) { refused[metric] = n })
	for _, m := range c.store.Metrics() {
		if _, ok := refused[m]; !ok {
			refused[m] = 0
		}
	}
	for m, n := range refused {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), m)
	}
}

// Defaults of the HTTP guards against slow and greedy clients.
const (
	defaultReadHeaderTimeout = 5 * time.Second
	defaultMaxConnsPerClient = 256
)
