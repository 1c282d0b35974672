package window

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// Partials of disjoint halves of the series, merged, answer exactly what ReadMerged over
// all of them answers: the property a cluster read relies on.
func TestPartialMergeEqualsReadMerged(t *testing.T) {
	s, err := NewStore(StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const now = int64(1_000_000_000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		key := "k-" + strconv.Itoa(i%50)
		ev := Event{TS: now - rng.Int64N(290_000), Metric: "m", Key: key, Value: rng.ExpFloat64() * 100, Feed: FeedOf(int32(i % 50 % 4))}
		if err := s.ObserveAt(now, ev); err != nil {
			t.Fatal(err)
		}
	}
	qs := []float64{0.5, 0.95, 0.99}
	ix := s.Indexer("m")
	for _, win := range []time.Duration{time.Minute, 5 * time.Minute} {
		want, err := s.ReadMerged(now, "m", func(string) bool { return true }, win, qs)
		if err != nil {
			t.Fatal(err)
		}
		var a, b Partial
		if err := s.MergePartial(now, "m", func(_ string, p int32) bool { return p < 2 }, win, &a); err != nil {
			t.Fatal(err)
		}
		if err := s.MergePartial(now, "m", func(_ string, p int32) bool { return p >= 2 }, win, &b); err != nil {
			t.Fatal(err)
		}
		a.Merge(&b)
		got := a.Agg(ix, qs)
		if got.Count != want.Count || got.Series != want.Series || got.Min != want.Min || got.Max != want.Max ||
			got.From != want.From || got.To != want.To || !reflect.DeepEqual(got.Quantiles, want.Quantiles) {
			t.Fatalf("window %v: merged partials %+v, want %+v", win, got, want)
		}
		if d := got.Sum - want.Sum; d > 1e-6 || d < -1e-6 {
			t.Fatalf("window %v: sum %v, want %v", win, got.Sum, want.Sum)
		}
		// One series through EachPartial equals ReadAt.
		one, _ := s.ReadAt(now, "m", "k-7", win, qs)
		n := 0
		err = s.EachPartial(now, "m", func(k string, _ int32) bool { return k == "k-7" }, win, true, func(_ string, _ int32, p *Partial) {
			n++
			if g := p.Agg(ix, qs); g.Count != one.Count || !reflect.DeepEqual(g.Quantiles, one.Quantiles) || g.Max != one.Max {
				t.Errorf("EachPartial %+v, ReadAt %+v", g, one)
			}
		})
		if err != nil || n != 1 {
			t.Fatalf("EachPartial: %v, %d series", err, n)
		}
	}
}
