package window

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// under is the scan's predicate for a level: key label prefix, or under prefix + sep.
func under(prefix, sep string) SeriesMatch {
	return func(k string, _ int32) bool {
		kk := SeriesKeyOf(k)
		return kk == prefix || strings.HasPrefix(kk, prefix) && strings.HasPrefix(kk[len(prefix):], sep)
	}
}

// randLevelKey is a key of 1 to 4 levels from a small alphabet, so prefixes are shared;
// sometimes with a label, sometimes with an empty level.
func randLevelKey(rng *rand.Rand, sep string) string {
	parts := make([]string, 1+rng.IntN(4))
	for i := range parts {
		if rng.IntN(20) > 0 {
			parts[i] = string(rune('a' + rng.IntN(3)))
		}
	}
	k := strings.Join(parts, sep)
	if rng.IntN(5) == 0 {
		b, _ := AppendSeries(nil, k, []Label{{Name: "route", Value: "/r" + strconv.Itoa(rng.IntN(2))}})
		k = string(b)
	}
	return k
}

// MergeUnder answers exactly what the scan (MergePartial with the level predicate)
// answers, for random keys, prefixes, windows and times, through writes, late events,
// partition drops, eviction and repeated reads (the cache), with the index made before
// and after the series.
func TestLevelIndexMatchesScan(t *testing.T) {
	for _, sep := range []string{"/", "::"} {
		s, err := NewStore(StoreConfig{Metrics: map[string]RingConfig{"cost": {Slot: time.Minute, Slots: 60, NoSketch: true,
			Tiers: []Tier{{Slot: time.Hour, Slots: 24}}}}})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(29, uint64(len(sep))))
		now := int64(1_764_489_600_000)
		var ixs []*LevelIndex
		var prefixes []string
		wins := []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 3 * time.Hour}
		for step := range 3000 {
			if step == 300 {
				ixs = append(ixs, s.IndexLevels("cost", sep, 1), s.IndexLevels("cost", sep, 3))
				if s.IndexLevels("cost", sep, 3) != ixs[1] {
					t.Fatal("IndexLevels made a second index for the same arguments")
				}
			}
			switch r := rng.IntN(100); {
			case r < 70:
				k := randLevelKey(rng, sep)
				ev := Event{TS: now - rng.Int64N(5*60_000), Metric: "cost", Key: k, Value: float64(rng.IntN(50)), Count: 1, Feed: FeedOf(int32(rng.IntN(3)))}
				_ = s.ObserveAt(now, ev) // late ones are refused, as they may be
				kk := SeriesKeyOf(k)
				prefixes = append(prefixes, kk[:rng.IntN(len(kk)+1)])
				if i := strings.Index(kk, sep); i >= 0 {
					prefixes = append(prefixes, kk[:i])
				}
				_ = s.ObserveAt(now, Event{TS: now, Metric: "other", Key: k, Value: 1, Count: 1})
			case r < 72:
				s.DropPartition(int32(rng.IntN(3)))
			case r < 74:
				now += rng.Int64N(3 * 3_600_000)
				s.Evict(now)
			case r < 90:
				now += rng.Int64N(90_000)
			}
			if len(ixs) == 0 || len(prefixes) == 0 {
				continue
			}
			for range 3 {
				p := prefixes[rng.IntN(len(prefixes))]
				w := wins[rng.IntN(len(wins))]
				at := now - rng.Int64N(2)*rng.Int64N(120_000) // sometimes a read in the past
				var want Partial
				want.NoBins = true
				if err := s.MergePartial(at, "cost", under(p, sep), w, &want); err != nil {
					t.Fatal(err)
				}
				for _, ix := range ixs {
					got := Partial{NoBins: true}
					err := ix.MergeUnder(at, p, nil, w, &got)
					if !ix.Covers(p) {
						if err != ErrNotCovered {
							t.Fatalf("prefix %q beyond depth %d: %v, want ErrNotCovered", p, ix.depth, err)
						}
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					if !samePartial(got, want) {
						t.Fatalf("step %d, depth %d, prefix %q, window %v, at %d: index %+v, scan %+v", step, ix.depth, p, w, at, got, want)
					}
					// With a match: only partition 1's series.
					var wantP, gotP Partial
					wantP.NoBins, gotP.NoBins = true, true
					byP := func(k string, part int32) bool { return part == 1 && under(p, sep)(k, part) }
					_ = s.MergePartial(at, "cost", byP, w, &wantP)
					if err := ix.MergeUnder(at, p, func(_ string, part int32) bool { return part == 1 }, w, &gotP); err != nil || !samePartial(gotP, wantP) {
						t.Fatalf("with a match, prefix %q: index %+v (%v), scan %+v", p, gotP, err, wantP)
					}
				}
			}
		}
		s.Reset()
		for _, ix := range ixs {
			if n := len(ix.nodes); n != 0 {
				t.Errorf("after Reset the index keeps %d prefixes", n)
			}
		}
	}
}

// Writers, readers and the sweep at once (run with -race); once quiet, the index and the
// scan agree.
func TestLevelIndexConcurrent(t *testing.T) {
	s, err := NewStore(StoreConfig{Shards: 4, Metrics: map[string]RingConfig{"cost": {Slot: time.Second, Slots: 60, NoSketch: true}}})
	if err != nil {
		t.Fatal(err)
	}
	ix := s.IndexLevels("cost", "/", 2)
	const now = int64(1_764_489_600_000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 2000 {
				k := "org-" + strconv.Itoa(rng.IntN(2)) + "/team-" + strconv.Itoa(rng.IntN(3)) + "/user-" + strconv.Itoa(rng.IntN(5))
				at := now + int64(i)*10
				switch g {
				case 0, 1:
					_ = s.ObserveAt(at, Event{TS: at, Metric: "cost", Key: k, Value: 1, Count: 1, Feed: FeedOf(int32(g))})
				case 2:
					p := Partial{NoBins: true}
					if err := ix.MergeUnder(at, k[:5], nil, time.Minute, &p); err != nil {
						t.Error(err)
						return
					}
				default:
					if i%100 == 0 {
						s.DropPartition(0)
						s.Evict(at)
					}
				}
			}
		})
	}
	wg.Wait()
	end := now + 20_000
	for _, p := range []string{"org-0", "org-1", "org-0/team-1", "org-1/team-2"} {
		var want Partial
		want.NoBins = true
		if err := s.MergePartial(end, "cost", under(p, "/"), time.Minute, &want); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second from the cache
			got := Partial{NoBins: true}
			if err := ix.MergeUnder(end, p, nil, time.Minute, &got); err != nil || !samePartial(got, want) {
				t.Fatalf("prefix %q: index %+v (%v), scan %+v", p, got, err, want)
			}
		}
	}
}

// samePartial compares two partials without bins field by field.
func samePartial(a, b Partial) bool {
	return a.From == b.From && a.To == b.To && a.Count == b.Count && a.Sum == b.Sum &&
		a.Series == b.Series && (a.Count == 0 || a.Min == b.Min && a.Max == b.Max)
}

// A snapshot restored into a store with an index (into new series and into series a cached
// read has seen) shows in the next level read.
func TestLevelIndexAfterSnapshot(t *testing.T) {
	rc := StoreConfig{Metrics: map[string]RingConfig{"cost": {Slot: time.Minute, Slots: 60, NoSketch: true}}}
	a, _ := NewStore(rc)
	b, _ := NewStore(rc)
	ix := b.IndexLevels("cost", "/", 2)
	const now = int64(1_764_489_600_000)
	for i := range 20 {
		if i%2 == 1 && i%3 != 1 {
			continue // a's series are b's but for team-1's odd users
		}
		k := "org-1/team-" + strconv.Itoa(i%3) + "/user-" + strconv.Itoa(i)
		_ = a.ObserveAt(now, Event{TS: now, Metric: "cost", Key: k, Value: float64(i), Count: 1, Feed: FeedOf(1)})
		if i%2 == 0 || i == 1 { // team-1 gets new series from the snapshot; team-2 none, only restored ones
			_ = b.ObserveAt(now, Event{TS: now, Metric: "cost", Key: k, Value: 100, Count: 1, Feed: FeedOf(1)})
		}
	}
	for _, p := range []string{"org-1", "org-1/team-2"} {
		got := Partial{NoBins: true}
		if err := ix.MergeUnder(now, p, nil, time.Hour, &got); err != nil || got.Series == 0 {
			t.Fatalf("before the restore, %q: %+v %v", p, got, err)
		}
	}
	data, _ := a.AppendSnapshot(nil, now, 1)
	if _, err := b.LoadSnapshot(now, 1, data); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"org-1", "org-1/team-2"} {
		want := Partial{NoBins: true}
		if err := b.MergePartial(now, "cost", under(p, "/"), time.Hour, &want); err != nil {
			t.Fatal(err)
		}
		got := Partial{NoBins: true}
		if err := ix.MergeUnder(now, p, nil, time.Hour, &got); err != nil || !samePartial(got, want) {
			t.Fatalf("after the restore, %q: index %+v (%v), scan %+v", p, got, err, want)
		}
	}
}
