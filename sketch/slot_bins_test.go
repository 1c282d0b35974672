package sketch

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSlotAppendBinsEqualsDecoded: a slot's bins and zero count read straight from its
// packed form equal those of its counts decoded, open or packed, both sides, for counts of
// one byte and wider ones.
func TestSlotAppendBinsEqualsDecoded(t *testing.T) {
	k, err := ParseKind("native:5")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := k.Indexer()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(28, 2))
	for round := range 50 {
		var s Slot
		b := s.Open()
		for range rng.IntN(2000) {
			v := rng.ExpFloat64() * 100
			switch rng.IntN(10) {
			case 0:
				v = -v
			case 1:
				v = 0
			}
			b.Add(ix, v, uint64(1+rng.IntN(3*round+1)))
		}
		var want [2][]BinCount
		for side, neg := range []bool{false, true} {
			want[side] = b.AppendBins(nil, neg)
			if got := s.AppendBins(nil, neg); !slices.Equal(got, want[side]) {
				t.Fatalf("round %d open, negative %v: %v, want %v", round, neg, got, want[side])
			}
		}
		zero := b.ZeroCount()
		s.Pack()
		if !s.IsPacked() && s.Count() > 0 {
			t.Fatalf("round %d: not packed", round)
		}
		for side, neg := range []bool{false, true} {
			if got := s.AppendBins(nil, neg); !slices.Equal(got, want[side]) {
				t.Fatalf("round %d packed, negative %v: %v, want %v", round, neg, got, want[side])
			}
		}
		if s.ZeroCount() != zero {
			t.Fatalf("round %d: zero count %d, want %d", round, s.ZeroCount(), zero)
		}
	}
}
