package window

import (
	"fmt"
	"testing"
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
