package window

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppendSnapshot is the cost of snapshotting one of four partitions of a store of
// 100,000 latency series with 10 events each in 10 slots: what a partition's worker spends
// between two batches every --snapshot-interval.
func BenchmarkAppendSnapshot(b *testing.B) {
	s, err := NewStore(StoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	now := int64(1_764_489_600_000)
	for i := range 1_000_000 {
		k := i % 100_000
		s.ObserveAt(now, Event{TS: now - int64(i/100_000)*10_000, Metric: "latency_ms", Key: fmt.Sprintf("tenant-%d", k), Value: float64(1 + i%997), Feed: FeedOf(int32(k % 4))})
	}
	var buf []byte
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		buf, n = s.AppendSnapshot(buf[:0], now, 0)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(n), "series")
}

// BenchmarkLoadSnapshot is the cost of loading the snapshot of 1,000 cost series with an
// hour of one-minute slots, 1M events (values 1 to 97) spread over 55 minutes: the state
// ingest's BenchmarkSnapshotRestore restores, whatever the length of its history.
func BenchmarkLoadSnapshot(b *testing.B) {
	cfg := StoreConfig{Metrics: map[string]RingConfig{"cost": {Slot: time.Minute, Slots: 60}}}
	s, err := NewStore(cfg)
	if err != nil {
		b.Fatal(err)
	}
	now := int64(1_764_489_600_000)
	const n, span = 1_000_000, 55 * 60_000
	for i := range n {
		s.ObserveAt(now, Event{TS: now - span + span*int64(i)/n, Metric: "cost", Key: fmt.Sprintf("tenant-%d", i%1000), Value: float64(1 + i%97), Feed: FeedOf(0)})
	}
	data, series := s.AppendSnapshot(nil, now, 0)
	// memory is LoadSnapshot; streamed is LoadSnapshotFrom, ingest's call, in 64 KiB reads.
	for _, streamed := range []bool{false, true} {
		b.Run(map[bool]string{false: "memory", true: "streamed"}[streamed], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fresh, _ := NewStore(cfg)
				var got int
				var err error
				if streamed {
					got, err = fresh.LoadSnapshotFrom(now, 0, bytes.NewReader(data), int64(len(data)), SnapshotLimits{})
				} else {
					got, err = fresh.LoadSnapshot(now, 0, data)
				}
				if err != nil || got != series {
					b.Fatalf("loaded %d of %d series: %v", got, series, err)
				}
			}
			b.SetBytes(int64(len(data)))
			b.ReportMetric(float64(series), "series")
		})
	}
}
