package window

import (
	"errors"
	"testing"
	"time"
)

// MaxBytes weighs each series by its own ring: a store of short rings holds as many as fit,
// a long ring's series takes its share, and a series that goes gives its bytes back.
func TestMaxBytesWeighsEachRing(t *testing.T) {
	lat := RingConfig{Slot: 10 * time.Second, Slots: 30}
	cost := RingConfig{Slot: time.Minute, Slots: 60, Tiers: []Tier{{Slot: time.Hour, Slots: 48}, {Slot: 24 * time.Hour, Slots: 36}}}
	wLat, wCost := int64(TieredSeriesBytes(lat)), int64(TieredSeriesBytes(cost))
	if wLat != int64(DenseSeriesBytes(30)) || wCost <= 4*wLat {
		t.Fatalf("weights %d and %d: want the dense rule for a plain ring and a tiered ring over 4× it", wLat, wCost)
	}
	now := int64(1_764_489_600_000)
	st, err := NewStore(StoreConfig{Ring: lat, Metrics: map[string]RingConfig{"cost": cost}, MaxBytes: wCost + 3*wLat,
		Now: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	obs := func(metric, key string, p int32) error {
		return st.ObserveAt(now, Event{TS: now, Metric: metric, Key: key, Value: 1, Count: 1, Feed: FeedOf(p)})
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := obs("latency_ms", k, 0); err != nil {
			t.Fatalf("latency series %s: %v", k, err)
		}
	}
	if err := obs("cost", "t1", 1); err != nil {
		t.Fatalf("the cost series, within the bytes left: %v", err)
	}
	if got := st.BusyBytes(); got != wCost+3*wLat {
		t.Fatalf("BusyBytes = %d, want %d", got, wCost+3*wLat)
	}
	if err := obs("latency_ms", "d", 0); !errors.Is(err, ErrSeriesCap) {
		t.Fatalf("a fourth latency series past MaxBytes: %v, want ErrSeriesCap", err)
	}
	if err := obs("latency_ms", "a", 0); err != nil {
		t.Fatalf("an existing series at the cap: %v", err)
	}
	if n := st.DropPartition(0); n != 3 {
		t.Fatalf("dropped %d series, want 3", n)
	}
	if got := st.BusyBytes(); got != wCost {
		t.Fatalf("after the drop BusyBytes = %d, want %d", got, wCost)
	}
	if err := obs("cost", "t2", 1); !errors.Is(err, ErrSeriesCap) {
		t.Fatalf("a second cost series (%d + %d > %d): %v, want ErrSeriesCap", wCost, wCost, wCost+3*wLat, err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := obs("latency_ms", k, 0); err != nil {
			t.Fatalf("latency series %s after the drop gave the bytes back: %v", k, err)
		}
	}
	if got := st.Stats().Refused; got != 2 {
		t.Errorf("Refused = %d, want 2", got)
	}
}
