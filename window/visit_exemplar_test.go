package window

import (
	"fmt"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// windowExemplars reads one series' window at now with VisitWindowExemplarsAt: its
// aggregate and a copy of its exemplars. The slice handed in holds a stale exemplar the
// call must not keep.
func windowExemplars(t *testing.T, s *Store, now int64, key string, w time.Duration) (Agg, []Exemplar) {
	t.Helper()
	var (
		scratch sketch.Bins
		agg     Agg
		got     []Exemplar
		calls   int
	)
	ex := []Exemplar{{TS: -1, TraceID: trace(99)}}
	err := s.VisitWindowExemplarsAt(now, "duration_ms", key, w, &scratch, &ex, func(a Agg, _ *sketch.Bins) {
		agg, got = a, append([]Exemplar{}, ex...)
		calls++
	})
	if err != nil || calls != 1 {
		t.Fatalf("%s %v at %d: %v, %d calls", key, w, now, err, calls)
	}
	return agg, got
}

// TestWindowExemplarsAreTheWindowsSlots: VisitWindowExemplarsAt hands out, oldest first, the
// exemplars of exactly the slots the window's aggregate reads: a shorter window leaves the
// older ones out, a read past the current slot (as if advanced) leaves out the slot that
// left, a tiered window leaves out what the tiers hold (they keep no exemplar) though the
// ring still holds it; its aggregate is VisitWindowAt's. A store without exemplars hands
// out none.
func TestWindowExemplarsAreTheWindowsSlots(t *testing.T) {
	const t0 = int64(1_699_999_200_000) // an hour's boundary
	x := func(sec int64, v float64, id byte) Exemplar {
		return Exemplar{TS: t0 + sec*1000, Value: v, TraceID: trace(id), SpanID: [8]byte{id}}
	}
	feed := func(s *Store, now int64, xs ...Exemplar) {
		t.Helper()
		for _, e := range xs {
			ev := Event{TS: e.TS, Metric: "duration_ms", Key: "checkout", Value: e.Value, TraceID: e.TraceID, SpanID: e.SpanID}
			if err := s.ObserveAt(now, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := NewStore(StoreConfig{Exemplars: true})
	if err != nil {
		t.Fatal(err)
	}
	a0, a6, a20, a28 := x(1, 10, 1), x(61, 20, 2), x(200, 30, 3), x(285, 40, 4)
	feed(s, t0+290_000, a0, a6, a20, a28)
	for _, c := range []struct {
		now  int64
		w    time.Duration
		want []Exemplar
	}{
		{t0 + 290_000, 5 * time.Minute, []Exemplar{a0, a6, a20, a28}}, // the kept aggregate
		{t0 + 290_000, 2 * time.Minute, []Exemplar{a20, a28}},         // slots 18 to 29
		{t0 + 290_000, time.Minute, []Exemplar{a28}},
		{t0 + 290_000, 10 * time.Second, nil},
		{t0 + 330_000, 5 * time.Minute, []Exemplar{a6, a20, a28}}, // slot 0 left at slot 33
	} {
		a, got := windowExemplars(t, s, c.now, "checkout", c.w)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%v at +%ds: exemplars\n got %v\nwant %v", c.w, (c.now-t0)/1000, got, c.want)
		}
		var scratch sketch.Bins
		var want Agg
		if err := s.VisitWindowAt(c.now, "duration_ms", "checkout", c.w, &scratch, func(a Agg, _ *sketch.Bins) { want = a }); err != nil || fmt.Sprint(a) != fmt.Sprint(want) {
			t.Errorf("%v at +%ds: aggregate %+v, VisitWindowAt's %+v (%v)", c.w, (c.now-t0)/1000, a, want, err)
		}
	}

	// Minute slots, 5 of them and one ahead (the skew), and an hour tier: at minute 10 the
	// ring reads minutes 6 to 10, the tier minutes 0 to 5. The ring still holds minute 5's
	// exemplar (no event at minute 11 took its place), but the window reads that slot from
	// the tier, which keeps none.
	rc := RingConfig{Slot: time.Minute, Slots: 5, Tiers: []Tier{{Slot: time.Hour, Slots: 4}}}
	s, err = NewStore(StoreConfig{Exemplars: true, Metrics: map[string]RingConfig{"duration_ms": rc}})
	if err != nil {
		t.Fatal(err)
	}
	m5, m7, m10 := x(5*60+10, 1, 5), x(7*60+5, 2, 6), x(10*60+5, 3, 7)
	for _, e := range []Exemplar{m5, m7, m10} {
		feed(s, e.TS, e)
	}
	a, got := windowExemplars(t, s, t0+10*60_000+10_000, "checkout", time.Hour)
	if a.Count != 3 || fmt.Sprint(got) != fmt.Sprint([]Exemplar{m7, m10}) {
		t.Errorf("tiered 1h: count %d (want 3), exemplars %v, want %v", a.Count, got, []Exemplar{m7, m10})
	}
	if a, got := windowExemplars(t, s, t0+10*60_000+10_000, "checkout", 2*time.Minute); a.Count != 1 || fmt.Sprint(got) != fmt.Sprint([]Exemplar{m10}) {
		t.Errorf("2m: count %d, exemplars %v", a.Count, got)
	}

	s, err = NewStore(StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	feed(s, t0+290_000, a0, a28)
	if a, got := windowExemplars(t, s, t0+290_000, "checkout", 5*time.Minute); a.Count != 2 || len(got) != 0 {
		t.Errorf("without exemplars: count %d, exemplars %v", a.Count, got)
	}
	if err := s.VisitWindowExemplarsAt(t0, "duration_ms", "nope", time.Minute, new(sketch.Bins), new([]Exemplar), func(Agg, *sketch.Bins) {}); err != ErrNotFound {
		t.Errorf("unknown series: %v", err)
	}
}
