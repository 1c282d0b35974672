package window

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// RangeSlots fed the slots of every series, partition by partition (as a cluster member
// gets them: its own and its peers'), composes exactly the points ReadRangeSelected and
// ReadRangeGroups give on the one store: count, sum, min, max and quantiles bit for bit.
func TestRangeSlotsEqualReadRange(t *testing.T) {
	s, now := labelledStore(t)
	rc := s.RingConfig("latency_ms")
	qs := []float64{0.5, 0.99}
	sels := map[string]*Selector{}
	for name, m := range map[string]struct {
		key string
		ms  []Matcher
	}{
		"glob":  {"tenant-1*", nil},
		"match": {"", []Matcher{{"code", MatchRegexp, "5.."}}},
		"one":   {"tenant-3", nil},
	} {
		sel, err := CompileSelector(m.key, m.ms)
		if err != nil {
			t.Fatal(err)
		}
		sels[name] = sel
	}
	for _, shape := range [][2]time.Duration{{10 * time.Second, 10 * time.Second}, {time.Minute, 20 * time.Second}, {5 * time.Minute, time.Minute}} {
		for name, sel := range sels {
			for _, by := range [][]string{nil, {"route", "code"}} {
				rs, err := NewRangeSlots(rc, now, shape[0], shape[1], qs, by)
				if err != nil {
					t.Fatal(err)
				}
				for p := range int32(4) { // the partitions one by one, as several instances hold them
					s.VisitSlotsIn(now, "latency_ms", sel, func(q int32) bool { return q == p }, nil, func(series string, _ int64, slots []SlotView) bool {
						if err := rs.Add(series, slots); err != nil {
							t.Fatal(err)
						}
						return true
					})
				}
				got, err := rs.Read()
				if err != nil {
					t.Fatal(err)
				}
				var want []RangeGroup
				if by == nil {
					pts, err := s.ReadRangeSelected(now, "latency_ms", sel, shape[0], shape[1], qs, nil)
					if err != nil {
						t.Fatal(err)
					}
					want = []RangeGroup{{Labels: []Label{}, Points: pts}}
				} else if want, err = s.ReadRangeGroups(now, "latency_ms", sel, by, shape[0], shape[1], qs, 0, nil); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%v %s by %v: %d groups, want %d", shape, name, by, len(got), len(want))
				}
				if ends := rs.Ends(); !slices.Equal(ends, pointEnds(got[0].Points)) {
					t.Fatalf("%v %s by %v: Ends %v, the points end at %v", shape, name, by, ends, pointEnds(got[0].Points))
				}
				if by != nil && len(want) > 1 { // capped below its groups, the read stops at the first group past the cap
					capped, err := NewRangeSlots(rc, now, shape[0], shape[1], qs, by)
					if err != nil {
						t.Fatal(err)
					}
					capped.LimitGroups(len(want) - 1)
					var addErr error
					s.VisitSlots(now, "latency_ms", sel, nil, func(series string, _ int64, slots []SlotView) bool {
						addErr = capped.Add(series, slots)
						return addErr == nil
					})
					if _, err := capped.Read(); !errors.Is(addErr, ErrGroupLimit) || !errors.Is(err, ErrGroupLimit) {
						t.Fatalf("%v %s by %v capped at %d of %d groups: Add %v, Read %v, want ErrGroupLimit", shape, name, by, len(want)-1, len(want), addErr, err)
					}
				}
				for i := range want {
					if !reflect.DeepEqual(got[i].Labels, want[i].Labels) || len(got[i].Points) != len(want[i].Points) {
						t.Fatalf("%v %s by %v group %d: %v with %d points, want %v with %d", shape, name, by, i, got[i].Labels, len(got[i].Points), want[i].Labels, len(want[i].Points))
					}
					for j, w := range want[i].Points {
						if g := got[i].Points[j]; !sameAgg(g, w) || g.Series != w.Series {
							t.Errorf("%v %s by %v group %v point %d: %+v, want %+v", shape, name, by, want[i].Labels, j, g, w)
						}
					}
				}
			}
		}
	}
}

// RangeSlots reads a tiered ring's own slots: a window past the retention is refused, and
// a step past it gives the newest point, the tiered read's.
func TestRangeSlotsTieredOwnSlots(t *testing.T) {
	rc := RingConfig{Slot: time.Minute, Slots: 5, Tiers: []Tier{{Slot: time.Hour, Slots: 4}}}
	s := newTestStore(t, StoreConfig{Metrics: map[string]RingConfig{"cost": rc}})
	now := t0 + 4*time.Hour.Milliseconds() + 30_000
	for i := range int64(300) {
		ts := now - (299-i)*45_000 // oldest first: the ring moves forward
		if err := s.ObserveAt(ts, Event{TS: ts, Metric: "cost", Key: "org-1", Value: float64(1 + i%7)}); err != nil {
			t.Fatal(err)
		}
	}
	rc = s.RingConfig("cost")
	if _, err := NewRangeSlots(rc, now, time.Hour, time.Hour, nil, nil); !errors.Is(err, ErrBadWindow) {
		t.Errorf("a window of an hour over 5 minutes of slots: %v, want ErrBadWindow", err)
	}
	rs, err := NewRangeSlots(rc, now, 2*time.Minute, time.Hour, []float64{0.5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.VisitSlots(now, "cost", nil, nil, func(series string, _ int64, slots []SlotView) bool {
		return rs.Add(series, slots) == nil
	})
	got, err := rs.Read()
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.ReadRangeAt(now, "cost", "org-1", 2*time.Minute, time.Hour, []float64{0.5})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Points) != 1 || !sameAgg(got[0].Points[0], want[len(want)-1]) {
		t.Errorf("step of an hour: %+v, want the tiered read's newest point %+v", got, want[len(want)-1])
	}
}
