package window

import (
	"math"
	"math/rand/v2"
	"testing"
)

// oldJudge is ingest's per-event check before issue #19 moved it into the ring: the oracle
// ObserveFrom must agree with, event for event.
func oldJudge(s *Store, now, recTS int64, ev Event) error {
	rc := s.RingConfig(ev.Metric)
	width, slots, skew := rc.Slot.Milliseconds(), int64(rc.Slots), rc.Skew.Milliseconds()
	futureRef, lateRef := recTS, recTS
	switch {
	case recTS > now+skew:
		futureRef, lateRef = now, now
	case recTS < now-skew:
		futureRef = now
	}
	switch {
	case ev.TS > futureRef+skew:
		return ErrFuture
	case floorDiv(ev.TS, width) <= floorDiv(lateRef, width)-slots:
		return ErrLate
	}
	err := s.ObserveAt(now, ev)
	if err == ErrLate {
		return ErrExpired
	}
	return err
}

func TestObserveFromAgreesWithTheJudgeItReplaces(t *testing.T) {
	want, _ := NewStore(StoreConfig{})
	got, _ := NewStore(StoreConfig{})
	rng := rand.New(rand.NewPCG(19, 1))
	now := t0
	keys := []string{"a", "b", "c", "d"}
	seen := map[error]int{}
	for i := range 20_000 {
		now += int64(rng.IntN(3_000))
		recTS := now + int64(rng.IntN(800_000)) - 500_000
		ev := Event{Metric: "latency_ms", Key: keys[rng.IntN(len(keys))], Value: rng.Float64() * 100,
			TS: recTS + int64(rng.IntN(700_000)) - 400_000, Feed: FeedOf(int32(i % 3))}
		if rng.IntN(50) == 0 {
			ev.Value = math.NaN()
		}
		if rng.IntN(30) == 0 {
			ev.Key = "new-" + keys[rng.IntN(len(keys))] + string(rune('a'+i%26))
		}
		e1 := oldJudge(want, now, recTS, ev)
		e2 := got.ObserveFrom(now, Source{RecordTS: recTS}, &ev)
		if e1 != e2 {
			t.Fatalf("event %d (now %d, record %d, ts %d): ObserveFrom %v, the old judge %v", i, now, recTS, ev.TS, e2, e1)
		}
		seen[e1]++
	}
	for _, e := range []error{nil, ErrFuture, ErrLate, ErrExpired, ErrInvalidValue} {
		if seen[e] == 0 {
			t.Errorf("no event gave %v: the test does not cover it (%v)", e, seen)
		}
	}
	if want.Len() != got.Len() || want.Stats() != got.Stats() {
		t.Fatalf("stores differ: %+v vs %+v", got.Stats(), want.Stats())
	}
	for _, k := range want.Keys("latency_ms", "") {
		a, _ := want.ReadAt(now, "latency_ms", k, 5*60_000_000_000, []float64{0.5, 0.99})
		b, _ := got.ReadAt(now, "latency_ms", k, 5*60_000_000_000, []float64{0.5, 0.99})
		if a.Count != b.Count || a.Sum != b.Sum || (a.Count > 0 && a.Quantiles[1] != b.Quantiles[1]) {
			t.Fatalf("series %s: %+v vs %+v", k, b, a)
		}
	}
}

func TestObserveFromAllocatesNothingForExistingSeries(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	ev := Event{TS: t0, Metric: "latency_ms", Key: "tenant-42", Value: 12.5}
	for i := range RawEvents + 1 {
		_ = s.ObserveFrom(t0, Source{RecordTS: t0}, &Event{TS: t0 + int64(i), Metric: ev.Metric, Key: ev.Key, Value: 1})
	}
	vals := []float64{3, 12.5, 80, 250, 1200}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		ev.Value = vals[i%len(vals)]
		i++
		_ = s.ObserveFrom(t0+int64(i%9000), Source{RecordTS: t0 + int64(i%9000)}, &ev)
	})
	if allocs != 0 {
		t.Fatalf("ObserveFrom on an existing series allocates %v per event", allocs)
	}
}

// TestNewSeriesJudgedBeforeTheCap: a new series' event is judged against its source before the
// series exists, once: at the series cap an event its source refuses is that refusal (not
// counted, nothing created), and one it admits is ErrSeriesCap.
func TestNewSeriesJudgedBeforeTheCap(t *testing.T) {
	s := newTestStore(t, StoreConfig{MaxSeries: 1})
	if err := s.ObserveFrom(t0, Source{RecordTS: t0}, &Event{TS: t0, Metric: "m", Key: "a", Value: 1}); err != nil {
		t.Fatal(err)
	}
	late := &Event{TS: t0 - 10*60_000, Metric: "m", Key: "b", Value: 1}
	if err := s.ObserveFrom(t0, Source{RecordTS: t0}, late); err != ErrLate {
		t.Errorf("late at source, at the cap: %v, want ErrLate", err)
	}
	future := &Event{TS: t0 + 60_000, Metric: "m", Key: "b", Value: 1}
	if err := s.ObserveFrom(t0, Source{RecordTS: t0}, future); err != ErrFuture {
		t.Errorf("future at source, at the cap: %v, want ErrFuture", err)
	}
	if st := s.Stats(); st.Late != 0 || st.Future != 0 || st.Refused != 0 || s.Len() != 1 {
		t.Errorf("source refusals counted or created: %+v, %d series", st, s.Len())
	}
	if err := s.ObserveFrom(t0, Source{RecordTS: t0}, &Event{TS: t0, Metric: "m", Key: "b", Value: 1}); err != ErrSeriesCap {
		t.Errorf("admitted at the cap: %v, want ErrSeriesCap", err)
	}
}
