package window

import (
	"fmt"
	"testing"
	"time"
)

// trace is a trace id whose first byte is b (0: none).
func trace(b byte) [16]byte { return [16]byte{b, 0xee} }

// exemplarsOf visits the exemplars of metric's series at now, by series string.
func exemplarsOf(s *Store, now int64, metric string) map[string][]Exemplar {
	out := map[string][]Exemplar{}
	s.VisitExemplars(now, metric, nil, nil, nil, func(series string, ex []Exemplar) bool {
		out[series] = append([]Exemplar(nil), ex...)
		return true
	})
	return out
}

// The four doors into the store keep, per slot, the accepted event of the largest value that
// has a trace id: not the last one, not one without a trace, not a refused one.
func TestExemplarsKeepEachSlotsSlowestSpan(t *testing.T) {
	const t0 = int64(1_700_000_000_000) // a slot boundary of 10 s slots
	evs := []Event{
		{TS: t0 + 1_000, Value: 30, TraceID: trace(1), SpanID: [8]byte{1}},
		{TS: t0 + 2_000, Value: 90, TraceID: trace(2), SpanID: [8]byte{2}}, // slot t0's slowest
		{TS: t0 + 3_000, Value: 500},                                       // slower, no trace: no exemplar
		{TS: t0 + 4_000, Value: 90, TraceID: trace(3)},                     // as slow, later: the first stays
		{TS: t0 + 12_000, Value: 5, TraceID: trace(4), SpanID: [8]byte{4}}, // slot t0+10s's only one
		{TS: t0 + 25_000, Value: 7, TraceID: trace(5)},                     // the slot current at now
		{TS: t0 + 45_000, Value: 999, TraceID: trace(6)},                   // future: refused, not kept
	}
	want := []Exemplar{
		{TS: t0 + 2_000, Value: 90, TraceID: trace(2), SpanID: [8]byte{2}},
		{TS: t0 + 12_000, Value: 5, TraceID: trace(4), SpanID: [8]byte{4}},
		{TS: t0 + 25_000, Value: 7, TraceID: trace(5)},
	}
	now := t0 + 26_000
	doors := map[string]func(s *Store, evs []Event){
		"ObserveAt": func(s *Store, evs []Event) {
			for _, ev := range evs {
				_ = s.ObserveAt(now, ev)
			}
		},
		"ObserveFrom": func(s *Store, evs []Event) {
			for i := range evs {
				_ = s.ObserveFrom(now, Source{RecordTS: now}, &evs[i])
			}
		},
		"ObserveFromAll": func(s *Store, evs []Event) {
			ps, errs := pointers(evs), make([]error, len(evs))
			s.ObserveFromAll(now, Source{RecordTS: now}, ps, errs)
		},
		"ObserveAtAll": func(s *Store, evs []Event) {
			ps, errs := pointers(evs), make([]error, len(evs))
			s.ObserveAtAll(now, ps, errs)
		},
	}
	for name, door := range doors {
		t.Run(name, func(t *testing.T) {
			s, err := NewStore(StoreConfig{Exemplars: true})
			if err != nil {
				t.Fatal(err)
			}
			batch := make([]Event, len(evs))
			for i, ev := range evs {
				ev.Metric, ev.Key = "duration_ms", "checkout"
				batch[i] = ev
			}
			door(s, batch)
			got := exemplarsOf(s, now, "duration_ms")["checkout"]
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("exemplars\n got %v\nwant %v", got, want)
			}
			if a, err := s.ReadKey(now, "duration_ms", "checkout", 30*time.Second, nil, nil); err != nil || a.Max != 500 {
				t.Fatalf("the window's max %v (%v), want 500: the span without a trace still counts", a.Max, err)
			}
		})
	}

	t.Run("off", func(t *testing.T) {
		s, _ := NewStore(StoreConfig{})
		for _, ev := range evs {
			ev.Metric, ev.Key = "duration_ms", "checkout"
			_ = s.ObserveAt(now, ev)
		}
		if got := exemplarsOf(s, now, "duration_ms"); len(got) != 0 {
			t.Fatalf("a store without Exemplars kept %v", got)
		}
	})
}

func pointers(evs []Event) []*Event {
	ps := make([]*Event, len(evs))
	for i := range evs {
		ps[i] = &evs[i]
	}
	return ps
}

// A slot's exemplar leaves with the slot, and a series' exemplars with the series; a later
// lap of the ring over the same position keeps the new slot's.
func TestExemplarsGoWithTheirSeries(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	s, err := NewStore(StoreConfig{Exemplars: true, Ring: RingConfig{Slots: 6}}) // a minute
	if err != nil {
		t.Fatal(err)
	}
	ev := func(ts int64, v float64, tr byte, p int32) Event {
		return Event{TS: ts, Metric: "duration_ms", Key: "api", Value: v, TraceID: trace(tr), Feed: FeedOf(p)}
	}
	for _, e := range []Event{ev(t0+1_000, 800, 1, 0), ev(t0+31_000, 20, 2, 0)} {
		if err := s.ObserveAt(e.TS, e); err != nil {
			t.Fatal(err)
		}
	}
	if got := exemplarsOf(s, t0+35_000, "duration_ms")["api"]; len(got) != 2 {
		t.Fatalf("at +35s: %v, want both", got)
	}
	// At +65s the slot of t0 has left the minute: its 800 goes, though the ring has not moved.
	if got := exemplarsOf(s, t0+65_000, "duration_ms")["api"]; len(got) != 1 || got[0].Value != 20 {
		t.Fatalf("at +65s: %v, want only the 20 of +31s", got)
	}
	// The next lap's slot at t0's position (+70s) keeps its own span, smaller as it is.
	if err := s.ObserveAt(t0+71_000, ev(t0+71_000, 3, 3, 0)); err != nil {
		t.Fatal(err)
	}
	got := exemplarsOf(s, t0+72_000, "duration_ms")["api"]
	if len(got) != 2 || got[1].Value != 3 || got[1].TraceID != trace(3) {
		t.Fatalf("after a lap: %v, want the 20 of +31s and the 3 of +71s", got)
	}
	// The part filter reads partition 0's series only.
	n := 0
	s.VisitExemplars(t0+72_000, "duration_ms", nil, func(p int32) bool { return p == 1 }, nil, func(string, []Exemplar) bool { n++; return true })
	if n != 0 {
		t.Fatalf("partition 1's exemplars: %d series, want none", n)
	}
	if s.DropPartition(0) != 1 {
		t.Fatal("the series was not dropped")
	}
	for i := range s.shards {
		if len(s.shards[i].ex) != 0 {
			t.Fatalf("shard %d keeps %d series' exemplars after the drop", i, len(s.shards[i].ex))
		}
	}
	// A refused new series leaves no exemplar behind, and an evicted one takes its own.
	if err := s.ObserveAt(t0+72_000, Event{TS: t0 + 72_000, Metric: "duration_ms", Key: "idle", Value: 1, TraceID: trace(9)}); err != nil {
		t.Fatal(err)
	}
	_ = s.ObserveAt(t0+900_000, Event{TS: t0, Metric: "duration_ms", Key: "new", Value: 1, TraceID: trace(9)}) // late
	if got := exemplarsOf(s, t0+900_000, "duration_ms"); len(got) != 0 {
		t.Fatalf("exemplars at +900s: %v, want none", got)
	}
	if s.Evict(t0+900_000) != 1 {
		t.Fatal("the idle series was not evicted")
	}
	for i := range s.shards {
		if len(s.shards[i].ex) != 0 {
			t.Fatalf("shard %d keeps exemplars after the eviction", i)
		}
	}
}

// MaxBytes weighs a series with its exemplars when they are on.
func TestExemplarsWeighInMaxBytes(t *testing.T) {
	rc := RingConfig{}
	per := int64(TieredSeriesBytes(rc) + ExemplarBytes(rc))
	for _, on := range []bool{false, true} {
		s, _ := NewStore(StoreConfig{Exemplars: on, MaxBytes: 3 * per})
		n := 0
		for i := range 10 {
			if s.ObserveAt(1_000, Event{TS: 1_000, Metric: "m", Key: fmt.Sprint(i), Value: 1}) == nil {
				n++
			}
		}
		want := 3
		if !on {
			want = int(3 * per / int64(TieredSeriesBytes(rc)))
		}
		if n != want {
			t.Fatalf("exemplars %v: %d series admitted, want %d", on, n, want)
		}
	}
}

// TestExemplarBytesHoldTheirMemory: what a series' exemplars take on the heap (every slot of
// the default ring holding one) is at most ExemplarBytes, the weight MaxBytes adds.
func TestExemplarBytesHoldTheirMemory(t *testing.T) {
	const n, t0 = 2_000, int64(1_700_000_000_000)
	fill := func(on bool) float64 {
		return heapPerItem(1, func(keep []any) {
			s, _ := NewStore(StoreConfig{Exemplars: on})
			for i := range n {
				for k := range int64(31) { // the retention's 30 slots and the skew's one
					ts := t0 + k*10_000
					_ = s.ObserveAt(t0+300_000, Event{TS: ts, Metric: "m", Key: fmt.Sprint(i), Value: 1, TraceID: trace(1)})
				}
			}
			keep[0] = s
		}) / n
	}
	off, on := fill(false), fill(true)
	if per := on - off; per > float64(ExemplarBytes(RingConfig{})) || per < 0.8*float64(ExemplarBytes(RingConfig{})) {
		t.Fatalf("exemplars take %.0f B a series, ExemplarBytes says %d", per, ExemplarBytes(RingConfig{}))
	}
}
