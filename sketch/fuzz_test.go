package sketch

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

var fuzzQs = []float64{0, 0.01, 0.5, 0.95, 0.99, 1}

func binsSeeds(tb testing.TB) [][]byte {
	ix := mustIndexer(tb, Kind{})
	var seeds [][]byte
	var b Bins
	e, _ := b.MarshalBinary()
	seeds = append(seeds, e)
	for _, vals := range lognormalSlots(3, 2, 300) {
		for i, v := range vals {
			if i%17 == 0 {
				v = -v
			}
			if i%29 == 0 {
				v = 0
			}
			b.Add(ix, v, uint64(1+i%300))
		}
		e, _ := b.MarshalBinary()
		seeds = append(seeds, e)
	}
	return seeds
}

// FuzzBinsUnmarshal feeds arbitrary bytes to UnmarshalBinary: no panic,
// ErrCorrupt on failure and the receiver untouched, and an accepted input
// re-encodes to bytes that decode to the same bins.
func FuzzBinsUnmarshal(f *testing.F) {
	for _, s := range binsSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte{binsVersion, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 1})
	f.Add([]byte{binsVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0})
	ix := mustIndexer(f, Kind{})
	hix := mustIndexer(f, Kind{Name: NameHDR})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Bins
		b.Add(ix, 42, 1) // must survive a failed decode
		if err := b.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			if b.Count() != 1 {
				t.Fatal("failed UnmarshalBinary modified the receiver")
			}
			return
		}
		enc, err := b.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back Bins
		if err := back.UnmarshalBinary(enc); err != nil {
			t.Fatalf("decoding our own encoding: %v", err)
		}
		enc2, _ := back.MarshalBinary()
		if !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable across a round trip")
		}
		if back.Count() != b.Count() {
			t.Fatalf("round trip count %d, want %d", back.Count(), b.Count())
		}
		for _, x := range []Indexer{ix, hix} {
			got := back.Quantiles(x, fuzzQs, nil)
			for i, q := range fuzzQs {
				want := b.Quantile(x, q)
				if !(got[i] == want || math.IsNaN(got[i]) && math.IsNaN(want)) {
					t.Fatalf("round trip q=%v: %v, want %v", q, got[i], want)
				}
			}
		}
		// Decoded bins behave like any other: add then subtract is exact.
		if b.Count() < math.MaxUint64/4 {
			c := b.Clone()
			c.AddBins(&back)
			if !c.SubBins(&back) || c.Count() != b.Count() {
				t.Fatalf("AddBins/SubBins of decoded bins: count %d, want %d", c.Count(), b.Count())
			}
		}
	})
}

// FuzzBinsOps interprets the input as a sequence of Add, Remove, AddBins and
// SubBins calls on two Bins and checks every bin against the map model after
// each call: no panic, no lost or invented count, whatever the sequence.
func FuzzBinsOps(f *testing.F) {
	f.Add([]byte{0, 128, 1, 0, 130, 2, 2, 0, 0, 3, 0, 0})
	f.Add([]byte{0, 10, 39, 0, 250, 39, 1, 10, 5, 4, 0, 0, 2, 0, 0, 3, 0, 0})
	f.Add(bytes.Repeat([]byte{0, 128, 255, 2, 1, 1}, 40))
	ix := mustIndexer(f, Kind{})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var a, b Bins
		ma, mb := newModel(), newModel()
		for len(ops) >= 3 {
			op, vb, nb := ops[0], ops[1], ops[2]
			ops = ops[3:]
			v := math.Exp(float64(int(vb)-128) / 4)
			switch {
			case vb == 0:
				v = 0
			case vb%7 == 0:
				v = -v
			}
			n := uint64(1 + nb%8)
			if nb >= 200 {
				n = uint64(1) << (nb % 40)
			}
			switch op % 5 {
			case 0:
				a.Add(ix, v, n)
				ma.add(ix, v, n)
			case 1:
				b.Add(ix, v, n)
				mb.add(ix, v, n)
			case 2:
				a.AddBins(&b)
				mergeModel(ma, mb, 1)
			case 3:
				if contains(ma, mb) {
					if !a.SubBins(&b) {
						t.Fatal("SubBins of contained bins returned false")
					}
					mergeModel(ma, mb, -1)
				}
			case 4:
				want := present(ma, ix, v) >= n
				if got := a.Remove(ix, v, n); got != want {
					t.Fatalf("Remove(%v, %d) = %v, model says %v", v, n, got, want)
				}
				removeModel(ma, ix, v, n)
			}
			equalModel(t, &a, ma)
			equalModel(t, &b, mb)
		}
	})
}

func mergeModel(dst, src *model, sign int) {
	for i, c := range src.pos {
		if sign > 0 {
			dst.pos[i] += c
		} else {
			dst.pos[i] -= c
		}
	}
	for i, c := range src.neg {
		if sign > 0 {
			dst.neg[i] += c
		} else {
			dst.neg[i] -= c
		}
	}
	if sign > 0 {
		dst.zero += src.zero
	} else {
		dst.zero -= src.zero
	}
}

func contains(big, small *model) bool {
	for i, c := range small.pos {
		if big.pos[i] < c {
			return false
		}
	}
	for i, c := range small.neg {
		if big.neg[i] < c {
			return false
		}
	}
	return big.zero >= small.zero
}

func present(m *model, ix Indexer, v float64) uint64 {
	switch {
	case v > ix.MinIndexableValue():
		return m.pos[ix.Index(v)]
	case v < -ix.MinIndexableValue():
		return m.neg[ix.Index(-v)]
	}
	return m.zero
}

func removeModel(m *model, ix Indexer, v float64, n uint64) {
	switch {
	case v > ix.MinIndexableValue():
		m.pos[ix.Index(v)] -= min(n, m.pos[ix.Index(v)])
	case v < -ix.MinIndexableValue():
		m.neg[ix.Index(-v)] -= min(n, m.neg[ix.Index(-v)])
	default:
		m.zero -= min(n, m.zero)
	}
}
