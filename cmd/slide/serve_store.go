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

// registerStoreMetrics exports the store's refusal counters.
func registerStoreMetrics(reg prometheus.Registerer, store *window.Store) {
	counter := func(name, help string, f func(window.StoreStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(store.Stats())) })
	}
	reg.MustRegister(
		counter("slide_store_evicted_series_total", "Idle series removed from the window store.", func(s window.StoreStats) uint64 { return s.Evicted }),
		seriesRefusedByMetric{store, prometheus.NewDesc("slide_store_series_refused_total",
			"Events refused because their new series would pass --max-series-per-metric, by metric (a metric is listed from its first refusal).",
			[]string{"metric"}, nil)},
	)
}

// seriesRefusedByMetric exports window.Store.EachMetricRefused at scrape time.
type seriesRefusedByMetric struct {
	store *window.Store
	desc  *prometheus.Desc
}

func (c seriesRefusedByMetric) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c seriesRefusedByMetric) Collect(ch chan<- prometheus.Metric) {
	c.store.EachMetricRefused(func(metric string, n uint64) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), metric)
	})
}

// Defaults of the HTTP guards against slow and greedy clients.
const (
	defaultReadHeaderTimeout = 5 * time.Second
	defaultMaxConnsPerClient = 256
)
