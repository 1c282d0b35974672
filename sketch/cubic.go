package sketch

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/DataDog/sketches-go/ddsketch/mapping"
)

// cubicIndexer is the DDSketch Indexer: sketches-go's CubicallyInterpolatedMapping with a
// faster Index that returns exactly the mapping's own index for every float64 (issue #19:
// the index was a sixth of an event's cost on the ingest hot path).
//
// The mapping's index is floor(approximateLog(v) × multiplier), a cubic polynomial of the
// mantissa plus the exponent, evaluated in float64. cubicIndexer splits each octave (one
// exponent) into 1<<cubicBits buckets by the mantissa's top bits and records, per bucket,
// the index every value of the bucket gets, when that is one index: the polynomial is
// strictly increasing, so when the bucket's two end values evaluate at least cubicMargin
// away from any integer on both sides, every value between them has the same index (the
// float64 evaluation is within about 1e-11 of the exact polynomial, far inside the margin).
// A bucket that holds a bin boundary is marked, and its values take the mapping's own
// Index. So Index is one table load for about 95% of values at 1% accuracy, and the
// mapping's formula for the rest, bit-identical either way (TestCubicIndexMatchesMapping,
// FuzzCubicIndex).
//
// An octave's table (1 KiB) is built on the first value in it, at most 2046 per indexer;
// a latency series touches a handful. Indexers are shared per accuracy (cubicIndexers).
type cubicIndexer struct {
	mapping.CubicallyInterpolatedMapping                                   // by value: Bins.Add reads its MinIndexableValue beside the table
	table                                bool                              // false when the accuracy is too fine for uint8 offsets
	octaves                              [2047]atomic.Pointer[cubicOctave] // by biased exponent
}

// cubicBits is how many top mantissa bits pick a bucket of an octave.
const cubicBits = 10

// cubicMargin is how far from an integer a bucket's end values must evaluate for the
// bucket to hold one index: thousands of times the float64 evaluation's error.
const cubicMargin = 1e-7

// cubicFallback marks a bucket whose values take the mapping's formula.
const cubicFallback = 0xff

// cubicOctave is one exponent's buckets: index = base + off[bucket] unless off is
// cubicFallback.
type cubicOctave struct {
	base int32
	off  [1 << cubicBits]uint8
}

// cubicIndexers shares one cubicIndexer per relative accuracy (float64 → *cubicIndexer):
// Kind.Indexer is called for every new series and every merged read, so a hit takes no lock.
// The cache is bounded; beyond it each call builds its own (correct, only slower to warm).
var (
	cubicIndexers  sync.Map
	cubicCached    atomic.Int32
	cubicIndexerMu sync.Mutex // serializes misses, so one accuracy gets one indexer
)

const maxCachedCubic = 64

func cubicFor(acc float64) (*cubicIndexer, error) {
	if c, ok := cubicIndexers.Load(acc); ok {
		return c.(*cubicIndexer), nil
	}
	cubicIndexerMu.Lock()
	defer cubicIndexerMu.Unlock()
	if c, ok := cubicIndexers.Load(acc); ok {
		return c.(*cubicIndexer), nil
	}
	m, err := mapping.NewCubicallyInterpolatedMapping(acc)
	if err != nil {
		return nil, err
	}
	c := newCubicIndexer(m)
	if cubicCached.Load() < maxCachedCubic {
		cubicIndexers.Store(acc, c)
		cubicCached.Add(1)
	}
	return c, nil
}

func newCubicIndexer(m *mapping.CubicallyInterpolatedMapping) *cubicIndexer {
	// An octave spans 1/log2(gamma) bins: about 35 at 1%. Offsets are bytes, so finer
	// accuracies (below about 0.14%) keep the formula alone.
	return &cubicIndexer{CubicallyInterpolatedMapping: *m, table: cubicOctaveBins(m) < cubicFallback-2}
}

// cubicOctaveBins is how many bins one octave of m spans, rounded up.
func cubicOctaveBins(m *mapping.CubicallyInterpolatedMapping) int {
	return m.Index(0x1p1) - m.Index(0x1p0) + 1
}

// Index returns the mapping's index of v (see cubicIndexer); any v, as the mapping takes.
// Bins.Add repeats its table path inline.
func (c *cubicIndexer) Index(v float64) int {
	b := math.Float64bits(v)
	if e := b >> 52; e-1 < 2046 && c.table { // positive, normal, finite
		if o := c.octaves[e].Load(); o != nil {
			if off := o.off[b>>(52-cubicBits)&(1<<cubicBits-1)]; off != cubicFallback {
				return int(o.base) + int(off)
			}
		}
	}
	return c.slowIndex(v)
}

// slowIndex is Index off the table: it builds a missing octave's table and otherwise
// returns the mapping's formula.
func (c *cubicIndexer) slowIndex(v float64) int {
	b := math.Float64bits(v)
	if e := b >> 52; e-1 < 2046 && c.table && c.octaves[e].Load() == nil {
		o := c.buildOctave(e)
		if off := o.off[b>>(52-cubicBits)&(1<<cubicBits-1)]; off != cubicFallback {
			return int(o.base) + int(off)
		}
	}
	return c.CubicallyInterpolatedMapping.Index(v)
}

// buildOctave fills and publishes the table of biased exponent e. Two goroutines may both
// build it; they build the same table.
func (c *cubicIndexer) buildOctave(e uint64) *cubicOctave {
	m := &c.CubicallyInterpolatedMapping
	mult := cubicMultiplier(m)
	const shift = 52 - cubicBits
	o := &cubicOctave{base: int32(m.Index(math.Float64frombits(e << 52)))}
	for j := range uint64(1 << cubicBits) {
		lo := math.Float64frombits(e<<52 | j<<shift)
		hi := math.Float64frombits(e<<52 | (j+1)<<shift - 1)
		o.off[j] = cubicFallback
		flo, fhi := cubicEval(lo, mult), cubicEval(hi, mult)
		k := math.Floor(flo - cubicMargin)
		if k != math.Floor(fhi+cubicMargin) {
			continue // a bin boundary (or an integer, within the margin) in the bucket
		}
		ilo, ihi := m.Index(lo), m.Index(hi)
		if ilo != ihi || float64(ilo) != k {
			continue // never seen; the formula stays the authority
		}
		if d := ilo - int(o.base); d >= 0 && d < cubicFallback {
			o.off[j] = uint8(d)
		}
	}
	c.octaves[e].Store(o)
	return o
}

// cubicMultiplier is the mapping's multiplier, 1/log2(gamma), recovered from its public
// surface: RelativeAccuracy = 1 - 2/(1+e^(0.7·log2 gamma)). It only feeds the bucket
// test, whose margin dwarfs any rounding here; the stored indexes are the mapping's own.
func cubicMultiplier(m *mapping.CubicallyInterpolatedMapping) float64 {
	a := m.RelativeAccuracy()
	log2Gamma := math.Log((1+a)/(1-a)) / 0.7
	return 1 / log2Gamma
}

// cubicEval is the mapping's index before the floor: approximateLog(v) × multiplier, for a
// positive normal v.
func cubicEval(v, mult float64) float64 {
	b := math.Float64bits(v)
	e := float64(int(b>>52&0x7ff) - 1023)
	s := math.Float64frombits(b&(1<<52-1)|0x3ff<<52) - 1
	return (((mapping.A*s+mapping.B)*s+mapping.C)*s + e) * mult
}
