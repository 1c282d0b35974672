package window

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A range read of a tiered ring reaches through the tiers: five days of events into
// 1m:60+1h:48+1d:36 (with and without a sketch), read at several windows and steps; every
// point holds exactly the events of its [From, To), points go back past the first tier, and
// the merged, grouped and one-series reads agree.
func TestReadRangeTiered(t *testing.T) {
	for _, noSketch := range []bool{true, false} {
		rc := RingConfig{Slot: time.Minute, Slots: 60, NoSketch: noSketch,
			Tiers: []Tier{{Slot: time.Hour, Slots: 48}, {Slot: 24 * time.Hour, Slots: 36}}}
		s, err := NewStore(StoreConfig{Metrics: map[string]RingConfig{"cost": rc}})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(29, 2))
		type ev struct {
			ts int64
			v  float64
		}
		var evs []ev
		start := int64(1_764_489_600_000) + 7*60_000 + 13_000 // not on an hour or a day
		now := start
		for now < start+5*24*3_600_000 {
			now += rng.Int64N(40 * 60_000)
			v := float64(1 + rng.IntN(9))
			if err := s.ObserveAt(now, Event{TS: now, Metric: "cost", Key: "t-1", Value: v, Count: 1}); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev{now, v})
		}
		now += 17 * 60_000 // a read a while after the last event
		for _, c := range []struct{ w, step time.Duration }{
			{time.Minute, time.Minute}, {time.Hour, time.Hour}, {time.Hour, 10 * time.Minute},
			{3 * time.Hour, time.Hour}, {24 * time.Hour, 24 * time.Hour}, {30 * time.Hour, 7 * time.Hour},
		} {
			pts, err := s.ReadRangeAt(now, "cost", "t-1", c.w, c.step, []float64{0.5})
			if err != nil {
				t.Fatal(err)
			}
			if len(pts) == 0 || now-pts[0].From < 3*24*3_600_000 {
				t.Fatalf("window %v step %v: %d points, the oldest from %d ms before now: the range stops in the first tier", c.w, c.step, len(pts), now-pts[0].From)
			}
			total := 0
			for i, p := range pts {
				var n uint64
				var sum float64
				for _, e := range evs {
					if e.ts >= p.From && e.ts < p.To {
						n++
						sum += e.v
					}
				}
				if p.Count != n || p.Sum != sum {
					t.Fatalf("window %v step %v point %d [%d, %d): count %d sum %v, the events there: %d, %v", c.w, c.step, i, p.From, p.To, p.Count, p.Sum, n, sum)
				}
				if i > 0 && (p.To <= pts[i-1].To || p.From < pts[i-1].From) {
					t.Fatalf("window %v step %v: point %d [%d, %d) not after point %d [%d, %d)", c.w, c.step, i, p.From, p.To, i-1, pts[i-1].From, pts[i-1].To)
				}
				if c.w == c.step && i > 0 && p.From != pts[i-1].To {
					t.Fatalf("window %v = step: point %d starts at %d, the one before ends at %d", c.w, i, p.From, pts[i-1].To)
				}
				if noSketch != (p.Quantiles[0] != p.Quantiles[0]) && p.Count > 0 {
					t.Fatalf("point %d: median %v with NoSketch %v", i, p.Quantiles[0], noSketch)
				}
				total += int(n)
			}
			if c.w == c.step && total == 0 {
				t.Fatal("no events in the points")
			}
			// The ring's own retention: the points there are those of a ring without tiers.
			if last := pts[len(pts)-1]; c.w <= time.Hour && (last.To != (floorDiv(now, 60_000)+1)*60_000 || last.To-last.From != c.w.Milliseconds()) {
				t.Fatalf("window %v: the newest point is [%d, %d)", c.w, last.From, last.To)
			}
			merged, err := s.ReadRangeMerged(now, "cost", func(string) bool { return true }, c.w, c.step, []float64{0.5})
			if err != nil {
				t.Fatal(err)
			}
			groups, err := s.ReadRangeGroups(now, "cost", nil, []string{"key"}, c.w, c.step, []float64{0.5}, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The size of the answer is known before the read: RangeEnds are the points' ends.
			if ends, err := RangeEnds(s.RingConfig("cost"), now, c.w, c.step); err != nil || !slices.Equal(ends, pointEnds(pts)) {
				t.Fatalf("window %v step %v: RangeEnds %v (%v), the points end at %v", c.w, c.step, ends, err, pointEnds(pts))
			}
			for _, other := range [][]Agg{merged, groups[0].Points} {
				if len(other) != len(pts) {
					t.Fatalf("window %v: %d points merged or grouped, %d of the series", c.w, len(other), len(pts))
				}
				for i := range pts {
					a, b := pts[i], other[i]
					if a.From != b.From || a.To != b.To || a.Count != b.Count || a.Sum != b.Sum || a.Min != b.Min || a.Max != b.Max {
						t.Fatalf("window %v point %d: %+v merged or grouped, %+v of the series", c.w, i, b, a)
					}
				}
			}
		}
		// The reach bounds window and step.
		if _, err := s.ReadRangeAt(now, "cost", "t-1", 40*24*time.Hour, time.Hour, nil); err == nil {
			t.Fatal("a window past the reach was read")
		}
	}
}
