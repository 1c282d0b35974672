package sketch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch/mapping"
)

// cubicPair returns the shared DDSketch indexer of acc and a fresh sketches-go mapping of
// the same accuracy: the oracle its Index must match bit for bit.
func cubicPair(t testing.TB, acc float64) (*cubicIndexer, *mapping.CubicallyInterpolatedMapping) {
	t.Helper()
	ix := mustIndexer(t, Kind{RelativeAccuracy: acc})
	c, ok := ix.(*cubicIndexer)
	if !ok {
		t.Fatalf("ddsketch Indexer is %T, want *cubicIndexer", ix)
	}
	m, err := mapping.NewCubicallyInterpolatedMapping(acc)
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

// TestCubicIndexMatchesMapping holds the table-driven Index to sketches-go's
// CubicallyInterpolatedMapping.Index: every bucket edge of every octave (±3 ulps), every
// bin boundary the mapping reports, random values over the whole float64 range and the
// special values (0, subnormals, negatives, ±Inf, NaN, the extremes), at several accuracies.
func TestCubicIndexMatchesMapping(t *testing.T) {
	for _, acc := range []float64{0.01, 0.02, 0.005, 0.05, 0.001, 1e-4} {
		c, m := cubicPair(t, acc)
		n := 0
		check := func(v float64) {
			n++
			if got, want := c.Index(v), m.Index(v); got != want {
				t.Fatalf("acc %v: Index(%v) [%#x] = %d, mapping says %d", acc, v, math.Float64bits(v), got, want)
			}
		}
		for _, v := range []float64{0, math.Copysign(0, -1), 5e-324, 2.2250738585072009e-308, math.SmallestNonzeroFloat64,
			0x1p-1022, math.MaxFloat64, -1, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(),
			m.MinIndexableValue(), math.Nextafter(m.MinIndexableValue(), 0), math.Nextafter(m.MinIndexableValue(), 1),
			m.MaxIndexableValue(), math.Nextafter(m.MaxIndexableValue(), math.Inf(1)), 1, 2, 0.5, 1000, 33.3} {
			check(v)
			check(v) // once to build the octave, once through it
		}
		// Every bucket edge of every octave at 1% (a stride of octaves at the other
		// accuracies, and under the race detector), one ulp either side.
		step := uint64(1)
		if acc != 0.01 {
			step = 5
		}
		if raceEnabled || testing.Short() {
			step *= 16
		}
		for e := uint64(1); e <= 2046; e += step {
			for j := range uint64(1<<cubicBits + 1) {
				edge := e<<52 + j<<(52-cubicBits)
				for d := uint64(0); d <= 2; d++ {
					if b := edge + d - 1; b>>52 >= 1 && b>>52 <= 2046 {
						check(math.Float64frombits(b))
					}
				}
			}
		}
		// The mapping's own bin boundaries from 1e-9 to 1e12: the values where its index
		// changes, found by bisection on the float64 bits, and their neighbours.
		first, last := m.Index(1e-9), m.Index(1e12)
		stride := max(1, (last-first)/20_000)
		if raceEnabled {
			stride *= 10
		} // every boundary at 1%, a sample at finer accuracies
		for i := first; i < last; i += stride {
			lo, hi := math.Float64bits(m.LowerBound(i)*(1-1e-9)), math.Float64bits(m.LowerBound(i+1)*(1+1e-9))
			if m.Index(math.Float64frombits(lo)) > i || m.Index(math.Float64frombits(hi)) <= i {
				continue
			}
			for hi-lo > 1 { // m.Index(lo) <= i < m.Index(hi)
				mid := lo + (hi-lo)/2
				if m.Index(math.Float64frombits(mid)) <= i {
					lo = mid
				} else {
					hi = mid
				}
			}
			for d := uint64(0); d <= 4; d++ {
				check(math.Float64frombits(hi + d - 2))
			}
		}
		r := rand.New(rand.NewPCG(19, uint64(acc*1e6)))
		rounds := 200_000
		if raceEnabled {
			rounds = 20_000
		}
		for range rounds {
			check(math.Float64frombits(r.Uint64()))                                           // any bits: every exponent, sign, NaN
			check(math.Exp(3.5 + 0.8*r.NormFloat64()))                                        // latencies
			check(math.Float64frombits(r.Uint64N(1<<52) | 1023<<52 + uint64(r.IntN(40))<<52)) // 1 .. 2^40
		}
		t.Logf("acc %v: %d values agree", acc, n)
	}
}

// TestCubicIndexTableCoverage: at 1% most values take the table (the point of it), and
// accuracies too fine for byte offsets keep the formula alone.
func TestCubicIndexTableCoverage(t *testing.T) {
	c, _ := cubicPair(t, 0.01)
	o := c.buildOctave(1023 + 5)
	fallback := 0
	for _, off := range o.off {
		if off == cubicFallback {
			fallback++
		}
	}
	if frac := float64(fallback) / float64(len(o.off)); frac > 0.1 {
		t.Errorf("%d of %d buckets fall back to the formula (%.1f%%), want at most 10%%", fallback, len(o.off), 100*frac)
	}
	if f, _ := cubicPair(t, 1e-4); f.table {
		t.Errorf("accuracy 1e-4 (%d bins an octave) got a byte-offset table", cubicOctaveBins(&f.CubicallyInterpolatedMapping))
	}
	if a, b := mustIndexer(t, Kind{}), mustIndexer(t, Kind{RelativeAccuracy: 0.01}); a != b {
		t.Error("Kind.Indexer builds a new DDSketch indexer per call, want one shared per accuracy")
	}
}

// FuzzCubicIndex: for any float64 bits and accuracy, the table-driven Index is the mapping's.
func FuzzCubicIndex(f *testing.F) {
	for _, v := range []float64{0, 1, 33.3, 1e-300, 1e300, -5, math.MaxFloat64, 5e-324, math.Inf(1), math.NaN()} {
		f.Add(math.Float64bits(v), uint8(0))
	}
	f.Add(uint64(0x4040000000000000), uint8(3))
	accs := []float64{0.01, 0.02, 0.005, 0.05, 0.001, 0.1, 0.0025, 1e-4}
	f.Fuzz(func(t *testing.T, bits uint64, a uint8) {
		acc := accs[int(a)%len(accs)]
		c, m := cubicPair(t, acc)
		v := math.Float64frombits(bits)
		if got, want := c.Index(v), m.Index(v); got != want {
			t.Fatalf("acc %v: Index(%v) [%#x] = %d, mapping says %d", acc, v, bits, got, want)
		}
	})
}

// BenchmarkCubicIndex: the table-driven Index against the sketches-go mapping's, on lognormal
// latencies.
func BenchmarkCubicIndex(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	vals := make([]float64, 4096)
	for i := range vals {
		vals[i] = math.Exp(3.5 + 0.8*r.NormFloat64())
	}
	c, m := cubicPair(b, 0.01)
	var sink int
	b.Run("ours", func(b *testing.B) {
		for i := range b.N {
			sink += c.Index(vals[i&4095])
		}
	})
	b.Run("mapping", func(b *testing.B) {
		for i := range b.N {
			sink += m.Index(vals[i&4095])
		}
	})
	_ = sink
}

// TestCubicIndexConcurrentBuild: goroutines indexing values of unbuilt octaves at once all
// get the mapping's index (the race detector checks the tables' publication).
func TestCubicIndexConcurrentBuild(t *testing.T) {
	m, err := mapping.NewCubicallyInterpolatedMapping(0.01)
	if err != nil {
		t.Fatal(err)
	}
	c := newCubicIndexer(m)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 5_000 {
				v := math.Exp(r.NormFloat64() * 20)
				if got, want := c.Index(v), m.Index(v); got != want {
					errs <- fmt.Sprintf("Index(%v) = %d, mapping says %d", v, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
