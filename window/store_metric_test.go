package window

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestMetricsFollowTheSeries: Metrics and MetricSeries, kept as counts as series come and
// go, list what a walk over the series finds, through creation by concurrent writers,
// refused events (a late event's new series is unlinked at once), the per-metric cap,
// eviction, a partition's drop and Reset; a metric whose series are all gone is forgotten.
func TestMetricsFollowTheSeries(t *testing.T) {
	now := int64(1_800_000_000_000)
	s, err := NewStore(StoreConfig{Shards: 8, MaxSeriesPerMetric: 50, Now: func() int64 { return now },
		Ring: RingConfig{Slot: 10 * time.Second, Slots: 6}})
	if err != nil {
		t.Fatal(err)
	}
	walk := func() map[string]int {
		got := map[string]int{}
		s.each(func(se *series) { got[se.metric]++ })
		return got
	}
	check := func(when string) {
		t.Helper()
		want := walk()
		if got, w := s.Metrics(), slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) {
			t.Fatalf("%s: Metrics %v, the series have %v", when, got, w)
		}
		counts, err := s.MetricSeries(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if want[c.Metric] != c.Series {
				t.Fatalf("%s: MetricSeries %s %d, the series %d", when, c.Metric, c.Series, want[c.Metric])
			}
		}
		if len(counts) != len(want) {
			t.Fatalf("%s: MetricSeries lists %d metrics, the series %d", when, len(counts), len(want))
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 2000 {
				ev := Event{Metric: fmt.Sprintf("m%d", rng.IntN(20)), Key: fmt.Sprintf("k%d", rng.IntN(80)), TS: now - rng.Int64N(50_000), Value: 1, Count: 1,
					Feed: FeedOf(int32(i % 3))}
				if i%7 == 0 {
					ev.TS = now - time.Hour.Milliseconds() // late: refused, its new series unlinked
				}
				_ = s.ObserveAt(now, ev)
			}
		})
	}
	wg.Wait()
	check("after the writers")
	refused := 0
	s.EachMetricRefused(func(string, uint64) { refused++ })
	if refused == 0 || len(s.Metrics()) != 20 {
		t.Fatalf("%d metrics refused at the cap of 50 series, %d metrics: the test covers too little", refused, len(s.Metrics()))
	}
	if n := s.DropPartition(1); n == 0 {
		t.Fatal("no series of partition 1 dropped")
	}
	check("after a partition's drop")
	now += 40_000 // some series' events leave the window
	if n := s.Evict(now); n == 0 {
		t.Fatal("nothing evicted: the test covers too little")
	}
	check("after an eviction")
	s.Reset()
	check("after Reset")
	s.metricsMu.Lock()
	left := len(s.perMetric)
	s.metricsMu.Unlock()
	if left != refused {
		t.Fatalf("%d metrics still counted with no series, want only the %d refused ones (kept for their refusals)", left, refused)
	}
}
