package window

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// VisitFirstSlots agrees with VisitSlots on tiered rings (slots aged into a tier are
// neither's), a skew of five slots, a one-slot ring, and rings the store's clock jumped
// past (back to raw events), read from before the store's now to past the retention.
func TestVisitFirstSlotsTieredSkewedIdle(t *testing.T) {
	s := newTestStore(t, StoreConfig{Metrics: map[string]RingConfig{
		"tiered": {Slot: 10 * time.Second, Slots: 6, Tiers: []Tier{{Slot: time.Minute, Slots: 10}}},
		"skewed": {Slot: 10 * time.Second, Slots: 4, Skew: 50 * time.Second},
		"one":    {Slot: 10 * time.Second, Slots: 1},
		"m":      {},
	}})
	rng := rand.New(rand.NewPCG(1, 2))
	now := int64(1_000_000_000)
	for round := range 300 {
		now += int64(rng.IntN([]int{40_000, 400_000}[round%2]))
		for range rng.IntN(6) {
			m := []string{"tiered", "skewed", "one", "m"}[rng.IntN(4)]
			rc := s.RingConfig(m)
			ts := now - int64(rng.IntN(int(rc.Retention().Milliseconds()))) + int64(rng.IntN(int(rc.Skew.Milliseconds())+1))
			_ = s.ObserveAt(now, Event{TS: ts, Metric: m, Key: fmt.Sprintf("k%d", rng.IntN(8)), Value: 1, Count: uint64(rng.IntN(3))})
		}
		for _, m := range []string{"tiered", "skewed", "one", "m"} {
			for _, at := range []int64{now - 70_000, now - 10_000, now, now + 5_000, now + 30_000, now + 400_000} {
				got, want := firstSlotsBothWays(s, at, m)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("round %d %s at %d (now %d): %v, want %v", round, m, at, now, got, want)
				}
			}
		}
	}
}
