package sketch

import (
	"math"
	"testing"
)

// TestSlotQuantilesMatchView: Slot.Quantiles, reading a packed slot straight from its
// encoding, answers bit for bit what the slot's decoded Bins answer, for every slot case
// (every kind, negatives, saturating counts, sides wider than the stack buffer), in both
// forms, for sorted, unsorted, single, repeated and invalid quantiles, with the plain and
// the read Indexer.
func TestSlotQuantilesMatchView(t *testing.T) {
	qsets := [][]float64{
		{0.5, 0.95, 0.99},
		{0, 0.25, 0.5, 0.75, 1},
		{0.99, 0.5, 0.01}, // unsorted: each from the start
		{0.95},
		{0.5, 0.5, 1, 1},
		{math.NaN(), -0.1, 0.5, 1.5},
		{},
	}
	same := func(a, b []float64) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
				return false
			}
		}
		return true
	}
	for name, mk := range slotCases(t) {
		b, ix := mk()
		open := SlotOf(b.Clone())
		packed := SlotOf(b.Clone())
		packed.Pack()
		if !packed.IsPacked() {
			t.Fatalf("%s: not packed", name)
		}
		for _, qs := range qsets {
			want := b.Quantiles(ix, qs, nil)
			var scratch Bins
			if got := packed.View(&scratch).Quantiles(ix, qs, nil); !same(got, want) {
				t.Fatalf("%s %v: decoded %v, open %v", name, qs, got, want)
			}
			for _, rix := range []Indexer{ix, ReadIndexer(ix)} {
				for form, s := range map[string]Slot{"packed": packed, "open": open} {
					if got := s.Quantiles(rix, qs, nil); !same(got, want) {
						t.Errorf("%s %s %v: Slot.Quantiles %v, Bins.Quantiles %v", name, form, qs, got, want)
					}
				}
			}
		}
	}
	var empty Slot
	if got := empty.Quantiles(mustIndexer(t, Kind{}), []float64{0.5, 1}, nil); len(got) != 2 || !math.IsNaN(got[0]) || !math.IsNaN(got[1]) {
		t.Errorf("empty slot: %v, want two NaN", got)
	}
}

// TestReadIndexerValues: the read Indexer's values are bit for bit the Indexer's, over the
// whole index range of every kind's mapping.
func TestReadIndexerValues(t *testing.T) {
	for _, k := range []Kind{{}, {RelativeAccuracy: 0.001}, {RelativeAccuracy: 0.05}, {Name: NameHDR}, {Name: NameNative}} {
		ix := mustIndexer(t, k)
		rix := ReadIndexer(ix)
		lo, hi := ix.Index(ix.MinIndexableValue()*2), ix.Index(1e300)
		if k.Name == NameHDR {
			hi = ix.Index(1e12)
		}
		step := max(1, (hi-lo)/20000)
		for i := lo; i <= hi; i += step {
			if a, b := ix.Value(i), rix.Value(i); math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("%v: Value(%d) = %v, read Indexer %v", k, i, a, b)
			}
		}
		if rix.RelativeAccuracy() != ix.RelativeAccuracy() || rix.Index(123.4) != ix.Index(123.4) || rix.MinIndexableValue() != ix.MinIndexableValue() {
			t.Errorf("%v: the read Indexer differs from the Indexer outside Value", k)
		}
	}
}
