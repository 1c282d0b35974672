package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// encodeAnswer is the peer handler's encoding of a, for the round trip.
func encodeAnswer(op string, a *answer) []byte {
	b := appendServed(nil, a.served)
	switch op {
	case opMerge:
		b = appendPartial(b, &a.merged)
	case opSeries:
		b = binary.AppendUvarint(b, uint64(len(a.series)))
		for i := range a.series {
			b = appendString(b, a.series[i].key)
			b = appendPartial(b, &a.series[i].p)
		}
	case opGroups:
		b = append(b, 0)
		if a.over {
			b[len(b)-1] = 1
		}
		b = binary.AppendUvarint(b, uint64(a.nby))
		b = binary.AppendUvarint(b, uint64(len(a.groups)))
		for i := range a.groups {
			for _, v := range a.groups[i].values {
				b = appendString(b, v)
			}
			b = appendPartial(b, &a.groups[i].p)
		}
	case opSlots:
		b = binary.AppendUvarint(b, uint64(len(a.slots)))
		var scratch sketch.Bins
		for _, s := range a.slots {
			b = appendSlotSeries(b, s.series, s.cur, s.slots, &scratch)
		}
	case opExemplars:
		b = binary.AppendUvarint(b, uint64(len(a.exemplars)))
		for _, s := range a.exemplars {
			b = appendExemplarSeries(b, s.series, s.ex)
		}
	case opExtents:
		b = binary.AppendUvarint(b, uint64(len(a.extents)))
		for _, s := range a.extents {
			b = appendExtent(b, s.series, s.cur, s.first)
		}
	case opMetrics:
		b = binary.AppendUvarint(b, uint64(len(a.names)))
		for _, m := range a.names {
			b = appendString(b, m)
		}
	case opKeys:
		b = binary.AppendUvarint(b, uint64(len(a.keys)))
		for _, id := range a.keys {
			b = appendString(b, id.Metric)
			b = appendString(b, id.Key)
		}
	}
	return b
}

func seedAnswers(t testing.TB) map[string][][]byte {
	s, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []float64{-3, 0, 1.5, 87, 1e9} {
		_ = s.ObserveAt(t0, window.Event{TS: t0 - int64(i)*10_000, Metric: "m", Key: "k", Value: v, Feed: window.FeedOf(1)})
	}
	var p window.Partial
	_ = s.MergePartial(t0, "m", func(string, int32) bool { return true }, window.DefaultSlot*30, &p)
	nb := p
	nb.NoBins = true
	// A partial of a tiered ring (issue #29): 40 minutes of events read over the reach, its
	// span rounded out to the tier slot the window starts in.
	tc := window.RingConfig{Slot: 10 * time.Second, Slots: 6, Tiers: []window.Tier{{Slot: time.Minute, Slots: 5}, {Slot: 5 * time.Minute, Slots: 4}}}
	ts, err := window.NewStore(window.StoreConfig{Metrics: map[string]window.RingConfig{"t": tc}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(240) {
		at := t0 + i*10_000
		_ = ts.ObserveAt(at, window.Event{TS: at, Metric: "t", Key: "k", Value: float64(i % 7), Feed: window.FeedOf(1)})
	}
	var tp window.Partial
	if err := ts.MergePartial(t0+2_390_000, "t", func(string, int32) bool { return true }, tc.Reach(), &tp); err != nil || tp.Count == 0 {
		t.Fatalf("tiered partial: %+v, %v", tp, err)
	}
	// Slots as VisitSlots hands them (packed past slots, the open current one, negative
	// values and the zero bucket), of a labelled series and a plain one.
	var slots []slotSeries
	s.VisitSlots(t0, "m", nil, nil, func(series string, cur int64, vs []window.SlotView) bool {
		slots = append(slots, slotSeries{series: series, cur: cur, slots: slices.Clone(vs)})
		return true
	})
	if len(slots) != 1 || len(slots[0].slots) != 5 {
		t.Fatalf("slots seed: %+v", slots)
	}
	labelled, _ := window.AppendSeries(nil, "k", []window.Label{{Name: "code", Value: "500"}})
	slots = append(slots, slotSeries{series: string(labelled), cur: slots[0].cur + 3, slots: slots[0].slots[1:3]})
	return map[string][][]byte{
		opSlots: {
			encodeAnswer(opSlots, &answer{served: []int32{1}, slots: slots}),
			encodeAnswer(opSlots, &answer{served: []int32{0, 1}}),
		},
		opExtents: {
			encodeAnswer(opExtents, &answer{served: []int32{1}, extents: []extentSeries{
				{series: "k", cur: slots[0].cur, first: slots[0].slots[0].Index},
				{series: string(labelled), cur: -7, first: -7 - maxSlotBack},
			}}),
			encodeAnswer(opExtents, &answer{served: []int32{0, 1}}),
		},
		opMetrics: {encodeAnswer(opMetrics, &answer{served: []int32{3}, names: []string{"latency_ms", "é"}})},
		opExemplars: {
			encodeAnswer(opExemplars, &answer{served: []int32{1}, exemplars: []exemplarSeries{
				{series: "k", ex: []window.Exemplar{{TS: t0 - 9_000, Value: 87, TraceID: [16]byte{1, 2}, SpanID: [8]byte{3}}, {TS: t0, Value: -3, TraceID: [16]byte{15: 9}}}},
				{series: string(labelled), ex: []window.Exemplar{{TS: t0, Value: 1e9, TraceID: [16]byte{7}}}},
			}}),
			encodeAnswer(opExemplars, &answer{served: []int32{0, 1}}),
		},
		opMerge: {
			encodeAnswer(opMerge, &answer{served: []int32{1}, merged: tp}),
			encodeAnswer(opMerge, &answer{served: []int32{1, 5}, merged: p}),
			encodeAnswer(opMerge, &answer{served: []int32{}, merged: nb}),
			encodeAnswer(opMerge, &answer{}),
		},
		opSeries: {encodeAnswer(opSeries, &answer{served: []int32{0}, series: []keyed{{"k", p}, {"é", nb}}})},
		opKeys:   {encodeAnswer(opKeys, &answer{served: []int32{2}, keys: []window.SeriesID{{Metric: "m", Key: "k"}}})},
		opGroups: {
			encodeAnswer(opGroups, &answer{served: []int32{0, 3}, nby: 2, groups: []valued{{[]string{"", "/pay"}, p}, {[]string{"503", "é"}, nb}}}),
			encodeAnswer(opGroups, &answer{served: []int32{1}, nby: 0, groups: []valued{{[]string{}, p}}}),
			encodeAnswer(opGroups, &answer{served: []int32{1}, nby: 1, over: true}),
		},
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	for op, seeds := range seedAnswers(t) {
		for _, b := range seeds {
			a, err := decodeAnswer(op, b)
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			if again := encodeAnswer(op, &a); !bytes.Equal(again, b) {
				t.Errorf("%s: re-encoded %x, want %x", op, again, b)
			}
		}
	}
}

// FuzzDecodeAnswer feeds arbitrary bytes to the decoder of peer answers: it never panics,
// and what it accepts encodes back to the same bytes.
func FuzzDecodeAnswer(f *testing.F) {
	ops := []string{opMerge, opSeries, opKeys, opGroups, opSlots, opMetrics, opExemplars, opExtents}
	for op, seeds := range seedAnswers(f) {
		for _, b := range seeds {
			for i, o := range ops {
				if o == op {
					f.Add(uint8(i), b)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, opIx uint8, b []byte) {
		op := ops[int(opIx)%len(ops)]
		a, err := decodeAnswer(op, b)
		if err != nil {
			return
		}
		if again := encodeAnswer(op, &a); !bytes.Equal(again, b) {
			// Varints have one canonical form only when minimal; accept a decoded answer
			// whose re-encoding decodes to the same thing.
			b2, err := decodeAnswer(op, again)
			if err != nil || !bytes.Equal(encodeAnswer(op, &b2), again) {
				t.Fatalf("%s: %x decoded, re-encoded %x, which does not round trip: %v", op, b, again, err)
			}
		}
	})
}

// FuzzPeerStamp: a peer request's signature headers come from anyone who can reach the
// port. Whatever they hold, StampOf never panics, a stamp it accepts round-trips through
// SetHeader, and VerifyRequest refuses with one of Auth's errors, or takes a genuine
// signature (the first seed's), which then holds for that key alone.
func FuzzPeerStamp(f *testing.F) {
	clock := t0
	a, err := NewAuth(AuthConfig{Key: testKey, Now: func() int64 { return clock }})
	if err != nil {
		f.Fatal(err)
	}
	good := a.SignRequest(testMsg)
	h := http.Header{}
	good.SetHeader(h)
	f.Add(h.Get(HeaderTimestamp), h.Get(HeaderNonce), h.Get(HeaderSignature), testMsg.Query)
	f.Add("1796000000000", "AAAAAAAAAAAAAAAAAAAAAA", strings.Repeat("A", 43), "op=merge")
	f.Add("-9223372036854775808", "", "", "")
	f.Fuzz(func(t *testing.T, ts, nonce, sig, query string) {
		in := http.Header{HeaderTimestamp: {ts}, HeaderNonce: {nonce}, HeaderSignature: {sig}}
		s, err := StampOf(in)
		if err != nil {
			if !errors.Is(err, ErrUnsigned) {
				t.Fatalf("StampOf: %v, want ErrUnsigned", err)
			}
			return
		}
		out := http.Header{}
		s.SetHeader(out)
		if back, err := StampOf(out); err != nil || back != s {
			t.Fatalf("round trip: %+v %v, want %+v", back, err, s)
		}
		m := testMsg
		m.Query = query
		v, _ := NewAuth(AuthConfig{Key: testKey, Now: func() int64 { return clock }}) // a fresh nonce cache
		err = v.VerifyRequest(m, s)
		switch {
		case err == nil: // a genuine signature (a seed's): it holds for this key alone
			o, _ := NewAuth(AuthConfig{Key: otherKey, Now: func() int64 { return clock }})
			if err := o.VerifyRequest(m, s); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("a stamp verified under two keys: %v", err)
			}
		case !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrStaleTimestamp):
			t.Fatalf("VerifyRequest: %v", err)
		}
	})
}
