package sketch

import (
	"errors"
	"math"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func TestKindStringParse(t *testing.T) {
	tests := []struct {
		in   string
		want Kind
		str  string
	}{
		{"", Kind{Name: NameDDSketch, RelativeAccuracy: 0.01}, "ddsketch:0.01"},
		{"ddsketch", Kind{Name: NameDDSketch, RelativeAccuracy: 0.01}, "ddsketch:0.01"},
		{"ddsketch:0.02", Kind{Name: NameDDSketch, RelativeAccuracy: 0.02}, "ddsketch:0.02"},
		{" ddsketch:0.005 ", Kind{Name: NameDDSketch, RelativeAccuracy: 0.005}, "ddsketch:0.005"},
		{"hdr", Kind{Name: NameHDR, SigFigs: 2, Lowest: 1, Highest: 3_600_000}, "hdr:2:1:3600000"},
		{"hdr:3", Kind{Name: NameHDR, SigFigs: 3, Lowest: 1, Highest: 3_600_000}, "hdr:3:1:3600000"},
		{"hdr:2:1000:60000000000", Kind{Name: NameHDR, SigFigs: 2, Lowest: 1000, Highest: 60_000_000_000}, "hdr:2:1000:60000000000"},
	}
	for _, tt := range tests {
		k, err := ParseKind(tt.in)
		if err != nil {
			t.Errorf("ParseKind(%q): %v", tt.in, err)
			continue
		}
		if k != tt.want {
			t.Errorf("ParseKind(%q) = %+v, want %+v", tt.in, k, tt.want)
		}
		if s := k.String(); s != tt.str {
			t.Errorf("ParseKind(%q).String() = %q, want %q", tt.in, s, tt.str)
		}
		if back, err := ParseKind(k.String()); err != nil || back != k {
			t.Errorf("ParseKind(String()) of %+v = %+v, %v", k, back, err)
		}
	}
	if s := (Kind{}).String(); s != "ddsketch:0.01" {
		t.Errorf("zero Kind String = %q", s)
	}
	if !(Kind{}).Equal(Kind{Name: NameDDSketch, RelativeAccuracy: 0.01}) || (Kind{}).Equal(Kind{Name: NameHDR}) {
		t.Error("Equal does not apply defaults")
	}
	if !(Kind{Name: NameHDR}).Equal(Kind{Name: NameHDR, RelativeAccuracy: 0.5, SigFigs: 2}) {
		t.Error("Equal must ignore the other family's fields")
	}
}

func TestKindInvalid(t *testing.T) {
	for _, s := range []string{
		"tdigest", "ddsketch:abc", "ddsketch:0", "ddsketch:-0.01", "ddsketch:1", "ddsketch:0.00001",
		"ddsketch:0.01:3", "hdr:0", "hdr:6", "hdr:x", "hdr:2:0", "hdr:2:10:15", "hdr:2:1:2:3",
		"hdr:5:1:9000000000000000000", "DDSKETCH", "ddsketch:NaN",
	} {
		if k, err := ParseKind(s); !errors.Is(err, ErrKind) {
			t.Errorf("ParseKind(%q) = %+v, %v; want ErrKind", s, k, err)
		}
	}
	for _, k := range []Kind{
		{Name: "x"}, {RelativeAccuracy: math.NaN()}, {RelativeAccuracy: 2},
		{Name: NameHDR, SigFigs: -1}, {Name: NameHDR, Lowest: -5}, {Name: NameHDR, Lowest: 1 << 60, SigFigs: 5, Highest: math.MaxInt64},
	} {
		if err := k.Validate(); !errors.Is(err, ErrKind) {
			t.Errorf("%+v.Validate() = %v, want ErrKind", k, err)
		}
		if _, err := k.Indexer(); !errors.Is(err, ErrKind) {
			t.Errorf("%+v.Indexer() = %v, want ErrKind", k, err)
		}
	}
}

// TestIndexerAccuracy verifies the cubically interpolated mapping keeps
// DDSketch's guarantee: every value's bin representative is within the
// relative accuracy, over the whole indexable range.
func TestIndexerAccuracy(t *testing.T) {
	for _, acc := range []float64{0.01, 0.02, 0.001} {
		ix := mustIndexer(t, Kind{RelativeAccuracy: acc})
		if _, ok := ix.(*cubicIndexer); !ok {
			t.Fatalf("ddsketch Indexer is %T, want the cubic mapping", ix)
		}
		if got := ix.RelativeAccuracy(); math.Abs(got-acc) > 1e-12 {
			t.Fatalf("RelativeAccuracy %v, want %v", got, acc)
		}
		r := newRand(1)
		worst := 0.0
		check := func(v float64) {
			e := relErr(ix.Value(ix.Index(v)), v)
			worst = max(worst, e)
			if e > acc*(1+1e-9) {
				t.Fatalf("acc %v: value %v -> bin %d -> %v, relative error %v", acc, v, ix.Index(v), ix.Value(ix.Index(v)), e)
			}
		}
		for i := 0; i < 200000; i++ {
			check(math.Exp(r.Float64()*1400 - 700)) // e^-700 .. e^700
		}
		for i := 0; i < 50000; i++ {
			check(1 + r.Float64()*1e4) // dense over typical latencies
		}
		// Bin edges: the largest value of bin i and the smallest of bin i+1.
		for i := -2000; i < 2000; i++ {
			v := ix.Value(i)
			check(v)
			check(math.Nextafter(v, 0))
		}
		if worst < acc*0.9 {
			t.Errorf("acc %v: worst error %v: the test does not reach the bound", acc, worst)
		}
	}
}

// TestHDRIndexerMatchesHdrHistogram checks that the HDR indexer's bins are
// exactly HdrHistogram's: same counts index, same value equivalence, and the
// same reported value.
func TestHDRIndexerMatchesHdrHistogram(t *testing.T) {
	for _, k := range []Kind{
		{Name: NameHDR},
		{Name: NameHDR, SigFigs: 1},
		{Name: NameHDR, SigFigs: 3, Lowest: 1, Highest: 1 << 40},
		{Name: NameHDR, SigFigs: 2, Lowest: 1000, Highest: 3_600_000_000},
		{Name: NameHDR, SigFigs: 5, Lowest: 1, Highest: 1 << 20},
	} {
		t.Run(k.String(), func(t *testing.T) {
			ix := mustIndexer(t, k)
			n := k.normalized()
			// Reported value: one sample, p100.
			one := hdrhistogram.New(n.Lowest, n.Highest, n.SigFigs)
			for _, v := range []int64{n.Lowest, 99, 12345, n.Highest / 3, n.Highest} {
				one.Reset()
				if err := one.RecordValue(v); err != nil {
					t.Fatal(err)
				}
				if got, want := ix.Value(ix.Index(float64(v))), float64(one.ValueAtQuantile(100)); got != want {
					t.Fatalf("Value(Index(%d)) = %v, HdrHistogram reports %v", v, got, want)
				}
			}
			h := hdrhistogram.New(n.Lowest, n.Highest, n.SigFigs)
			g := newHDRGeometry(n)
			snap := h.Export()
			if len(snap.Counts) != g.countsLen {
				t.Fatalf("countsLen %d, library %d", g.countsLen, len(snap.Counts))
			}
			if want := math.Nextafter(float64(uint64(1)<<g.unitMag), 0); ix.MinIndexableValue() != want {
				t.Fatalf("MinIndexableValue %v, want %v", ix.MinIndexableValue(), want)
			}
			// Record the same values in a library histogram and in per-index
			// counts of our own; the two counts arrays must be identical.
			mine := make([]int64, g.countsLen)
			r := newRand(2)
			for i := 0; i < 20000; i++ {
				var v int64
				if i < 3000 {
					v = int64(i) << g.unitMag // every small bin
				} else {
					v = int64(math.Exp(r.Float64() * math.Log(float64(n.Highest))))
				}
				if err := h.RecordValue(v); err != nil {
					t.Fatal(err)
				}
				idx := ix.Index(float64(v) + 0.25) // fractions truncate, as the library's int64
				mine[idx]++
				if idx == 0 {
					continue // our zero bin
				}
				// Value is the highest value equivalent to v: what HdrHistogram's
				// ValueAtQuantile reports for v.
				w := int64(ix.Value(idx))
				if w < v || !h.ValuesAreEquivalent(v, w) || h.ValuesAreEquivalent(v, w+1) {
					t.Fatalf("bin of %d ends at %d, not at HdrHistogram's equivalence edge", v, w)
				}
				if e := relErr(ix.Value(idx), float64(v)); n.Lowest == 1 && e > ix.RelativeAccuracy() {
					t.Fatalf("value %d reported as %v: error %v > RelativeAccuracy %v", v, ix.Value(idx), e, ix.RelativeAccuracy())
				}
			}
			for j, c := range h.Export().Counts {
				if c != mine[j] {
					t.Fatalf("counts index %d: HdrHistogram %d, Indexer %d", j, c, mine[j])
				}
			}
			// Out-of-range inputs stay finite and in order.
			if ix.Index(math.MaxFloat64) < ix.Index(float64(n.Highest)) || ix.Index(-1) != 0 || ix.Value(-3) != 0 {
				t.Fatal("out-of-range inputs misbehave")
			}
		})
	}
}
