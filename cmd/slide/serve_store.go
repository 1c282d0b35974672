package main

import (
	"context"
	_ "embed"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// newEventSink records POST /v1/events bodies straight into this instance's store, with the
// same decoder and reasons as Kafka records. Such events are not in the log: a restart loses
// them and, with several instances, they land on the instance that received them. Producers
// that need durability or partitioning write to the topic instead.
func newEventSink(store *window.Store) query.EventSink {
	pool := sync.Pool{New: func() any {
		d, _ := event.NewDecoder(event.Config{}) // defaults are valid
		return d
	}}
	return query.EventSinkFunc(func(_ context.Context, body []byte, now int64) (query.EventsResult, error) {
		d := pool.Get().(*event.Decoder)
		defer pool.Put(d)
		res := query.EventsResult{Rejected: map[string]int{}}
		d.DecodeLines(body, now, func(_ []byte, ev window.Event, r event.Reason) {
			if r == event.ReasonNone {
				// ev.Feed is 0 (no feed): never dropped on a partition's revocation
				r = event.ReasonOf(store.ObserveAt(now, ev))
			}
			if r == event.ReasonNone {
				res.Accepted++
			} else {
				res.Rejected[r.String()]++
			}
		})
		return res, nil
	})
}

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
