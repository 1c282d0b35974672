package window

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// largestWrite records what WriteSnapshot hands its writer: every byte, and the largest write.
type largestWrite struct {
	bytes.Buffer
	largest, writes int
	failAt          int // the write that fails (1-based; 0: none)
}

var errSink = errors.New("sink full")

func (w *largestWrite) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == w.failAt {
		return 0, errSink
	}
	w.largest = max(w.largest, len(p))
	return w.Buffer.Write(p)
}

// TestWriteSnapshotStreamsWhatAppendSnapshotAppends: WriteSnapshot writes AppendSnapshot's
// encoding (its checksum holds, it loads into a store that encodes the same), in writes of about SnapshotFlushBytes at most (one shard here,
// so the bound holds within a shard too), and stops at its writer's error.
func TestWriteSnapshotStreamsWhatAppendSnapshotAppends(t *testing.T) {
	now := int64(1_764_489_600_000)
	for _, shards := range []int{1, 64} {
		s, err := NewStore(StoreConfig{Shards: shards, Metrics: map[string]RingConfig{"tok": tieredCfg()}})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		for k := range 600 {
			metric := "latency_ms"
			if k%7 == 0 {
				metric = "tok"
			}
			key := fmt.Sprintf("k%d", k)
			for slot := range 30 {
				for range 5 {
					_ = s.ObserveAt(now, Event{TS: now - int64(slot)*10_000, Metric: metric, Key: key,
						Value: float64(rng.IntN(100_000)) / 7, Feed: FeedOf(int32(k % 2))})
				}
			}
		}
		want, n := s.AppendSnapshot(nil, now, 0)
		if len(want) < 4*SnapshotFlushBytes {
			t.Fatalf("a snapshot of %d B proves nothing of a bound of %d", len(want), SnapshotFlushBytes)
		}
		largestSeries := len(want) / n * 4 // series are alike here: four times the mean is a generous one
		var w largestWrite
		m, size, err := s.WriteSnapshot(&w, now, 0)
		// The same bytes but for the series' order (a shard's map's).
		if err != nil || m != n || size != int64(len(want)) || w.Len() != len(want) {
			t.Fatalf("%d shards: WriteSnapshot wrote %d series, %d B (%v); AppendSnapshot %d series, %d B",
				shards, m, size, err, n, len(want))
		}
		if w.largest > SnapshotFlushBytes+largestSeries {
			t.Errorf("%d shards: a write of %d B, more than %d pending and a series (%d B)", shards, w.largest, SnapshotFlushBytes, largestSeries)
		}
		b, _ := NewStore(StoreConfig{Metrics: map[string]RingConfig{"tok": tieredCfg()}})
		if got, err := b.LoadSnapshot(now, 0, w.Bytes()); err != nil || got != n {
			t.Fatalf("loading what WriteSnapshot wrote: %d series, %v; want %d", got, err, n)
		}
		if again, m := b.AppendSnapshot(nil, now, 0); m != n || len(again) != len(want) {
			t.Fatalf("loaded, it encodes %d series in %d B; the store's %d in %d B", m, len(again), n, len(want))
		}
		failing := largestWrite{failAt: 2}
		if _, _, err := s.WriteSnapshot(&failing, now, 0); !errors.Is(err, errSink) || failing.writes != 2 {
			t.Errorf("a writer failing at its second write: %v after %d writes, want its error at once", err, failing.writes)
		}
	}
}
