package sketch

import (
	"bytes"
	"math"
	"testing"
)

func encoded(t *testing.T, b *Bins) []byte {
	t.Helper()
	p, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// slotCases are Bins that stress the packed form: every sketch kind, both signs and zero,
// counts of every width up to saturation, long empty runs and isolated spikes.
func slotCases(t *testing.T) map[string]func() (*Bins, Indexer) {
	fill := func(k Kind, vals []float64, counts []uint64) func() (*Bins, Indexer) {
		return func() (*Bins, Indexer) {
			ix := mustIndexer(t, k)
			b := new(Bins)
			for i, v := range vals {
				n := uint64(1)
				if counts != nil {
					n = counts[i%len(counts)]
				}
				b.Add(ix, v, n)
			}
			return b, ix
		}
	}
	rng := newRand(3)
	mixed := make([]float64, 3000)
	for i := range mixed {
		mixed[i] = math.Exp(3+2*rng.NormFloat64()) * float64(1-2*(i%3&1))
		if i%97 == 0 {
			mixed[i] = 0
		}
	}
	lat := lognormalSlots(5, 1, 1000)[0]
	return map[string]func() (*Bins, Indexer){
		"ddsketch lognormal":    fill(Kind{}, lat, nil),
		"hdr lognormal":         fill(Kind{Name: NameHDR}, lat, nil),
		"native lognormal":      fill(Kind{Name: NameNative}, lat, nil),
		"ddsketch 0.1% mixed":   fill(Kind{RelativeAccuracy: 0.001}, mixed, nil),
		"huge counts":           fill(Kind{}, lat[:50], []uint64{1, 1 << 20, 3, 1 << 40, 0, math.MaxUint64 / 4, 7}),
		"spike after zeros":     fill(Kind{}, []float64{1, 1e6, 1e6, 1e-3}, []uint64{1, 1 << 33, 1, 2}),
		"one value":             fill(Kind{}, []float64{42}, nil),
		"zero and negatives":    fill(Kind{}, []float64{0, -1, -2, -1e9, 0}, []uint64{5, 1, 300, 70000}),
		"hdr with a zero value": fill(Kind{Name: NameHDR}, []float64{0, 0, 5, 3_000_000}, nil),
		"small integers":        fill(Kind{}, ints(1, 100), nil), // long runs of empty bins between counts
		"wide and sparse":       fill(Kind{}, []float64{1e-6, 1e-3, 1, 1e3, 1e9}, nil),
		"zeros then a tail":     fill(Kind{}, append(ints(500, 600), 1e4, 1e5), []uint64{3, 1, 1, 2}),
		"zero and positives":    fill(Kind{}, []float64{0, 0, 3, 0, 7, 1e3}, []uint64{4, 1, 2}),
		"counts past 2^53":      fill(Kind{}, lat[:10], []uint64{1 << 60, 3, 1<<58 + 1}), // ranks round up to the count
	}
}

// ints returns the integers lo..hi as values.
func ints(lo, hi int) []float64 {
	var out []float64
	for v := lo; v <= hi; v++ {
		out = append(out, float64(v))
	}
	return out
}

// TestSlotPackRoundTrip: a packed slot adds into, subtracts from, reopens to and reads as
// its open Bins did, for every sketch kind.
func TestSlotPackRoundTrip(t *testing.T) {
	for name, mk := range slotCases(t) {
		t.Run(name, func(t *testing.T) {
			b, ix := mk()
			want := encoded(t, b)
			wantQ := b.Quantiles(ix, []float64{0, 0.01, 0.5, 0.95, 0.99, 1}, nil)
			s := SlotOf(b.Clone())
			s.Pack()
			if !s.IsPacked() || s.Bins() != nil {
				t.Fatal("Pack left the slot open")
			}
			if s.Count() != b.Count() {
				t.Fatalf("packed count %d, want %d", s.Count(), b.Count())
			}
			var got Bins
			s.AddTo(&got)
			if !bytes.Equal(encoded(t, &got), want) {
				t.Fatal("AddTo of the packed slot differs from the open Bins")
			}
			gotQ := s.View(new(Bins)).Quantiles(ix, []float64{0, 0.01, 0.5, 0.95, 0.99, 1}, nil)
			for i := range wantQ {
				if gotQ[i] != wantQ[i] {
					t.Fatalf("quantile %d: packed %v, open %v", i, gotQ[i], wantQ[i])
				}
			}
			// Subtracting from an aggregate of two copies leaves one copy, as SubBins does.
			agg, ref := b.Clone(), b.Clone()
			agg.AddBins(b)
			ref.AddBins(b)
			if ok := s.SubFrom(agg); !ok || !ref.SubBins(b) {
				t.Fatalf("SubFrom reported a missing count")
			}
			if !bytes.Equal(encoded(t, agg), encoded(t, ref)) || agg.Bytes() != ref.Bytes() {
				t.Fatal("SubFrom differs from SubBins")
			}
			if s.SubFrom(agg); agg.Count() != 0 || agg.Bytes() != 0 {
				t.Fatalf("after subtracting every count: %d left, %d bytes", agg.Count(), agg.Bytes())
			}
			c := s.Clone()
			if !c.IsPacked() || c.p == s.p {
				t.Fatal("Clone of a packed slot is not a packed copy")
			}
			if o := c.Open(); !bytes.Equal(encoded(t, o), want) || c.IsPacked() {
				t.Fatal("Open of a packed slot differs from the open Bins")
			}
		})
	}
}

// TestSlotSubFromMissing: subtracting a packed slot that was never added clamps at zero and
// says so, as SubBins does.
func TestSlotSubFromMissing(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	a, o := new(Bins), new(Bins)
	a.Add(ix, 10, 1)
	o.Add(ix, 10, 2)
	o.Add(ix, -5, 1)
	o.Add(ix, 0, 1)
	ref := a.Clone()
	s := SlotOf(o.Clone())
	s.Pack()
	if s.SubFrom(a) || ref.SubBins(o) {
		t.Fatal("a missing count was not reported")
	}
	if a.Count() != 0 || ref.Count() != 0 {
		t.Fatalf("counts left: %d, %d", a.Count(), ref.Count())
	}
}

// TestSlotPackedSize holds the size the dense-series memory goal (issue #19) rests on: a
// slot of 1,000 lognormal latencies (median 33 ms, σ 0.8, as BenchmarkSeriesMemory in
// window fills them) packs into at most 112 bytes (a size class) on average, against its
// open form's 270 and more, for DDSketch at 1%.
func TestSlotPackedSize(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var total, open int
	r := newRand(11)
	const slots = 30
	for range slots {
		b := new(Bins)
		for range 1000 {
			b.Add(ix, math.Exp(3.5+0.8*r.NormFloat64()), 1)
		}
		b.Compact()
		open += b.Bytes()
		s := SlotOf(b)
		s.Pack()
		total += s.Bytes()
	}
	per := total / slots
	t.Logf("packed %d B per slot, open %d B", per, open/slots)
	if per > 112 {
		t.Fatalf("packed slot: %d bytes on average, want ≤ 112", per)
	}
}

func TestSlotEmptyAndOpen(t *testing.T) {
	var s Slot
	if !s.Empty() || s.IsPacked() || s.Bins() != nil || s.Count() != 0 || s.Bytes() != 0 {
		t.Fatal("zero Slot is not empty")
	}
	s.Pack() // no-op
	var dst Bins
	s.AddTo(&dst)
	if !s.SubFrom(&dst) || dst.Count() != 0 {
		t.Fatal("empty slot changed its destination")
	}
	b := s.Open()
	b.Add(mustIndexer(t, Kind{}), 3, 2)
	if s.Bins() != b || s.Count() != 2 {
		t.Fatal("Open did not keep its Bins")
	}
	b.SubBins(b)
	s.Pack()
	if !s.Empty() {
		t.Fatal("packing an open slot holding nothing should leave it empty")
	}
}

func BenchmarkSlotPack(b *testing.B) {
	ix := mustIndexer(b, Kind{})
	src := new(Bins)
	for _, v := range lognormalSlots(1, 1, 1000)[0] {
		src.Add(ix, v, 1)
	}
	s := SlotOf(src.Clone())
	s.Pack()
	b.Run("pack", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			t := SlotOf(src)
			t.Pack()
		}
	})
	b.Run("add", func(b *testing.B) {
		var agg Bins
		b.ReportAllocs()
		for range b.N {
			s.AddTo(&agg)
		}
	})
	b.Run("add_open", func(b *testing.B) {
		var agg Bins
		b.ReportAllocs()
		for range b.N {
			agg.AddBins(src)
		}
	})
}

// BenchmarkSlotQuantiles: p50/p95/p99 of one slot of 1,000 latencies, packed (decoded into
// scratch, as a range read of several-slot points does; direct: Slot.Quantiles reading the
// encoding, as a range read of one-slot points does) against open.
func BenchmarkSlotQuantiles(b *testing.B) {
	ix := mustIndexer(b, Kind{})
	src := new(Bins)
	for _, v := range lognormalSlots(1, 1, 1000)[0] {
		src.Add(ix, v, 1)
	}
	src.Compact()
	s := SlotOf(src.Clone())
	s.Pack()
	qs := []float64{0.5, 0.95, 0.99}
	dst := make([]float64, 0, 3)
	b.Run("packed", func(b *testing.B) {
		var scratch Bins
		b.ReportAllocs()
		for range b.N {
			dst = s.View(&scratch).Quantiles(ix, qs, dst[:0])
		}
	})
	b.Run("direct", func(b *testing.B) {
		rix := ReadIndexer(ix)
		b.ReportAllocs()
		for range b.N {
			dst = s.Quantiles(rix, qs, dst[:0])
		}
	})
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			dst = src.Quantiles(ix, qs, dst[:0])
		}
	})
}
