package window

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// tieredCfg is a small tiered ring: 6 slots of 10 s, then 5 of 1 m, then 4 of 5 m.
func tieredCfg() RingConfig {
	return RingConfig{Slot: 10 * time.Second, Slots: 6, Tiers: []Tier{{Slot: time.Minute, Slots: 5}, {Slot: 5 * time.Minute, Slots: 4}}}
}

type oracleEvent struct {
	ts int64
	v  float64
	n  uint64
}

// oracleAgg is the exact answer over the events in [from, to), with their bins.
func oracleAgg(evs []oracleEvent, from, to int64, ix sketch.Indexer, b *sketch.Bins) Agg {
	var a Agg
	for _, e := range evs {
		if e.ts >= from && e.ts < to {
			a.add(e.n, e.v*float64(e.n), e.v, e.v)
			if b != nil {
				b.Add(ix, e.v, e.n)
			}
		}
	}
	return a
}

func TestTierConfigValidate(t *testing.T) {
	for _, c := range []RingConfig{
		{Slot: 10 * time.Second, Slots: 6, Tiers: []Tier{{Slot: 15 * time.Second, Slots: 2}}},                         // not a multiple
		{Slot: 10 * time.Second, Slots: 6, Tiers: []Tier{{Slot: 10 * time.Second, Slots: 2}}},                         // not longer
		{Slot: 10 * time.Second, Slots: 6, Tiers: []Tier{{Slot: time.Minute, Slots: 0}}},                              // no slots
		{Slot: 10 * time.Second, Slots: 6, Tiers: []Tier{{Slot: time.Hour, Slots: 2}, {Slot: time.Minute, Slots: 2}}}, // shrinking
		{Slot: 10 * time.Second, Slots: 6, Tiers: make([]Tier, MaxTiers+1)},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v: valid", c)
		}
	}
	c := tieredCfg()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Reach(), time.Minute+4*time.Minute+3*5*time.Minute; got != want {
		t.Errorf("Reach %v, want %v", got, want)
	}
}

// TestTieredFoldMatchesOracle: events over 40 minutes (some out of order, some in bursts
// that make the ring dense, some gaps that leave it sparse), and after every step windows
// of every length the tiers reach: count, sum, min and max equal an exact oracle over the
// answer's [From, To), which covers the window and starts no more than a coarsest slot
// before it, exactly at the window's start when that is on a 5 m boundary; quantiles equal
// those of one Bins of the oracle's events (merged bins are a union, bit for bit).
func TestTieredFoldMatchesOracle(t *testing.T) {
	for _, noSketch := range []bool{false, true} {
		cfg := tieredCfg()
		cfg.NoSketch = noSketch
		r, err := NewRing(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ix, _ := cfg.Sketch.Indexer()
		rng := rand.New(rand.NewPCG(29, 3))
		var evs []oracleEvent
		now := t0
		qs := []float64{0.5, 0.99}
		for step := range 400 {
			now += int64(rng.IntN(12_000))
			if step%50 == 0 {
				now += 4 * 60_000 // a gap: the ring goes sparse, slots jump out whole
			}
			for range 1 + rng.IntN(4) {
				ts := now - int64(rng.IntN(50_000)) // inside the 60 s retention, out of order
				e := oracleEvent{ts: ts, v: float64(1 + rng.IntN(1000)), n: uint64(1 + rng.IntN(3))}
				if err := r.Add(now, ts, e.v, e.n); err != nil {
					continue // late for the ring: not kept, not in the oracle
				}
				evs = append(evs, e)
			}
			for w := 10 * time.Second; w <= cfg.Reach(); w += 10 * time.Second {
				a, err := r.Read(now, w, qs)
				if err != nil {
					t.Fatalf("step %d: read %v: %v", step, w, err)
				}
				start := a.To - w.Milliseconds()
				if a.From > start || a.From < start-5*60_000 || (start%(5*60_000) == 0 && a.From != start) {
					t.Fatalf("step %d: %v: span [%d, %d) for a window starting at %d", step, w, a.From, a.To, start)
				}
				var b sketch.Bins
				want := oracleAgg(evs, a.From, a.To, ix, &b)
				if a.Count != want.Count || a.Sum != want.Sum || (a.Count > 0 && (a.Min != want.Min || a.Max != want.Max)) {
					t.Fatalf("step %d (noSketch %v): %v at %d: got count %d sum %v min %v max %v, oracle %d %v %v %v",
						step, noSketch, w, now, a.Count, a.Sum, a.Min, a.Max, want.Count, want.Sum, want.Min, want.Max)
				}
				if noSketch || a.Count == 0 {
					for _, q := range a.Quantiles {
						if !math.IsNaN(q) {
							t.Fatalf("step %d: %v: quantile %v without a sketch or data", step, w, q)
						}
					}
					continue
				}
				wq := b.Quantiles(ix, qs, nil)
				for i := range wq {
					wq[i] = min(max(wq[i], want.Min), want.Max)
				}
				if !slices.Equal(a.Quantiles, wq) {
					t.Fatalf("step %d: %v: quantiles %v, the oracle's bins %v", step, w, a.Quantiles, wq)
				}
			}
		}
	}
}

// TestTieredReadAheadEqualsAdvanced: a read at a now past the ring's current slot answers
// what the ring moved there answers (issue #25's rule, across tiers), and moves nothing.
func TestTieredReadAheadEqualsAdvanced(t *testing.T) {
	r, _ := NewRing(tieredCfg())
	now := t0
	for i := range 300 {
		now = t0 + int64(i)*7_000
		_ = r.Add(now, now, float64(i%17), 1)
	}
	for _, ahead := range []int64{5_000, 30_000, 65_000, 4 * 60_000, 13 * 60_000, 40 * 60_000} {
		later := now + ahead
		moved := r.clone()
		moved.Empty(later)
		for w := 10 * time.Second; w <= tieredCfg().Reach(); w += 50 * time.Second {
			got, err1 := r.Read(later, w, []float64{0.5})
			want, err2 := moved.Read(later, w, []float64{0.5})
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if got.Count != want.Count || got.Sum != want.Sum || got.From != want.From || got.To != want.To ||
				got.Min != want.Min && got.Count > 0 || !slices.EqualFunc(got.Quantiles, want.Quantiles, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
				t.Fatalf("ahead %d, %v: read %+v, moved ring %+v", ahead, w, got, want)
			}
		}
	}
}

// TestTieredBoundaries is a step table with fixed instants: one event of value 1 at the start
// of every 10 s slot for 20 minutes, then reads at windows whose start falls on the fine,
// 1 m and 5 m boundaries and inside a coarse slot.
func TestTieredBoundaries(t *testing.T) {
	r, _ := NewRing(tieredCfg())
	end := t0 + 20*60_000
	for ts := t0; ts < end; ts += 10_000 {
		if err := r.Add(ts, ts, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	now := end - 1 // the last slot is [end-10s, end)
	for _, tc := range []struct {
		w         time.Duration
		count     uint64
		fromAgo   time.Duration // From = end - fromAgo
		explained string
	}{
		{time.Minute, 6, time.Minute, "the fine slots alone"},
		{2 * time.Minute, 12, 2 * time.Minute, "fine plus one whole 1 m slot"},
		{90 * time.Second, 12, 2 * time.Minute, "inside the 1 m slot [end-2m, end-1m): rounds out to it"},
		{5 * time.Minute, 30, 5 * time.Minute, "on a 5 m boundary, fine and four 1 m slots: exact"},
		{6 * time.Minute, 60, 10 * time.Minute, "the 5 m slot [end-10m, end-5m) holds minutes 10-13 and tier 1 minute 14: rounds out"},
		{10 * time.Minute, 60, 10 * time.Minute, "on a 5 m boundary: exact"},
		{8 * time.Minute, 60, 10 * time.Minute, "inside a 5 m slot: rounds out to it"},
		{15 * time.Minute, 90, 15 * time.Minute, "exact at the 5 m boundary"},
		{19 * time.Minute, 120, 20 * time.Minute, "rounds out to the first 5 m slot"},
	} {
		a, err := r.Read(now, tc.w, nil)
		if err != nil {
			t.Fatalf("%v: %v", tc.w, err)
		}
		if a.Count != tc.count || a.Sum != float64(tc.count) || a.From != end-tc.fromAgo.Milliseconds() || a.To != end {
			t.Errorf("%v (%s): count %d from end-%v, want %d from end-%v", tc.w, tc.explained, a.Count, time.Duration(end-a.From)*time.Millisecond, tc.count, tc.fromAgo)
		}
	}
	if _, err := r.Read(now, tieredCfg().Reach()+10*time.Second, nil); err == nil {
		t.Error("a window past the reach was read")
	}
}

// TestTieredSweep: a series whose fine slots emptied is kept while its tiers hold what a read
// can reach, and evicted once they do not.
func TestTieredSweep(t *testing.T) {
	r, _ := NewRing(tieredCfg())
	_ = r.Add(t0, t0, 5, 1)
	if r.Empty(t0 + 3*60_000) {
		t.Fatal("empty while a tier holds the event")
	}
	if a, _ := r.Read(t0+3*60_000, 5*time.Minute, nil); a.Count != 1 {
		t.Fatalf("count %d after the fold", a.Count)
	}
	if !r.Empty(t0 + 24*time.Hour.Milliseconds()) {
		t.Fatal("not empty a day later")
	}
}

// tieredSumCfg is tieredCfg without a sketch: a sum-only metric.
func tieredSumCfg() RingConfig {
	c := tieredCfg()
	c.NoSketch = true
	return c
}

// feedTiered feeds the tiered metrics of snapStore for 40 minutes of advancing time, keys
// k0..k5 (even keys to partition 0, odd to 1), and returns the last now.
func feedTiered(s *Store, rng *rand.Rand) int64 {
	now := t0
	for range 2000 {
		now += int64(rng.IntN(2400))
		k := rng.IntN(6)
		for _, m := range []string{"tok", "sum"} {
			_ = s.ObserveAt(now, Event{TS: now - int64(rng.IntN(30_000)), Metric: m, Key: "k" + strconv.Itoa(k),
				Value: float64(rng.IntN(500)), Count: uint64(rng.IntN(3)), Feed: FeedOf(int32(k % 2))})
		}
	}
	return now
}

// tieredSnapshot is a snapshot of partition p of a snapStore fed by feedTiered.
func tieredSnapshot(t testing.TB, p int32) []byte {
	s := snapStore(t)
	now := feedTiered(s, rand.New(rand.NewPCG(8, 9)))
	data, _ := s.AppendSnapshot(nil, now, p)
	return data
}

// TestTieredSnapshotRoundTrip: a snapshot carries the tiers (with and without a sketch), so
// reads of every window up to the reach, at now and later, equal the original's; a store
// whose tiers differ refuses it (ErrSnapshotShape).
func TestTieredSnapshotRoundTrip(t *testing.T) {
	a := snapStore(t)
	now := feedTiered(a, rand.New(rand.NewPCG(8, 9)))
	data, n := a.AppendSnapshot(nil, now, 1)
	if n != 6 { // 3 keys × 2 metrics
		t.Fatalf("%d series in the snapshot", n)
	}
	b := snapStore(t)
	if got, err := b.LoadSnapshot(now, 1, data); err != nil || got != n {
		t.Fatalf("LoadSnapshot: %d, %v", got, err)
	}
	tiersHeld := 0
	a.each(func(se *series) {
		if se.ring.tiers != nil && se.partition == 1 {
			tiersHeld++
		}
	})
	if tiersHeld != n {
		t.Fatalf("%d of %d series hold tiers: the test proves little", tiersHeld, n)
	}
	for _, at := range []int64{now, now + 90_000, now + 11*60_000} {
		for _, m := range []string{"tok", "sum"} {
			for _, k := range []string{"k1", "k3", "k5"} {
				for w := 10 * time.Second; w <= tieredCfg().Reach(); w += 10 * time.Second {
					wa, errA := a.ReadAt(at, m, k, w, []float64{0.5, 0.9})
					wb, errB := b.ReadAt(at, m, k, w, []float64{0.5, 0.9})
					if errA != nil || errB != nil || fmt.Sprint(wa) != fmt.Sprint(wb) {
						t.Fatalf("%s/%s over %v at +%d: original %+v (%v), restored %+v (%v)", m, k, w, at-now, wa, errA, wb, errB)
					}
				}
			}
		}
	}
	// Taken 5 minutes on, the rings' own slots are empty and the tiers alone carry the
	// series: they load and read alike.
	later := now + 5*60_000
	data2, n2 := a.AppendSnapshot(nil, later, 1)
	c := snapStore(t)
	if got, err := c.LoadSnapshot(later, 1, data2); err != nil || got != n2 || n2 == 0 {
		t.Fatalf("tiers alone: %d of %d, %v", got, n2, err)
	}
	for _, k := range []string{"k1", "k3", "k5"} {
		for w := 70 * time.Second; w <= tieredCfg().Reach(); w += 70 * time.Second {
			wa, _ := a.ReadAt(later, "sum", k, w, nil)
			wc, _ := c.ReadAt(later, "sum", k, w, nil)
			if fmt.Sprint(wa) != fmt.Sprint(wc) {
				t.Fatalf("tiers alone, %s over %v: %+v, restored %+v", k, w, wa, wc)
			}
		}
	}
	// Loaded 100 days later nothing of it is within reach: no series is added.
	if got, err := snapStore(t).LoadSnapshot(now+100*24*3600_000, 1, data); err != nil || got != 0 {
		t.Fatalf("100 days later: %d series, %v", got, err)
	}
	other, _ := NewStore(StoreConfig{Metrics: map[string]RingConfig{"tok": {Slot: 10 * time.Second, Slots: 6, Tiers: []Tier{{Slot: time.Minute, Slots: 9}}}}})
	if _, err := other.LoadSnapshot(now, 1, data); !errors.Is(err, ErrSnapshotShape) {
		t.Fatalf("other tiers: %v, want ErrSnapshotShape", err)
	}
}

// TestSnapshotVersion1Loads: snapshots written before tiers (testdata/snapshot-v1.bin) and
// before exemplars (testdata/snapshot-v2.bin), each of 50 events of values 1..50, 30 s apart
// from t0, of cost and latency_ms for tenant-1, taken at t0 + 25 m, load into a store whose
// cost ring has tiers, which start empty, and that keeps exemplars (none restored); a
// version past SnapshotVersion is refused as ErrSnapshotVersion.
func TestSnapshotVersion1Loads(t *testing.T) {
	for v, file := range []string{1: "testdata/snapshot-v1.bin", 2: "testdata/snapshot-v2.bin"} {
		if file == "" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if data[4] != byte(v) {
			t.Fatalf("%s: version %d", file, data[4])
		}
		s, _ := NewStore(StoreConfig{Exemplars: true, Metrics: map[string]RingConfig{"cost": {Slot: time.Minute, Slots: 60, Tiers: []Tier{{Slot: time.Hour, Slots: 48}, {Slot: 24 * time.Hour, Slots: 36}}}}})
		now := t0 + 25*60_000
		if n, err := s.LoadSnapshot(now, 0, data); err != nil || n != 2 {
			t.Fatalf("%s: LoadSnapshot: %d, %v", file, n, err)
		}
		a, err := s.ReadAt(now, "cost", "tenant-1", time.Hour, nil)
		if err != nil || a.Count != 50 || a.Sum != 50*51/2 || a.Min != 1 || a.Max != 50 {
			t.Fatalf("%s: cost over 1h: %+v, %v", file, a, err)
		}
		if a, err := s.ReadAt(now+2*3600_000, "cost", "tenant-1", 24*time.Hour, nil); err != nil || a.Count != 50 {
			t.Fatalf("%s: cost over 24h two hours later, from the tiers: %+v, %v", file, a, err)
		}
		s.VisitExemplars(now, "cost", nil, nil, nil, func(string, []Exemplar) bool { t.Fatalf("%s: exemplars restored", file); return false })
		next := append([]byte(nil), data...)
		next[4] = SnapshotVersion + 1
		if _, err := s.LoadSnapshot(now, 0, next); !errors.Is(err, ErrSnapshotVersion) {
			t.Fatalf("version %d: %v", next[4], err)
		}
	}
}

// TestTieredPartialsMerge: partials of tiered windows from two stores that split the keys
// merge into what one store holding every key reads (ReadMerged), span included: the
// earliest start any series' read rounded out to.
func TestTieredPartialsMerge(t *testing.T) {
	all, left, right := snapStore(t), snapStore(t), snapStore(t)
	rng := rand.New(rand.NewPCG(4, 4))
	now := t0
	for range 1500 {
		now += int64(rng.IntN(2400))
		k := rng.IntN(6)
		ev := Event{TS: now - int64(rng.IntN(30_000)), Metric: "tok", Key: "k" + strconv.Itoa(k), Value: float64(rng.IntN(500))}
		_ = all.ObserveAt(now, ev)
		if k%2 == 0 {
			_ = left.ObserveAt(now, ev)
		} else {
			_ = right.ObserveAt(now, ev)
		}
	}
	for w := 2 * time.Minute; w <= tieredCfg().Reach(); w += 70 * time.Second {
		var p, q Partial
		everything := func(string, int32) bool { return true }
		if err := left.MergePartial(now, "tok", everything, w, &p); err != nil {
			t.Fatal(err)
		}
		if err := right.MergePartial(now, "tok", everything, w, &q); err != nil {
			t.Fatal(err)
		}
		p.Merge(&q)
		got := p.Agg(left.Indexer("tok"), []float64{0.5})
		want, err := all.ReadMerged(now, "tok", func(string) bool { return true }, w, []float64{0.5})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%v: merged partials %+v, one store %+v", w, got, want)
		}
	}
}

// TestServing: the config a refusal suggests reads the window, keeps the ring's slot when it
// can, and is written as --rings takes it.
func TestServing(t *testing.T) {
	cost := RingConfig{Slot: time.Minute, Slots: 60}
	day := 24 * time.Hour
	for _, c := range []struct {
		c    RingConfig
		w    time.Duration
		spec string
	}{
		{cost, time.Hour, "1m:60"},
		{cost, 2 * time.Hour, "1m:120"},
		{cost, 90 * time.Second, "30s:120"},
		{cost, day, "1m:60+1h:48"},
		{cost, 30 * day, "1m:60+1h:48+1d:29"},
		{cost, 31*day + time.Hour + time.Minute, "1m:60+1h:48+1d:31"},
		{RingConfig{}, 7 * day, "10s:30+1h:48+1d:7"},
		{RingConfig{Slot: 7 * time.Second, Slots: 10}, 7 * day, "7s:86400"},
		{RingConfig{Slot: time.Minute, Slots: 60, NoSketch: true}, 30 * day, "1m:60:none+1h:48+1d:29"},
	} {
		got := c.c.Serving(c.w)
		if err := got.Validate(); err != nil {
			t.Errorf("%s for %v: %v", got.Spec(), c.w, err)
		}
		if err := got.CheckWindow(c.w, "", "m"); err != nil {
			t.Errorf("%s for %v: %v", got.Spec(), c.w, err)
		}
		if got.Spec() != c.spec {
			t.Errorf("%s for %v: %s, want %s", c.c.Spec(), c.w, got.Spec(), c.spec)
		}
	}
}

// TestTieredHotPathAllocatesNothing: events into an existing series of a tiered ring, with a
// sketch and without, allocate nothing in the current slot (the tiers move only when a slot
// ages out), and a sum-only ring's events take the fast path (addCurrent).
func TestTieredHotPathAllocatesNothing(t *testing.T) {
	s := newTestStore(t, StoreConfig{Metrics: map[string]RingConfig{"tok": tieredCfg(), "sum": tieredSumCfg()}})
	for _, m := range []string{"tok", "sum"} {
		ev := Event{TS: t0, Metric: m, Key: "tenant-42"}
		for i := range 1000 { // dense, bins covering the values
			ev.Value = float64(1 + i%97)
			_ = s.ObserveAt(t0, ev)
		}
		if n := testing.AllocsPerRun(1000, func() { ev.Value = 42; _ = s.ObserveAt(t0+5, ev) }); n != 0 {
			t.Errorf("%s: %v allocations per event", m, n)
		}
	}
	r, _ := NewRing(tieredSumCfg())
	for range RawEvents + 1 {
		_ = r.Add(t0, t0, 3, 1)
	}
	if !r.addCurrent(t0, t0, 5, 2) {
		t.Fatal("a sum-only ring's event of the current slot took the full path")
	}
	if a, _ := r.Read(t0, 10*time.Second, nil); a.Count != RawEvents+3 || a.Sum != 3*(RawEvents+1)+10 || a.Max != 5 {
		t.Fatalf("after the fast path: %+v", a)
	}
}

// TestTieredVisitWindow: an exporter's visit of a window past the ring's own slots sees what
// a read of it answers: span, count, sum, and bins whose quantiles are the read's.
func TestTieredVisitWindow(t *testing.T) {
	s := snapStore(t)
	now := feedTiered(s, rand.New(rand.NewPCG(8, 9)))
	ix, _ := tieredCfg().Sketch.Indexer()
	for w := 2 * time.Minute; w <= tieredCfg().Reach(); w += 3 * time.Minute {
		want, err := s.ReadAt(now, "tok", "k2", w, []float64{0.5})
		if err != nil {
			t.Fatal(err)
		}
		var scratch sketch.Bins
		err = s.VisitWindowAt(now, "tok", "k2", w, &scratch, func(a Agg, b *sketch.Bins) {
			q := b.Quantiles(ix, []float64{0.5}, nil)
			if a.From != want.From || a.To != want.To || a.Count != want.Count || a.Sum != want.Sum || min(max(q[0], a.Min), a.Max) != want.Quantiles[0] {
				t.Errorf("%v: visit %+v (p50 %v), read %+v", w, a, q, want)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotWithoutExemplarsIsVersion2: a store that keeps no exemplars writes version 2,
// the format a slide from before exemplars reads (a rollback restores instead of replaying),
// and it loads whole through the version 2 path, into a store with exemplars or without;
// one that keeps them writes SnapshotVersion, one byte more a series (its exemplar count).
func TestSnapshotWithoutExemplarsIsVersion2(t *testing.T) {
	now := t0 + 25*60_000
	snap := func(exemplars bool) []byte {
		s, err := NewStore(StoreConfig{Exemplars: exemplars, Metrics: map[string]RingConfig{"cost": {Slot: time.Minute, Slots: 60, Tiers: []Tier{{Slot: time.Hour, Slots: 48}}}}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			ts := t0 + int64(i)*30_000
			for _, m := range []string{"cost", "latency_ms"} {
				_ = s.ObserveAt(ts, Event{TS: ts, Metric: m, Key: "tenant-1", Value: float64(i + 1), Feed: FeedOf(0)})
			}
		}
		b, n := s.AppendSnapshot(nil, now, 0)
		if n != 2 {
			t.Fatalf("exemplars %v: %d series in the snapshot, want 2", exemplars, n)
		}
		return b
	}
	v2, v3 := snap(false), snap(true)
	if v2[4] != 2 || v3[4] != SnapshotVersion || len(v3) != len(v2)+2 {
		t.Fatalf("versions %d and %d, %d and %d bytes: want 2 and %d, the second 2 bytes longer", v2[4], v3[4], len(v2), len(v3), SnapshotVersion)
	}
	for _, exemplars := range []bool{false, true} {
		s, _ := NewStore(StoreConfig{Exemplars: exemplars, Metrics: map[string]RingConfig{"cost": {Slot: time.Minute, Slots: 60, Tiers: []Tier{{Slot: time.Hour, Slots: 48}}}}})
		if n, err := s.LoadSnapshot(now, 0, v2); err != nil || n != 2 {
			t.Fatalf("exemplars %v: LoadSnapshot of version 2: %d, %v", exemplars, n, err)
		}
		if a, err := s.ReadAt(now, "cost", "tenant-1", time.Hour, nil); err != nil || a.Count != 50 || a.Sum != 50*51/2 {
			t.Fatalf("exemplars %v: cost over 1h: %+v, %v", exemplars, a, err)
		}
	}
}
