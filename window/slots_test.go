package window

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// TestVisitSlotsEqualsOneSlotRange: the slots VisitSlots hands over are, slot for slot, what
// a one-slot ReadRangeAt answers (count, sum, min, max, and the quantiles of their bins),
// for a sparse series and a dense one, and skip slots ahead of now and slots a selector
// refuses.
func TestVisitSlotsEqualsOneSlotRange(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	rng := rand.New(rand.NewPCG(28, 1))
	now := int64(1_000_000_000)
	for i := range 40 {
		ts := now - int64(rng.IntN(290_000))
		if err := s.ObserveAt(now, Event{TS: ts, Metric: "m", Key: "dense", Value: rng.Float64() * 100, Count: 1}); err != nil {
			t.Fatal(err)
		}
		if i < 5 {
			if err := s.ObserveAt(now, Event{TS: ts, Metric: "m", Key: "sparse", Value: float64(i + 1), Count: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One event in the next slot, inside the skew: not part of a read at now.
	if err := s.ObserveAt(now, Event{TS: now + 10_000, Metric: "m", Key: "dense", Value: 1e6, Count: 1}); err != nil {
		t.Fatal(err)
	}
	ix := s.Indexer("m")
	qs := []float64{0.5, 0.9}
	// fn runs under the shard lock: copy what it saw, read the ranges after.
	type visited struct {
		cur   int64
		slots []SlotView
		qs    [][]float64
	}
	seen := map[string]visited{}
	s.VisitSlots(now, "m", nil, nil, func(series string, cur int64, slots []SlotView) bool {
		v := visited{cur: cur}
		for _, sl := range slots {
			v.qs = append(v.qs, sl.Bins.Quantiles(ix, qs, nil))
			sl.Bins = sketch.Slot{}
			v.slots = append(v.slots, sl)
		}
		seen[series] = v
		return true
	})
	for series, vis := range seen {
		cur := vis.cur
		if cur != FloorDiv(now, 10_000) {
			t.Errorf("%s: cur %d, want %d", series, cur, FloorDiv(now, 10_000))
		}
		points, err := s.ReadRangeAt(now, "m", series, 10*time.Second, 10*time.Second, qs)
		if err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, p := range points {
			if p.Count > 0 {
				live++
			}
		}
		if live != len(vis.slots) {
			t.Fatalf("%s: %d slots visited, %d live in the range read", series, len(vis.slots), live)
		}
		for i, v := range vis.slots {
			p := points[len(points)-1-int(cur-v.Index)]
			a := Agg{Count: v.Count, Sum: v.Sum, Min: v.Min, Max: v.Max, Quantiles: vis.qs[i]}
			a.clampQuantiles()
			a.From, a.To, a.Series = p.From, p.To, p.Series
			if !aggEqual(a, p, 0) {
				t.Errorf("%s slot %d: visited %+v, read %+v", series, v.Index, a, p)
			}
			if v.Max >= 1e6 {
				t.Errorf("%s: the slot ahead of now was visited", series)
			}
		}
	}
	if len(seen) != 2 || len(seen["sparse"].slots) == 0 || len(seen["dense"].slots) == 0 {
		t.Fatalf("visited %v, want both series with slots", seen)
	}
	sel, err := CompileSelector("sparse", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	s.VisitSlots(now, "m", sel, nil, func(series string, _ int64, slots []SlotView) bool {
		n++
		if series != "sparse" || len(slots) == 0 {
			t.Errorf("selector visit: %q, %d slots", series, len(slots))
		}
		return true
	})
	if n != 1 {
		t.Fatalf("selector visited %d series, want 1", n)
	}
}

// VisitFirstSlots hands each series the cur and first live slot VisitSlots would, for
// dense and sparse rings, rings with an event ahead of now inside the skew, rings whose
// oldest events the retention at a later now has evicted, and rings with no live slot
// left, at every now from before the events to past the retention.
func TestVisitFirstSlotsEqualsVisitSlots(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	rng := rand.New(rand.NewPCG(28, 2))
	now := int64(1_000_000_000)
	for i := range 400 {
		key := fmt.Sprintf("d-%d", i/2%5) // 40 events each: dense rings
		if i%2 == 1 {
			key = fmt.Sprintf("s-%d", i/2%15) // 13 or 14 each: sparse rings
		}
		ts := now - int64(rng.IntN(290_000))
		if err := s.ObserveAt(now, Event{TS: ts, Metric: "m", Key: key, Value: float64(i), Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"s-3", "s-5", "d-3"} {
		if err := s.ObserveAt(now, Event{TS: now + 10_000, Metric: "m", Key: key, Value: 1, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	checked := 0
	for at := now - 600_000; at <= now+600_000; at += 7_000 {
		got, want := firstSlotsBothWays(s, at, "m")
		if len(want) != 20 || !reflect.DeepEqual(got, want) {
			t.Fatalf("at %d: %v, want %v", at, got, want)
		}
		for _, e := range want {
			if e.live {
				checked++
			}
		}
	}
	if checked < 100 {
		t.Fatalf("%d live series checked: too few", checked)
	}
}

// extent is what VisitFirstSlots tells of a series: its cur and first live slot.
type extent struct {
	cur, first int64
	live       bool
}

// firstSlotsBothWays reads metric's series at now through VisitFirstSlots (got) and, from
// their slots, through VisitSlots (want).
func firstSlotsBothWays(s *Store, now int64, metric string) (got, want map[string]extent) {
	want = map[string]extent{}
	s.VisitSlots(now, metric, nil, nil, func(series string, cur int64, slots []SlotView) bool {
		e := extent{cur: cur}
		if len(slots) > 0 {
			e.first, e.live = slots[0].Index, true
		}
		want[series] = e
		return true
	})
	got = map[string]extent{}
	s.VisitFirstSlots(now, metric, nil, nil, nil, func(series string, cur, first int64, live bool) bool {
		got[series] = extent{cur, first, live}
		return true
	})
	return got, want
}
