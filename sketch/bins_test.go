package sketch

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

func TestBinsZeroValue(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var b Bins
	if b.Count() != 0 || b.Bytes() != 0 {
		t.Fatalf("zero Bins: Count %d Bytes %d, want 0 0", b.Count(), b.Bytes())
	}
	if q := b.Quantile(ix, 0.5); !math.IsNaN(q) {
		t.Fatalf("empty Quantile = %v, want NaN", q)
	}
	if q := Quantile(ix, 0.5, &b, nil); !math.IsNaN(q) {
		t.Fatalf("empty union Quantile = %v, want NaN", q)
	}
	b.Add(ix, 10, 1)
	if b.Count() != 1 || b.Bytes() == 0 {
		t.Fatalf("after Add: Count %d Bytes %d", b.Count(), b.Bytes())
	}
	b.Reset()
	if b.Count() != 0 || b.Bytes() != 0 {
		t.Fatalf("after Reset: Count %d Bytes %d, want 0 0 (memory released)", b.Count(), b.Bytes())
	}
}

func TestBinsInvalidInputs(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var b Bins
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		b.Add(ix, v, 3)
		if err := CheckValue(v); !errors.Is(err, ErrValue) {
			t.Errorf("CheckValue(%v) = %v, want ErrValue", v, err)
		}
	}
	b.Add(ix, 5, 0)
	if b.Count() != 0 {
		t.Fatalf("NaN/Inf/n=0 were recorded: Count %d", b.Count())
	}
	if err := CheckValue(-3.5); err != nil {
		t.Errorf("CheckValue(-3.5) = %v", err)
	}
	b.Add(ix, 5, 1)
	for _, q := range []float64{-0.1, 1.1, math.NaN()} {
		if v := b.Quantile(ix, q); !math.IsNaN(v) {
			t.Errorf("Quantile(%v) = %v, want NaN", q, v)
		}
	}
}

// TestBinsModel drives Add, Remove, AddBins and SubBins with random values
// (positive, negative, zero, tiny, huge) and checks every bin against a map.
func TestBinsModel(t *testing.T) {
	for _, k := range []Kind{{}, {Name: NameHDR, SigFigs: 3, Highest: 1 << 40}} {
		t.Run(k.String(), func(t *testing.T) {
			ix := mustIndexer(t, k)
			r := newRand(7)
			value := func() float64 {
				switch r.IntN(10) {
				case 0:
					return 0
				case 1:
					return -math.Exp(r.NormFloat64() * 3)
				case 2:
					return ix.MinIndexableValue() / 2 // goes to the zero count
				case 3:
					return 1e12 * r.Float64()
				}
				return math.Exp(4 + r.NormFloat64())
			}
			var a, b Bins
			ma, mb := newModel(), newModel()
			for step := 0; step < 4000; step++ {
				v, n := value(), uint64(1+r.IntN(3))
				if r.IntN(50) == 0 {
					n = uint64(1) << (8 + r.IntN(30)) // force width promotions
				}
				switch r.IntN(8) {
				case 0, 1, 2:
					a.Add(ix, v, n)
					ma.add(ix, v, n)
				case 3, 4:
					b.Add(ix, v, n)
					mb.add(ix, v, n)
				case 5:
					if r.IntN(20) == 0 {
						a.AddBins(&b)
						for i, c := range mb.pos {
							ma.pos[i] += c
						}
						for i, c := range mb.neg {
							ma.neg[i] += c
						}
						ma.zero += mb.zero
						if !a.SubBins(&b) {
							t.Fatal("SubBins of just-added bins reported a clamp")
						}
						for i, c := range mb.pos {
							ma.pos[i] -= c
						}
						for i, c := range mb.neg {
							ma.neg[i] -= c
						}
						ma.zero -= mb.zero
					}
				case 6:
					// Remove something that is there.
					for i, c := range ma.pos {
						if c > 0 {
							if !a.Remove(ix, ix.Value(i), 1) {
								t.Fatalf("Remove of a present value %v reported a clamp", ix.Value(i))
							}
							ma.pos[i]--
						}
						break
					}
				case 7:
					a.Add(ix, v, n)
					ma.add(ix, v, n)
					if !a.Remove(ix, v, n) {
						t.Fatalf("Remove(%v, %d) right after Add reported a clamp", v, n)
					}
					ma.add(ix, v, 0)
					switch {
					case v > ix.MinIndexableValue():
						ma.pos[ix.Index(v)] -= n
					case v < -ix.MinIndexableValue():
						ma.neg[ix.Index(-v)] -= n
					default:
						ma.zero -= n
					}
				}
				if step%97 == 0 {
					equalModel(t, &a, ma)
					equalModel(t, &b, mb)
				}
			}
			equalModel(t, &a, ma)
			equalModel(t, &b, mb)
			if a.pos.shift == 0 {
				t.Fatal("no width promotion happened; the test does not cover it")
			}
		})
	}
}

func TestBinsWidthPromotion(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var b Bins
	steps := []struct {
		add   uint64
		shift uint8
	}{{255, 0}, {1, 1}, {math.MaxUint16 - 256, 1}, {1, 2}, {math.MaxUint32 - math.MaxUint16 - 1, 2}, {1, 3}}
	var total uint64
	for _, s := range steps {
		b.Add(ix, 100, s.add)
		b.Add(ix, 300, 1) // a second bin must survive the re-encoding
		total += s.add
		if b.pos.shift != s.shift {
			t.Fatalf("after %d in one bin: width 2^%d bytes, want 2^%d", total, b.pos.shift, s.shift)
		}
		if got := b.pos.get(ix.Index(100) - b.pos.off); got != total {
			t.Fatalf("bin holds %d, want %d", got, total)
		}
	}
	if b.Count() != total+uint64(len(steps)) {
		t.Fatalf("Count %d, want %d", b.Count(), total+uint64(len(steps)))
	}
	// Saturation instead of wrap-around.
	b.Add(ix, 100, math.MaxUint64)
	if got := b.pos.get(ix.Index(100) - b.pos.off); got != math.MaxUint64 {
		t.Fatalf("bin after overflow = %d, want saturation at MaxUint64", got)
	}
}

func TestBinsSubBinsClamps(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var agg, slot, other Bins
	slot.Add(ix, 10, 5)
	slot.Add(ix, -10, 2)
	slot.Add(ix, 0, 1)
	agg.AddBins(&slot)
	agg.Add(ix, 20, 3)
	other.Add(ix, 10, 6) // more than agg holds in that bin
	other.Add(ix, 1e6, 1)
	if agg.SubBins(&other) {
		t.Fatal("SubBins of counts not contained in the aggregate returned true")
	}
	if got := agg.pos.get(ix.Index(10) - agg.pos.off); got != 0 {
		t.Fatalf("clamped bin = %d, want 0", got)
	}
	if agg.Count() != 3+2+1 {
		t.Fatalf("Count after clamped SubBins = %d, want 6", agg.Count())
	}
	var neg Bins
	neg.Add(ix, -3, 1)
	var none Bins
	none.Add(ix, 1, 1)
	if none.SubBins(&neg) {
		t.Fatal("SubBins of negatives from bins without a negative range returned true")
	}
	// Emptying an aggregate releases its memory.
	var a2 Bins
	a2.AddBins(&slot)
	if !a2.SubBins(&slot) || a2.Count() != 0 || a2.Bytes() != 0 {
		t.Fatalf("aggregate after its last slot left: Count %d Bytes %d, want 0 0", a2.Count(), a2.Bytes())
	}
	if !a2.SubBins(nil) || !a2.Remove(ix, math.NaN(), 1) {
		t.Fatal("SubBins(nil) / Remove(NaN) must be no-ops returning true")
	}
	if a2.Remove(ix, 5, 1) {
		t.Fatal("Remove from empty Bins returned true")
	}
}

func TestBinsSelfAddSub(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var b Bins
	b.Add(ix, 1, 1)
	b.Add(ix, 100, 2)
	b.AddBins(&b)
	if b.Count() != 6 || b.Quantile(ix, 1) != ix.Value(ix.Index(100)) {
		t.Fatalf("b.AddBins(b): Count %d, want 6", b.Count())
	}
	b.SubBins(&b)
	if b.Count() != 0 {
		t.Fatalf("b.SubBins(b): Count %d, want 0", b.Count())
	}
}

// TestBinsQuantileMatchesDDSketch checks that Bins with the cubic mapping
// answer exactly what sketches-go answers for the same mapping and data,
// including negative values and zeros.
func TestBinsQuantileMatchesDDSketch(t *testing.T) {
	m, err := mapping.NewCubicallyInterpolatedMapping(0.01)
	if err != nil {
		t.Fatal(err)
	}
	for _, mix := range []struct {
		name          string
		negative, zer int // out of 10
	}{{"positive", 0, 0}, {"with-zeros", 0, 2}, {"mixed-sign", 4, 1}, {"negative", 10, 0}} {
		t.Run(mix.name, func(t *testing.T) {
			dd := ddsketch.NewDDSketch(m, store.NewDenseStore(), store.NewDenseStore())
			var b Bins
			r := newRand(11)
			for i := 0; i < 20000; i++ {
				v := math.Exp(r.NormFloat64() * 2)
				switch x := r.IntN(10); {
				case x < mix.negative:
					v = -v
				case x < mix.negative+mix.zer:
					v = 0
				}
				n := uint64(1 + r.IntN(3))
				if err := dd.AddWithCount(v, float64(n)); err != nil {
					t.Fatal(err)
				}
				b.Add(m, v, n)
			}
			qs := []float64{0, 0.001, 0.01, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 0.95, 0.99, 0.999, 1}
			got := b.Quantiles(m, qs, nil)
			for i, q := range qs {
				want, err := dd.GetValueAtQuantile(q)
				if err != nil {
					t.Fatal(err)
				}
				if v := b.Quantile(m, q); v != want {
					t.Errorf("Quantile(%v) = %v, sketches-go %v", q, v, want)
				}
				if got[i] != want {
					t.Errorf("Quantiles[%v] = %v, sketches-go %v", q, got[i], want)
				}
			}
		})
	}
}

func TestBinsQuantilesUnsortedAndInvalid(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var b Bins
	r := newRand(3)
	for i := 0; i < 5000; i++ {
		b.Add(ix, math.Exp(r.NormFloat64()), 1)
	}
	qs := []float64{0.99, 0.5, 2, 0.95, -1, 0}
	got := b.Quantiles(ix, qs, make([]float64, 0, len(qs)))
	for i, q := range qs {
		want := b.Quantile(ix, q)
		if !(got[i] == want || math.IsNaN(got[i]) && math.IsNaN(want)) {
			t.Errorf("Quantiles[%v] = %v, Quantile %v", q, got[i], want)
		}
	}
	sorted := []float64{-1, 0.5, 0.95, 0.99, 2}
	got = b.Quantiles(ix, sorted, []float64{42})
	if got[0] != 42 || len(got) != 1+len(sorted) {
		t.Fatalf("Quantiles must append to dst: %v", got)
	}
	for i, q := range sorted {
		want := b.Quantile(ix, q)
		if !(got[i+1] == want || math.IsNaN(got[i+1]) && math.IsNaN(want)) {
			t.Errorf("sorted Quantiles[%v] = %v, Quantile %v", q, got[i+1], want)
		}
	}
}

func TestUnionQuantileMatchesMerged(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	r := newRand(5)
	parts := make([]*Bins, 6)
	var merged Bins
	for i := range parts {
		parts[i] = new(Bins)
		for j := 0; j < 300; j++ {
			v := math.Exp(float64(i) + r.NormFloat64())
			if r.IntN(10) == 0 {
				v = -v
			}
			if r.IntN(20) == 0 {
				v = 0
			}
			parts[i].Add(ix, v, 1)
		}
		merged.AddBins(parts[i])
	}
	parts = append(parts, nil, new(Bins)) // nil and empty entries are skipped
	for _, q := range []float64{0, 0.05, 0.07, 0.1, 0.5, 0.95, 0.99, 1} {
		if got, want := Quantile(ix, q, parts...), merged.Quantile(ix, q); got != want {
			t.Errorf("Quantile(%v) of union = %v, merged %v", q, got, want)
		}
	}
	if v := Quantile(ix, 1.5, parts...); !math.IsNaN(v) {
		t.Errorf("union Quantile(1.5) = %v, want NaN", v)
	}
	for _, qs := range [][]float64{
		{0, 0.05, 0.07, 0.1, 0.5, 0.95, 0.99, 1}, // sorted: one pass
		{0.99, 0.5, 0.07, 1, 0, 0.95},            // unsorted: restarts
		{0.5, 0.5, 2, 0.9},                       // invalid q
	} {
		got := QuantilesOf(ix, qs, []float64{-1}, parts...)
		if len(got) != len(qs)+1 || got[0] != -1 {
			t.Fatalf("QuantilesOf must append to dst: %v", got)
		}
		for i, q := range qs {
			want := merged.Quantile(ix, q)
			if !(got[i+1] == want || math.IsNaN(want) && math.IsNaN(got[i+1])) {
				t.Errorf("QuantilesOf(%v)[%v] = %v, merged %v", qs, q, got[i+1], want)
			}
		}
	}
	// A union wider than one scan chunk.
	var wide, wideMerged Bins
	for v := 1e-3; v < 1e9; v *= 1.003 {
		wide.Add(ix, v, 1)
	}
	wideMerged.AddBins(&wide)
	wideMerged.AddBins(parts[0])
	if wide.pos.n() <= unionChunk {
		t.Fatalf("wide bins span %d <= one chunk: test does not cover chunking", wide.pos.n())
	}
	for _, q := range []float64{0, 0.3, 0.6, 0.99, 1} {
		if got, want := Quantile(ix, q, &wide, parts[0]), wideMerged.Quantile(ix, q); got != want {
			t.Errorf("chunked union Quantile(%v) = %v, merged %v", q, got, want)
		}
	}
}

func TestBinsCloneCompact(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var b Bins
	r := newRand(9)
	for i := 0; i < 1000; i++ {
		b.Add(ix, math.Exp(3+r.NormFloat64()), 1)
	}
	b.Add(ix, -2, 1)
	b.Add(ix, 0, 4)
	c := b.Clone()
	before := b.Bytes()
	b.Compact()
	if b.Bytes() > before {
		t.Fatalf("Compact grew Bytes %d -> %d", before, b.Bytes())
	}
	for _, q := range []float64{0, 0.001, 0.5, 0.95, 1} {
		if b.Quantile(ix, q) != c.Quantile(ix, q) {
			t.Fatalf("clone differs at q=%v", q)
		}
	}
	bb, _ := b.MarshalBinary()
	cb, _ := c.MarshalBinary()
	if !slices.Equal(bb, cb) {
		t.Fatal("clone and compacted original encode differently")
	}
	c.Add(ix, 1e9, 1) // the clone is independent
	if b.Count() == c.Count() {
		t.Fatal("Clone shares state with the original")
	}
	// Subtracting everything but the negatives leaves an empty positive side
	// that Compact releases.
	d := b.Clone()
	var neg Bins
	neg.Add(ix, -2, 1)
	d.SubBins(&neg)
	d.Compact()
	if d.neg != nil {
		t.Fatal("Compact kept an empty negative range")
	}
}

func TestBinsHugeSpanCollapses(t *testing.T) {
	// A custom Indexer with a huge index range must not make Bins allocate
	// without bound: beyond MaxSpan, values collapse into the edge bins.
	ix := linearIndexer{}
	var b Bins
	b.Add(ix, 1, 1)
	b.Add(ix, 1e15, 1)
	b.Add(ix, 1e-15+1e-300, 1)
	if b.Bytes() > 2*MaxSpan {
		t.Fatalf("Bytes %d, want <= %d", b.Bytes(), 2*MaxSpan)
	}
	if b.Count() != 3 {
		t.Fatalf("Count %d, want 3", b.Count())
	}
	var c Bins
	c.Add(ix, 1e14, 2)
	b.AddBins(&c)
	if b.Count() != 5 || b.Bytes() > 2*MaxSpan {
		t.Fatalf("after AddBins: Count %d Bytes %d", b.Count(), b.Bytes())
	}
}

// linearIndexer maps v to int(v): a pathological Indexer for span tests.
type linearIndexer struct{}

func (linearIndexer) Index(v float64) int        { return int(v) }
func (linearIndexer) Value(i int) float64        { return float64(i) }
func (linearIndexer) MinIndexableValue() float64 { return 1e-300 }
func (linearIndexer) RelativeAccuracy() float64  { return 1 }

func TestBinsAllocs(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var b, agg Bins
	vals := lognormalSlots(1, 1, 1000)[0]
	for _, v := range vals {
		b.Add(ix, v, 1)
	}
	agg.AddBins(&b)
	agg.AddBins(&b)
	qs := []float64{0.5, 0.95, 0.99}
	dst := make([]float64, 0, len(qs))
	i := 0
	cases := map[string]func(){
		"Add":      func() { b.Add(ix, vals[i%len(vals)], 1); i++ },
		"Remove":   func() { b.Remove(ix, vals[0], 1); b.Add(ix, vals[0], 1) },
		"Quantile": func() { _ = agg.Quantile(ix, 0.95) },
		"Quantiles": func() {
			dst = agg.Quantiles(ix, qs, dst[:0])
		},
		"union":  func() { _ = Quantile(ix, 0.95, &b, &agg) },
		"AddSub": func() { agg.AddBins(&b); agg.SubBins(&b) },
		"Count":  func() { _ = agg.Count() },
		"Bytes":  func() { _ = agg.Bytes() },
	}
	for name, f := range cases {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, a)
		}
	}
}

// TestBinsSubBinsShrinks checks that an aggregate gives back the range a
// wide slot made it grow to once that slot leaves.
func TestBinsSubBinsShrinks(t *testing.T) {
	ix := mustIndexer(t, Kind{})
	var agg, wide, narrow Bins
	for v := 1.0; v < 1e6; v *= 1.01 {
		wide.Add(ix, v, 1)
	}
	for v := 40.0; v < 60; v++ {
		narrow.Add(ix, v, 3)
	}
	agg.AddBins(&wide)
	agg.AddBins(&narrow)
	grown := agg.Bytes()
	if !agg.SubBins(&wide) {
		t.Fatal("SubBins of a contained slot returned false")
	}
	if agg.Bytes() > grown/4 {
		t.Fatalf("aggregate kept %d of %d bytes after the wide slot left (narrow slot alone: %d)", agg.Bytes(), grown, narrow.Bytes())
	}
	for _, q := range []float64{0, 0.5, 1} {
		if agg.Quantile(ix, q) != narrow.Quantile(ix, q) {
			t.Fatalf("q=%v after shrink: %v, want %v", q, agg.Quantile(ix, q), narrow.Quantile(ix, q))
		}
	}
	agg.AddBins(&wide) // and it can grow again
	if agg.Count() != wide.Count()+narrow.Count() {
		t.Fatalf("Count after regrowth %d", agg.Count())
	}
}
