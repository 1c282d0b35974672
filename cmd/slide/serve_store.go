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
	)
}

// Defaults of the HTTP guards against slow and greedy clients.
const (
	defaultReadHeaderTimeout = 5 * time.Second
	defaultMaxConnsPerClient = 256
)
