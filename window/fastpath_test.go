package window

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// addFull is Ring.Add without its fast path (addCurrent): the checks, advance and place.
func (r *Ring) addFull(now, ts int64, v float64, n uint64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ErrInvalidValue
	}
	if n == 0 {
		n = 1
	}
	if !r.started || now < r.curLo || now >= r.curLo+r.width {
		r.advance(now)
	}
	return r.place(now, ts, v, n, ErrLate)
}

// addFromFull is Ring.addFrom without its fast paths: advance, judge, the value, place.
func (r *Ring) addFromFull(now int64, src Source, ts int64, v float64, n uint64) error {
	if !r.started || now < r.curLo || now >= r.curLo+r.width {
		r.advance(now)
	}
	if err := r.judge(now, src, ts); err != nil {
		return err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ErrInvalidValue
	}
	if n == 0 {
		n = 1
	}
	return r.place(now, ts, v, n, ErrExpired)
}

// TestAddCurrentMatchesFullPath feeds one random stream (in order, late, ahead of now,
// expired, NaN and ±Inf, n = 0, negatives, zeros, large, tiny and subnormal values, a read now and then)
// to a store and, event by event, to a ring through the full path only: every error, every
// read and the final slot and aggregate bytes must agree, for every sketch kind, through
// ObserveAt and through ObserveFrom with record timestamps agreeing with now, ahead and behind.
func TestAddCurrentMatchesFullPath(t *testing.T) {
	for _, c := range []struct {
		k     sketch.Kind
		slots int
		from  bool // ObserveFrom against addFrom's full path
	}{{sketch.Kind{}, 10, false}, {sketch.Kind{Name: sketch.NameHDR}, 10, false}, {sketch.Kind{Name: sketch.NameNative}, 10, false},
		{sketch.Kind{RelativeAccuracy: 0.001}, 10, false}, {sketch.Kind{}, 10, true}, {sketch.Kind{Name: sketch.NameHDR}, 10, true},
		{sketch.Kind{}, 1, true}} { // one slot: a record stamped in the next slot makes its events late
		k, from := c.k, c.from
		rc := RingConfig{Slot: time.Second, Slots: c.slots, Sketch: k}
		s := newTestStore(t, StoreConfig{Ring: rc})
		ref, err := NewRing(rc)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(19, 2))
		now := t0
		qs := []float64{0, 0.5, 0.95, 1}
		fast := 0
		for i := range 12_000 {
			now += int64(rng.IntN(3))
			ts := now - int64(rng.IntN(200))
			if rng.IntN(50) == 0 {
				ts = now - int64(rng.IntN(20_000)) // late or expired
			}
			if rng.IntN(80) == 0 {
				ts = now + int64(rng.IntN(2500)) // ahead, within or beyond the skew
			}
			v := math.Exp(3.5 + 0.8*rng.NormFloat64())
			switch rng.IntN(40) {
			case 0:
				v = -v
			case 1:
				v = 0
			case 2:
				v = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e-9, 5e-324, 1e9}[rng.IntN(6)] // wide ranges are slow to pack; the sketch tests cover the extremes
			}
			n := uint64(rng.IntN(3)) // 0 counts as 1
			if rng.IntN(100) == 0 {
				n = uint64(rng.IntN(100_000))
			}
			ev := Event{TS: ts, Metric: "m", Key: "k", Value: v, Count: n}
			var se *series
			if h := s.hash("m", "k"); true {
				se = s.shards[h&s.mask].lookup(h, "m", "k")
			}
			if se != nil && v-v == 0 && ts >= se.ring.curLo && ts < se.ring.curLo+se.ring.width && now < se.ring.curLo+se.ring.width {
				fast++
			}
			var got, want error
			if from {
				// Record timestamps around now: agreeing, ahead and behind by more than the skew.
				src := Source{RecordTS: now + int64(rng.IntN(5000)) - 2500}
				switch rng.IntN(4) {
				case 0:
					src.RecordTS = ts + int64(rng.IntN(400)) - 200
				case 1: // an event ahead of now, more than the skew ahead of its record: future at the source
					ts = now + int64(rng.IntN(1000))
					ev.TS = ts
					src.RecordTS = ts - 1001 - int64(rng.IntN(300))
				}
				got = s.ObserveFrom(now, src, &ev)
				if se == nil && got != nil {
					continue
				}
				want = ref.addFromFull(now, src, ts, v, n)
				switch want { // ObserveFrom's names for the source's refusals
				case errSourceFuture:
					want = ErrFuture
				case errSourceLate:
					want = ErrLate
				}
			} else {
				got = s.ObserveAt(now, ev)
				if se == nil && got != nil {
					continue // a refused first event creates no series; the reference ring has none either
				}
				want = ref.addFull(now, ts, v, n)
			}
			if got != want {
				t.Fatalf("%v: event %d %+v at %d: store says %v, full path %v", k, i, ev, now, got, want)
			}
			if i%499 == 0 {
				for _, w := range []time.Duration{time.Second, 3 * time.Second, 10 * time.Second} {
					if w > rc.Retention() {
						continue
					}
					a, errA := s.ReadAt(now, "m", "k", w, qs)
					b, errB := ref.Read(now, w, qs)
					if errA != errB || !sameAgg(a, b) {
						t.Fatalf("%v: read %v after event %d: %+v (%v), full path %+v (%v)", k, w, i, a, errA, b, errB)
					}
				}
			}
		}
		if fast < 6_000 {
			t.Fatalf("%v: only %d events could take the fast path; the test does not exercise it", k, fast)
		}
		// Same slots, bins and aggregate: the snapshot of the series and of the reference.
		h := s.hash("m", "k")
		se := s.shards[h&s.mask].lookup(h, "m", "k")
		a, b := se.ring.clone(), ref.clone()
		a.foldCurrent()
		b.foldCurrent()
		for i := range a.slots {
			sa, sb := a.slots[i], b.slots[i]
			if sa.idx != sb.idx || sa.count != sb.count || math.Float64bits(sa.sum) != math.Float64bits(sb.sum) || sa.min != sb.min || sa.max != sb.max {
				t.Fatalf("%v: slot %d differs: %+v vs %+v", k, i, sa, sb)
			}
			ea, eb := binsBytes(t, sa.bins), binsBytes(t, sb.bins)
			if !bytes.Equal(ea, eb) {
				t.Fatalf("%v: slot %d bins differ", k, i)
			}
		}
		ea, _ := a.agg.MarshalBinary()
		eb, _ := b.agg.MarshalBinary()
		if !bytes.Equal(ea, eb) {
			t.Fatalf("%v: aggregates differ", k)
		}
	}
}

func binsBytes(t *testing.T, s sketch.Slot) []byte {
	t.Helper()
	var scratch sketch.Bins
	b, err := s.View(&scratch).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameAgg(a, b Agg) bool {
	if a.From != b.From || a.To != b.To || a.Count != b.Count || math.Float64bits(a.Sum) != math.Float64bits(b.Sum) ||
		a.Min != b.Min || a.Max != b.Max || len(a.Quantiles) != len(b.Quantiles) {
		return false
	}
	for i := range a.Quantiles {
		if math.Float64bits(a.Quantiles[i]) != math.Float64bits(b.Quantiles[i]) {
			return false
		}
	}
	return true
}

// TestObserveHotPathAllocatesNothing holds issue #19's hot path at exactly zero allocations:
// once a series is dense, its bins cover the values at their width and the values' octaves
// are indexed, 100,000 events through
// ObserveAt and ObserveFrom allocate nothing at all (not a rounded average).
func TestObserveHotPathAllocatesNothing(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	rng := rand.New(rand.NewPCG(1, 19))
	vals := make([]float64, 4096)
	for i := range vals {
		vals[i] = math.Exp(3.5 + 0.8*rng.NormFloat64())
	}
	ev := Event{TS: t0, Metric: "latency_ms", Key: "tenant-42", Feed: FeedOf(1)}
	for i := range 100_000 { // warm: dense ring, bins covering the range and two bytes wide, octaves built
		ev.Value = vals[i&4095]
		_ = s.ObserveAt(t0, ev)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 100_000 {
		ev.Value = vals[i&4095]
		if i&1 == 0 {
			if err := s.ObserveAt(t0+int64(i%9000), ev); err != nil {
				t.Fatal(err)
			}
		} else if err := s.ObserveFrom(t0+int64(i%9000), Source{RecordTS: t0 + int64(i%9000)}, &ev); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n != 0 {
		t.Fatalf("100,000 events into an existing series allocated %d times", n)
	}
}
