package sketch

import (
	"testing"

	"github.com/DataDog/sketches-go/ddsketch"
)

const (
	benchSlots   = 30   // 5 minutes of 10 s slots
	benchPerSlot = 1000 // lognormal latencies per slot
)

// windowFixture is one series with 30 full slots, both as our Bins (slots and
// the kept aggregate) and as default sketches-go sketches (the anchor).
type windowFixture struct {
	ix       Indexer
	slots    []*Bins
	agg      Bins
	ddSlots  []*ddsketch.DDSketch
	rawSlots [][]float64
}

func newWindowFixture(tb testing.TB) *windowFixture {
	f := &windowFixture{ix: mustIndexer(tb, Kind{}), rawSlots: lognormalSlots(42, benchSlots, benchPerSlot)}
	for _, vals := range f.rawSlots {
		b := new(Bins)
		dd, err := ddsketch.NewDefaultDDSketch(0.01)
		if err != nil {
			tb.Fatal(err)
		}
		for _, v := range vals {
			b.Add(f.ix, v, 1)
			if err := dd.Add(v); err != nil {
				tb.Fatal(err)
			}
		}
		f.slots = append(f.slots, b)
		f.agg.AddBins(b)
		f.ddSlots = append(f.ddSlots, dd)
	}
	return f
}

// BenchmarkWindowP95 is the 5-minute p95 read for one series: ours reads the
// kept aggregate; the anchor merges the 30 slot sketches into a fresh
// sketches-go sketch and reads its quantile.
func BenchmarkWindowP95(b *testing.B) {
	f := newWindowFixture(b)
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		var sink float64
		for b.Loop() {
			sink += f.agg.Quantile(f.ix, 0.95)
		}
		_ = sink
	})
	b.Run("anchor", func(b *testing.B) {
		b.ReportAllocs()
		var sink float64
		for b.Loop() {
			m, _ := ddsketch.NewDefaultDDSketch(0.01)
			for _, s := range f.ddSlots {
				if err := m.MergeWith(s); err != nil {
					b.Fatal(err)
				}
			}
			q, err := m.GetValueAtQuantile(0.95)
			if err != nil {
				b.Fatal(err)
			}
			sink += q
		}
		_ = sink
	})
}

// BenchmarkAdd is the ingest hot path: one value into a slot's Bins (ours)
// or into a default sketches-go sketch (anchor).
func BenchmarkAdd(b *testing.B) {
	vals := lognormalSlots(7, 1, 1<<16)[0]
	mask := len(vals) - 1
	b.Run("ours", func(b *testing.B) {
		ix := mustIndexer(b, Kind{})
		var bins Bins
		for _, v := range vals {
			bins.Add(ix, v, 1) // cover the range: steady state
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			bins.Add(ix, vals[i&mask], 1)
			i++
		}
	})
	b.Run("anchor", func(b *testing.B) {
		dd, _ := ddsketch.NewDefaultDDSketch(0.01)
		for _, v := range vals {
			_ = dd.Add(v)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = dd.Add(vals[i&mask])
			i++
		}
	})
}

// BenchmarkSlide is one slot boundary plus one 5-minute p95 read. Ours: the
// sliding sum over Bins (subtract the leaving slot, add the new one, scan).
// Anchor: the alternative the package doc weighs, Two-Stacks over
// sketches-go slot sketches (amortized O(1) merges per slide, two sketches
// merged per read).
func BenchmarkSlide(b *testing.B) {
	f := newWindowFixture(b)
	b.Run("ours", func(b *testing.B) {
		agg := f.agg.Clone()
		b.ReportAllocs()
		i := 0
		var sink float64
		for b.Loop() {
			s := f.slots[i%benchSlots] // the leaving slot comes back as the new one
			agg.SubBins(s)
			agg.AddBins(s)
			sink += agg.Quantile(f.ix, 0.95)
			i++
		}
		_ = sink
	})
	b.Run("anchor", func(b *testing.B) {
		ts := newTwoStacks(f.ddSlots)
		b.ReportAllocs()
		i := 0
		var sink float64
		for b.Loop() {
			ts.pop()
			ts.push(f.ddSlots[i%benchSlots])
			sink += ts.quantile(0.95)
			i++
		}
		_ = sink
	})
}

// twoStacks is the Two-Stacks sliding aggregation over sketches-go sketches:
// the back stack keeps a running merge of the slots pushed since the last
// flip; the front stack keeps, for each older slot, the merge of it and
// everything newer in the front. A query merges the two tops.
type twoStacks struct {
	front   []*ddsketch.DDSketch // front[i] = merge of slots i..end of front; front[len-1] is the oldest
	back    []*ddsketch.DDSketch
	backAgg *ddsketch.DDSketch
	scratch *ddsketch.DDSketch
}

func newTwoStacks(slots []*ddsketch.DDSketch) *twoStacks {
	ts := &twoStacks{}
	ts.backAgg, _ = ddsketch.NewDefaultDDSketch(0.01)
	ts.scratch, _ = ddsketch.NewDefaultDDSketch(0.01)
	for _, s := range slots {
		ts.push(s)
	}
	return ts
}

func (ts *twoStacks) push(s *ddsketch.DDSketch) {
	ts.back = append(ts.back, s)
	_ = ts.backAgg.MergeWith(s)
}

func (ts *twoStacks) pop() {
	if len(ts.front) == 0 {
		// Flip: build suffix merges from the newest back slot to the oldest.
		var acc *ddsketch.DDSketch
		for i := len(ts.back) - 1; i >= 0; i-- {
			if acc == nil {
				acc = ts.back[i].Copy()
			} else {
				acc = acc.Copy()
				_ = acc.MergeWith(ts.back[i])
			}
			ts.front = append(ts.front, acc)
		}
		ts.back = ts.back[:0]
		ts.backAgg.Clear()
	}
	ts.front = ts.front[:len(ts.front)-1]
}

func (ts *twoStacks) quantile(q float64) float64 {
	ts.scratch.Clear()
	if n := len(ts.front); n > 0 {
		_ = ts.scratch.MergeWith(ts.front[n-1])
	}
	_ = ts.scratch.MergeWith(ts.backAgg)
	v, _ := ts.scratch.GetValueAtQuantile(q)
	return v
}

// BenchmarkBinsOps covers the other per-slot operations (no anchor).
func BenchmarkBinsOps(b *testing.B) {
	f := newWindowFixture(b)
	qs := []float64{0.5, 0.9, 0.95, 0.99}
	b.Run("Quantiles4", func(b *testing.B) {
		dst := make([]float64, 0, len(qs))
		b.ReportAllocs()
		for b.Loop() {
			dst = f.agg.Quantiles(f.ix, qs, dst[:0])
		}
	})
	b.Run("UnionQuantile6", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Quantile(f.ix, 0.95, f.slots[:6]...)
		}
	})
	b.Run("UnionQuantiles29x4", func(b *testing.B) {
		dst := make([]float64, 0, len(qs))
		b.ReportAllocs()
		for b.Loop() {
			dst = QuantilesOf(f.ix, qs, dst[:0], f.slots[:29]...)
		}
	})
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = f.agg.MarshalBinary()
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		p, _ := f.agg.MarshalBinary()
		var u Bins
		b.SetBytes(int64(len(p)))
		b.ReportAllocs()
		for b.Loop() {
			_ = u.UnmarshalBinary(p)
		}
	})
	b.Run("FillSlot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s Bins
			for _, v := range f.rawSlots[0] {
				s.Add(f.ix, v, 1)
			}
		}
	})
}
