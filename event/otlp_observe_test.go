package event

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/slide-metrics/slide/window"
)

// TestOTLPTakeMatchesOneByOne: POST /v1/events (and /v1/traces) hand a request's spans to
// the store together, as ingest hands a record's (window.Store.ObserveAtAll); the answer and
// the store after it must be what observing each span in turn with ObserveAt gives: the
// accepted and refused counts, the first refusal of each reason with where and why, the
// store's stats and every series' reads. The requests hold spans of many series (past a
// block's 32) refused for every reason the store and the format have (late, future, ending
// before they start, without service.name, over the series cap), in both formats.
func TestOTLPTakeMatchesOneByOne(t *testing.T) {
	for _, json := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", json), func(t *testing.T) {
			newF := func() (Format, error) { return newSpanDecoder(SpanConfig{Dimensions: []string{"http.route"}}, json) }
			scfg := window.StoreConfig{Ring: window.RingConfig{Slot: 10 * time.Second, Slots: 6}, MaxSeries: 60}
			stAll, err := window.NewStore(scfg)
			if err != nil {
				t.Fatal(err)
			}
			stOne, _ := window.NewStore(scfg)
			in, err := NewIntake(stAll, Config{}, WithFormat(newF))
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := NewIntake(stOne, Config{}, WithFormat(newF))
			f, _ := newF()
			one := f.(*SpanDecoder)
			rng := rand.New(rand.NewPCG(5, 9))
			now := defTS
			refusedTotal := 0
			for req := range 30 {
				now += int64(rng.IntN(4000))
				body := spansRequest(t, rng, now, json)
				got := in.Take(body, now)
				var want Result
				one.DecodeLines(body, now, func(part []byte, ev window.Event, r Reason) {
					if r == ReasonNone {
						r = ReasonOf(stOne.ObserveAt(now, ev))
					}
					if r == ReasonNone {
						want.Accepted++
						return
					}
					if want.Refused[r] == 0 {
						want.First[r] = where(one, body, part) + ": " + ref.Explain(one, part, r, now, nil)
					}
					want.Refused[r]++
					want.Parts++ // a span is a part
				})
				if got != want {
					t.Fatalf("request %d: Take %+v, one span at a time %+v", req, got, want)
				}
				for _, n := range got.Refused {
					refusedTotal += n
				}
			}
			if refusedTotal < 50 {
				t.Fatalf("only %d spans refused: the requests test too little", refusedTotal)
			}
			if a, b := stAll.Stats(), stOne.Stats(); a != b || a.Late == 0 || a.Future == 0 || a.Refused == 0 {
				t.Fatalf("stats: Take %+v, one span at a time %+v (want the same, with late, future and capped spans)", a, b)
			}
			n := 0
			for _, k := range stOne.Keys(SpanMetric, "") {
				a, err1 := stAll.ReadAt(now, SpanMetric, k, time.Minute, []float64{0.5, 0.99})
				b, err2 := stOne.ReadAt(now, SpanMetric, k, time.Minute, []float64{0.5, 0.99})
				if err1 != nil || err2 != nil || a.Count != b.Count || math.Float64bits(a.Sum) != math.Float64bits(b.Sum) ||
					a.Min != b.Min || a.Max != b.Max || fmt.Sprint(a.Quantiles) != fmt.Sprint(b.Quantiles) {
					t.Fatalf("series %q: Take %+v %v, one span at a time %+v %v", k, a, err1, b, err2)
				}
				n++
			}
			if n != stAll.Len() || n < 40 {
				t.Fatalf("Take made %d series, one span at a time %d (want the same, at least 40)", stAll.Len(), n)
			}
		})
	}
}

// spansRequest is a request of 1 to 200 spans of up to 70 series at about now: most in the
// window, some late, ahead, ending before they start or without service.name.
func spansRequest(t *testing.T, rng *rand.Rand, now int64, json bool) []byte {
	td := ptrace.NewTraces()
	for range 1 + rng.IntN(6) {
		rs := td.ResourceSpans().AppendEmpty()
		if rng.IntN(15) > 0 {
			rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", rng.IntN(10)))
		}
		ss := rs.ScopeSpans().AppendEmpty()
		for range rng.IntN(40) {
			sp := ss.Spans().AppendEmpty()
			sp.SetName(fmt.Sprintf("op-%d", rng.IntN(3)))
			sp.Attributes().PutStr("http.route", fmt.Sprintf("/r%d", rng.IntN(3)))
			end := now - int64(rng.IntN(50_000))
			switch rng.IntN(20) {
			case 0:
				end = now - 120_000 // late
			case 1:
				end = now + 30_000 // ahead
			}
			dur := int64(rng.ExpFloat64() * 1e8)
			if rng.IntN(30) == 0 {
				dur = -1_000_000 // ends before it starts
			}
			sp.SetEndTimestamp(pcommon.Timestamp(end * 1e6))
			sp.SetStartTimestamp(pcommon.Timestamp(end*1e6 - dur))
		}
	}
	if json {
		return jsonOf(t, td)
	}
	return protoOf(t, td)
}

// A pending span's event is written field by field into the slot an earlier body's span
// held (spanEvent, event): every field of window.Event must be among those written, and a
// slot left dirty (a feed set by observeAll, ids, a refused span's zero) gives the same
// events as a new decoder's.
func TestOTLPPendingEventWhole(t *testing.T) {
	written := []string{"TS", "Metric", "Key", "Value", "Count", "Feed", "TraceID", "SpanID"}
	var names []string
	for f := range reflect.TypeFor[window.Event]().Fields() {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, written) {
		t.Fatalf("window.Event's fields %v, event writes %v: write the new ones", names, written)
	}
	td := testRequest(3)
	rs := td.ResourceSpans().At(0)
	rs.ScopeSpans().At(0).Spans().At(1).SetEndTimestamp(1) // refused: end before start
	rs.ScopeSpans().At(0).Spans().At(2).SetTraceID(pcommon.TraceID{})
	body := protoOf(t, td)
	fresh, _ := NewOTLPProto(SpanConfig{Dimensions: benchDims})
	want := decodeSpans(t, fresh, body)
	if want[1].r == ReasonNone || want[2].ev.TraceID != ([16]byte{}) {
		t.Fatalf("span 2 %v, span 3's trace id %x: not the request meant", want[1].r, want[2].ev.TraceID)
	}
	f, _ := NewOTLPProto(SpanConfig{Dimensions: benchDims})
	decodeSpans(t, f, body)
	for k := range f.pending {
		f.pending[k].ev = window.Event{TS: 9, Metric: "m", Key: "k", Value: 9, Count: 9, Feed: 9, TraceID: [16]byte{9}, SpanID: [8]byte{9}}
	}
	sameEvents(t, "dirty slots", decodeSpans(t, f, body), want)
}
