package window

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// readonlyStore builds the same store every call: dense and sparse series of the default
// ring and of a per-metric one (cost: 60 s × 60), fed by four partitions and by none, with
// late events and events ahead of now within the skew, every ring written at now.
func readonlyStore(t *testing.T, now int64) *Store {
	t.Helper()
	s := newTestStore(t, StoreConfig{Metrics: map[string]RingConfig{"cost": {Slot: time.Minute, Slots: 60}}})
	rng := rand.New(rand.NewPCG(25, 25))
	for _, metric := range []string{"latency_ms", "cost"} {
		rc := s.RingConfig(metric)
		width := rc.Slot.Milliseconds()
		oldest := (FloorDiv(now, width) - int64(rc.Slots) + 1) * width // the oldest live slot's start
		for i := range 12 {
			events := 3 // sparse
			if i%2 == 0 {
				events = 400 // dense
			}
			for range events {
				ts := oldest + rng.Int64N(now-oldest+1)
				if rng.IntN(20) == 0 {
					ts = now + rng.Int64N(rc.Skew.Milliseconds()) // ahead, within the skew
				}
				ev := Event{TS: ts, Metric: metric, Key: fmt.Sprintf("k-%02d", i), Value: float64(1 + rng.IntN(1000)), Feed: FeedOf(int32(i%5) - 1)}
				if err := s.ObserveAt(now, ev); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return s
}

// everyRead runs every read API of Store and Ring over every series of s at now and returns
// what they answered, as text (NaN prints as NaN, so equal text is equal answers).
func everyRead(s *Store, now int64) string {
	var b strings.Builder
	qs := []float64{0, 0.5, 0.95, 0.99, 1}
	all := func(string) bool { return true }
	allPart := func(string, int32) bool { return true }
	for _, metric := range s.Metrics() {
		rc := s.RingConfig(metric)
		ix, _ := rc.Sketch.Indexer()
		wins := []time.Duration{rc.Slot, 6 * rc.Slot, rc.Retention()}
		for _, key := range s.Keys(metric, "") {
			for _, w := range wins {
				a, err := s.ReadAt(now, metric, key, w, qs)
				fmt.Fprintf(&b, "ReadAt %s %s %v: %v %v\n", metric, key, w, a, err)
				p := Partial{}
				err = s.MergeKey(now, metric, key, func(int32) bool { return true }, w, &p)
				fmt.Fprintf(&b, "MergeKey %s %s %v: %v %v\n", metric, key, w, p.Agg(ix, qs), err)
				p = Partial{NoBins: true}
				err = s.MergeKey(now, metric, key, func(int32) bool { return true }, w, &p)
				fmt.Fprintf(&b, "MergeKey nobins %s %s %v: %v %v\n", metric, key, w, p.Agg(ix, qs), err)
				var scratch sketch.Bins
				err = s.VisitWindowAt(now, metric, key, w, &scratch, func(a Agg, bins *sketch.Bins) {
					fmt.Fprintf(&b, "VisitWindowAt %s %s %v: %v %d %v\n", metric, key, w, a, bins.Count(), bins.Quantiles(ix, qs, nil))
				})
				fmt.Fprintf(&b, "VisitWindowAt %s %s %v: %v\n", metric, key, w, err)
				pts, err := s.ReadRangeAt(now, metric, key, w, rc.Slot, qs)
				fmt.Fprintf(&b, "ReadRangeAt %s %s %v: %v %v\n", metric, key, w, pts, err)
			}
		}
		for _, w := range wins {
			a, err := s.ReadMerged(now, metric, all, w, qs)
			fmt.Fprintf(&b, "ReadMerged %s %v: %v %v\n", metric, w, a, err)
			for _, bins := range []bool{true, false} {
				p := Partial{NoBins: !bins}
				err = s.MergePartial(now, metric, allPart, w, &p)
				fmt.Fprintf(&b, "MergePartial %s %v %v: %v %v\n", metric, w, bins, p.Agg(ix, qs), err)
				byKey := map[string]string{}
				err = s.EachPartial(now, metric, allPart, w, bins, func(key string, part int32, p *Partial) {
					byKey[key] = fmt.Sprint(part, p.Agg(ix, qs))
				})
				fmt.Fprintf(&b, "EachPartial %s %v %v: %v %v\n", metric, w, bins, byKey, err)
			}
			pts, err := s.ReadRangeMerged(now, metric, all, w, rc.Slot, qs)
			fmt.Fprintf(&b, "ReadRangeMerged %s %v: %v %v\n", metric, w, pts, err)
		}
	}
	ms, err := s.MetricSeries(context.Background())
	fmt.Fprintf(&b, "MetricSeries %v %v; Len %d; Stats %+v\n", ms, err, s.Len(), s.Stats())
	return b.String()
}

// Issue #25: no read, at any now (a peer's, a client's, 30 minutes ahead, the largest
// int64), changes what a later read or a later event sees. Two stores are built alike; one
// is read at hostile instants through every read API, the other not; then both take the
// same events (among them events at the oldest live slot, which a ring moved 30 minutes
// on would refuse as late) and must refuse and answer everything alike.
func TestReadsChangeNothing(t *testing.T) {
	now := t0 + 290_000
	read, untouched := readonlyStore(t, now), readonlyStore(t, now)
	if got, want := everyRead(read, now), everyRead(untouched, now); got != want {
		t.Fatal("the two stores differ before any hostile read")
	}
	for _, at := range []int64{now + 10_000, now + 30*60_000, now + 3_600_000 + 1, math.MaxInt64, math.MinInt64, now - 3_600_000, 0} {
		everyRead(read, at)
		// The answer ahead is what the ring would hold there: 30 minutes on, nothing.
		if at == now+30*60_000 {
			if a, err := read.ReadAt(at, "latency_ms", "k-00", 5*time.Minute, nil); err != nil || a.Count != 0 || a.From != FloorDiv(at, 10_000)*10_000-290_000 {
				t.Errorf("a read 30 minutes ahead: %+v, %v; want an empty window ending at that slot", a, err)
			}
		}
	}
	if got, want := everyRead(read, now), everyRead(untouched, now); got != want {
		t.Fatalf("reads at hostile instants changed what a read at now sees:\n%s", firstDiff(got, want))
	}
	if a, err := untouched.ReadAt(now, "latency_ms", "k-00", 5*time.Minute, nil); err != nil || a.Count == 0 {
		t.Fatalf("the fixture's dense series is empty at now: %+v %v", a, err)
	}

	// Later events, through both write paths: each is refused or taken alike.
	rng := rand.New(rand.NewPCG(25, 26))
	for i := range 400 {
		at := now + int64(i)*50 // the next 20 s
		ts := at - rng.Int64N(300_000)
		if i%10 == 0 {
			ts = FloorDiv(at, 10_000)*10_000 - 290_000 // the oldest live slot of the default ring at at
		}
		ev := Event{TS: ts, Metric: []string{"latency_ms", "cost"}[i%2], Key: fmt.Sprintf("k-%02d", i%14), Value: float64(i)}
		var e1, e2 error
		if i%3 == 0 {
			src := Source{RecordTS: at}
			e1, e2 = read.ObserveFrom(at, src, &ev), untouched.ObserveFrom(at, src, &ev)
		} else {
			e1, e2 = read.ObserveAt(at, ev), untouched.ObserveAt(at, ev)
		}
		if e1 != e2 {
			t.Fatalf("event %d (ts %d at %d): %v after the hostile reads, %v without them", i, ts, at, e1, e2)
		}
		if i%10 == 0 && e1 != nil {
			t.Fatalf("an event in the oldest live slot was refused: %v", e1)
		}
	}
	end := now + 400*50
	if got, want := everyRead(read, end), everyRead(untouched, end); got != want {
		t.Fatalf("after the same events, reads differ:\n%s", firstDiff(got, want))
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return "got  " + g[i] + "\nwant " + w[i]
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g), len(w))
}

// A read at a now past the ring's current slot answers, bit for bit, what the ring would
// answer once moved there (what reads did before #25, by moving it): counts, sums, min,
// max, spans and quantiles of every window and of the history, for rings dense and
// sparse, with slots ahead under the skew, read 1 to 61 slots on.
func TestReadAheadEqualsAdvanced(t *testing.T) {
	now := t0 + 290_000
	for _, d := range []int64{0, 1, 2, 3, 7, 14, 15, 16, 29, 30, 31, 32, 61} {
		at := now + d*10_000 + 3_000
		for _, fold := range []bool{false, true} { // the current slot folded into the aggregate by a read, or not
			unmoved, moved := readonlyStore(t, now), readonlyStore(t, now)
			if fold {
				everyRead(unmoved, now)
				everyRead(moved, now)
			}
			for i := range moved.shards {
				for se := range moved.shards[i].all() {
					se.ring.advance(at)
				}
			}
			if got, want := everyRead(unmoved, at), everyRead(moved, at); got != want {
				t.Fatalf("%d slots on (current slot folded: %v): an unmoved read differs from a moved one:\n%s", d, fold, firstDiff(got, want))
			}
			// Many quantiles of the merged bins, the sums addWindowAt adds and subtracts.
			for _, metric := range []string{"latency_ms", "cost"} {
				w := unmoved.RingConfig(metric).Retention()
				ix := unmoved.Indexer(metric)
				var p, o Partial
				if err := unmoved.MergePartial(at, metric, func(string, int32) bool { return true }, w, &p); err != nil {
					t.Fatal(err)
				}
				if err := moved.MergePartial(at, metric, func(string, int32) bool { return true }, w, &o); err != nil {
					t.Fatal(err)
				}
				many := make([]float64, 101)
				for i := range many {
					many[i] = float64(i) / 100
				}
				if got, want := fmt.Sprint(p.Bins.Count(), p.Agg(ix, many)), fmt.Sprint(o.Bins.Count(), o.Agg(ix, many)); got != want {
					t.Fatalf("%s %d slots on: merged bins %s, moved %s", metric, d, got, want)
				}
			}
		}
	}
}
