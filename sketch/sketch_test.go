package sketch

import (
	"errors"
	"math"
	"testing"
)

var conformanceKinds = []Kind{
	{},
	{RelativeAccuracy: 0.02},
	{Name: NameHDR},
	{Name: NameHDR, SigFigs: 3, Lowest: 1, Highest: 100_000_000},
}

// precision is the relative error a kind promises for integer data.
func precision(t testing.TB, k Kind) float64 {
	return mustIndexer(t, k).RelativeAccuracy()
}

// TestSketchConformance runs the same contract over every implementation.
func TestSketchConformance(t *testing.T) {
	for _, k := range conformanceKinds {
		t.Run(k.String(), func(t *testing.T) {
			s := mustNew(t, k)
			if !s.Kind().Equal(k) {
				t.Fatalf("Kind() = %v, want %v", s.Kind(), k)
			}
			if _, err := s.Quantile(0.5); !errors.Is(err, ErrEmpty) {
				t.Fatalf("Quantile on empty = %v, want ErrEmpty", err)
			}
			for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				if err := s.Add(v, 1); !errors.Is(err, ErrValue) {
					t.Fatalf("Add(%v) = %v, want ErrValue", v, err)
				}
			}
			if err := s.Add(10, 0); err != nil || s.Count() != 0 {
				t.Fatalf("Add(10, 0) = %v, Count %d; want a no-op", err, s.Count())
			}
			r := newRand(4)
			var raw []float64
			for i := 0; i < 5000; i++ {
				v := math.Round(math.Exp(math.Log(5000) + r.NormFloat64()))
				n := uint64(1 + r.IntN(2))
				if err := s.Add(v, n); err != nil {
					t.Fatalf("Add(%v, %d): %v", v, n, err)
				}
				for j := uint64(0); j < n; j++ {
					raw = append(raw, v)
				}
			}
			if s.Count() != uint64(len(raw)) {
				t.Fatalf("Count = %d, want %d", s.Count(), len(raw))
			}
			for _, q := range []float64{-0.01, 1.01, math.NaN()} {
				if _, err := s.Quantile(q); !errors.Is(err, ErrQuantile) {
					t.Fatalf("Quantile(%v) = %v, want ErrQuantile", q, err)
				}
			}
			sorted := sortedCopy(raw)
			acc := precision(t, k)
			for _, q := range []float64{0.5, 0.95, 0.99} {
				got, err := s.Quantile(q)
				if err != nil {
					t.Fatal(err)
				}
				// Either rank convention is within the promised error of an
				// exact sample: floor(q(n-1)) (DDSketch) or ceil(qn)-1 (HDR).
				lo := exactAtRank(sorted, q)
				hi := sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
				if relErr(got, lo) > acc && relErr(got, hi) > acc {
					t.Errorf("p%v = %v, exact %v..%v, error > %v", q*100, got, lo, hi, acc)
				}
			}

			// Round trip through bytes.
			enc, err := s.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			d, err := Decode(enc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			assertSameSketch(t, s, d)

			// Merge doubles every count and keeps the quantiles.
			m := mustNew(t, k)
			if err := m.Merge(s); err != nil {
				t.Fatal(err)
			}
			if err := m.Merge(d); err != nil {
				t.Fatal(err)
			}
			if m.Count() != 2*s.Count() {
				t.Fatalf("merged Count = %d, want %d", m.Count(), 2*s.Count())
			}
			p, _ := s.Quantile(0.95)
			if mp, _ := m.Quantile(0.95); relErr(mp, p) > acc {
				t.Fatalf("merged p95 %v, single %v", mp, p)
			}

			// Kind mismatch.
			for _, o := range conformanceKinds {
				if o.Equal(k) {
					continue
				}
				if err := s.Merge(mustNew(t, o)); !errors.Is(err, ErrKindMismatch) {
					t.Fatalf("Merge(%v) into %v = %v, want ErrKindMismatch", o, k, err)
				}
			}
			if err := s.Merge(nil); !errors.Is(err, ErrKindMismatch) {
				t.Fatalf("Merge(nil) = %v, want ErrKindMismatch", err)
			}

			s.Reset()
			if s.Count() != 0 {
				t.Fatalf("Count after Reset = %d", s.Count())
			}
			if _, err := s.Quantile(0.5); !errors.Is(err, ErrEmpty) {
				t.Fatalf("Quantile after Reset = %v, want ErrEmpty", err)
			}
		})
	}
}

func assertSameSketch(t *testing.T, want, got Sketch) {
	t.Helper()
	if !got.Kind().Equal(want.Kind()) {
		t.Fatalf("kind %v, want %v", got.Kind(), want.Kind())
	}
	if got.Count() != want.Count() {
		t.Fatalf("count %d, want %d", got.Count(), want.Count())
	}
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.95, 0.99, 1} {
		a, errA := want.Quantile(q)
		b, errB := got.Quantile(q)
		if (errA == nil) != (errB == nil) || errA == nil && a != b {
			t.Fatalf("q=%v: got %v (%v), want %v (%v)", q, b, errB, a, errA)
		}
	}
}

func TestDDSketchValues(t *testing.T) {
	s := mustNew(t, Kind{})
	for _, v := range []float64{-5, 0, 1e-320, math.MaxFloat64 / 2} {
		if err := s.Add(v, 1); err != nil {
			t.Errorf("Add(%v) = %v", v, err)
		}
	}
	if v, _ := s.Quantile(0); v >= -4.9 || v < -5.06 {
		t.Errorf("p0 = %v, want about -5", v)
	}
	if err := s.Add(math.MaxFloat64, 1); !errors.Is(err, ErrValue) {
		t.Errorf("Add(MaxFloat64) = %v, want ErrValue (above the mapping's range)", err)
	}
	if s.(*DDSketch).Library().GetCount() != 4 {
		t.Error("Library() does not expose the wrapped sketch")
	}
}

func TestHDRValues(t *testing.T) {
	s := mustNew(t, Kind{Name: NameHDR})
	for _, tt := range []struct {
		v     float64
		count uint64
		ok    bool
	}{{0, 1, true}, {1.9, 1, true}, {3_600_000, 1, true}, {3_600_001, 1, false}, {-1, 1, false}, {5, math.MaxUint64, false}} {
		err := s.Add(tt.v, tt.count)
		if (err == nil) != tt.ok || !tt.ok && !errors.Is(err, ErrValue) {
			t.Errorf("Add(%v, %d) = %v, want ok=%v", tt.v, tt.count, err, tt.ok)
		}
	}
	if v, _ := s.Quantile(0.5); v != 1 {
		t.Errorf("median of {0, 1.9, 3.6e6} = %v, want 1 (HDR truncates to integers)", v)
	}
	if s.(*HDR).Library().TotalCount() != 3 {
		t.Error("Library() does not expose the wrapped histogram")
	}
	big := mustNew(t, Kind{Name: NameHDR, Highest: math.MaxInt64})
	if err := big.Add(math.MaxInt64/2, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if err := big.Add(1, 1); !errors.Is(err, ErrValue) {
		t.Errorf("Add past MaxInt64 total = %v, want ErrValue", err)
	}
	if err := big.Merge(big); !errors.Is(err, ErrValue) {
		t.Errorf("Merge that overflows = %v, want ErrValue", err)
	}
}

// TestBinsToSketch checks the export is lossless: the sketch built from bins
// answers exactly what the bins answer (DDSketch) or equals a histogram fed
// the same values (HDR).
func TestBinsToSketch(t *testing.T) {
	for _, k := range conformanceKinds {
		t.Run(k.String(), func(t *testing.T) {
			ix := mustIndexer(t, k)
			direct := mustNew(t, k)
			var b Bins
			r := newRand(6)
			for i := 0; i < 3000; i++ {
				v := math.Floor(math.Exp(math.Log(300) + 1.5*r.NormFloat64()))
				if i%100 == 0 {
					v = 0
				}
				b.Add(ix, v, 1)
				if err := direct.Add(v, 1); err != nil {
					t.Fatal(err)
				}
			}
			s, err := b.ToSketch(k)
			if err != nil {
				t.Fatal(err)
			}
			assertSameSketch(t, direct, s)
			if k.normalized().Name == NameDDSketch {
				for _, q := range []float64{0, 0.5, 0.95, 0.99, 1} {
					if got, _ := s.Quantile(q); got != b.Quantile(ix, q) {
						t.Fatalf("q=%v: sketch %v, bins %v", q, got, b.Quantile(ix, q))
					}
				}
			} else if !s.(*HDR).Library().Equals(direct.(*HDR).Library()) {
				t.Fatal("HDR from bins differs from HDR fed the same values")
			}
		})
	}
	// HDR cannot hold negatives or values above Highest.
	hk := Kind{Name: NameHDR}
	ix := mustIndexer(t, hk)
	var neg, high Bins
	neg.Add(ix, -3, 1)
	high.Add(ix, 1e12, 1)
	for _, b := range []*Bins{&neg, &high} {
		if _, err := b.ToSketch(hk); !errors.Is(err, ErrValue) {
			t.Errorf("ToSketch(hdr) of out-of-range bins = %v, want ErrValue", err)
		}
	}
	var dd Bins
	dd.Add(mustIndexer(t, Kind{}), -3, 2)
	s, err := dd.ToSketch(Kind{})
	if err != nil || s.Count() != 2 {
		t.Fatalf("ToSketch(ddsketch) with negatives: %v, count %d", err, s.Count())
	}
	if _, err := dd.ToSketch(Kind{Name: "nope"}); !errors.Is(err, ErrKind) {
		t.Fatalf("ToSketch(bad kind) = %v, want ErrKind", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := func(k Kind) []byte {
		s := mustNew(t, k)
		_ = s.Add(42, 3)
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dd, hdr := good(Kind{}), good(Kind{Name: NameHDR})
	cases := map[string][]byte{
		"empty":          nil,
		"unknown kind":   {9, 1, 2},
		"dd truncated":   dd[:len(dd)/2],
		"hdr truncated":  hdr[:len(hdr)-3],
		"hdr short":      {kindByteHDR, 0x1c},
		"hdr bad length": append([]byte{kindByteHDR}, 0x1c, 0x84, 0x93, 0x14, 0x7f, 0xff, 0xff, 0xff),
		"dd garbage":     {kindByteDDSketch, 0xff, 0xff, 0xff},
		"dd no mapping":  {kindByteDDSketch},
		"hdr as dd":      append([]byte{kindByteDDSketch}, hdr[1:]...),
		"dd as hdr":      append([]byte{kindByteHDR}, dd[1:]...),
	}
	for name, b := range cases {
		if s, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, %v; want ErrCorrupt", name, s, err)
		}
	}
}
