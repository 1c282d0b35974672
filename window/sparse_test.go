package window

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// fillSparse feeds n series of the default ring events events each, one per slot across the
// retention, through ObserveAt as ingest does, and returns the store at its now.
func fillSparse(tb testing.TB, n, events int) (*Store, int64) {
	tb.Helper()
	s, err := NewStore(StoreConfig{MaxSeries: n})
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(19, 19))
	now := t0 + 299_999
	for i := range n {
		ev := Event{Metric: "latency_ms", Key: fmt.Sprintf("tenant-%d", i), Feed: FeedOf(int32(i % 8))}
		for j := range events {
			ev.TS = t0 + int64(j*30/events)*10_000 + int64(rng.IntN(10_000))
			ev.Value = 1 + 500*rng.Float64()
			if err := s.ObserveAt(now, ev); err != nil {
				tb.Fatalf("series %d event %d: %v", i, j, err)
			}
		}
	}
	return s, now
}

// sparseBytesPerSeries is the heap growth after GC per series of fillSparse.
func sparseBytesPerSeries(tb testing.TB, n, events int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, _ := fillSparse(tb, n, events)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// TestSparseSeriesMemoryBudget holds issue #19's budget: a series with at most 10 events in
// its retention costs at most 1 KB of heap after GC, key, map entry and header included.
func TestSparseSeriesMemoryBudget(t *testing.T) {
	for _, events := range []int{1, 3, 10} {
		got := sparseBytesPerSeries(t, 100_000, events)
		t.Logf("%d events: %.0f B/series", events, got)
		if got > 1024 {
			t.Errorf("%d events per series: %.0f B/series, budget 1024", events, got)
		}
	}
}

// TestSeriesHashSpreads checks that the store's hash tells apart what it must: the split
// between metric and key, every byte of either, and the seed.
func TestSeriesHashSpreads(t *testing.T) {
	seen := map[uint64]string{}
	add := func(m, k string) {
		h := seriesHash(42, m, k)
		if prev, ok := seen[h]; ok {
			t.Fatalf("hash of %q/%q collides with %s", m, k, prev)
		}
		seen[h] = m + "/" + k
	}
	add("ab", "c")
	add("a", "bc")
	add("abc", "")
	for n := 0; n <= 40; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'x'
		}
		add("m", string(b))
		for i := range b {
			b[i] = 'y'
			add("m", string(b))
			b[i] = 'x'
		}
	}
	if seriesHash(1, "latency_ms", "tenant-42") == seriesHash(2, "latency_ms", "tenant-42") {
		t.Fatal("seed does not change the hash")
	}
}
