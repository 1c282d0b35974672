package sketch

import (
	"math"
	"sort"
)

// NameNative is the sketch family whose bins are exactly Prometheus native-histogram
// buckets: "native:SCHEMA".
const NameNative = "native"

// Native schema limits: Kind.Schema 1..8 (0 means DefaultSchema). Schemas 0 and below are
// native histograms' coarse buckets (a factor of 2 or more per bucket) and are not offered:
// they are useless for latency quantiles.
const (
	DefaultSchema = 5 // bucket factor 2^(1/32) ≈ 1.0219: relative accuracy ≈ 1.08%
	MinSchema     = 1
	MaxSchema     = 8
)

// NativeZeroThreshold is the zero bucket's width of native kinds, |v| <= 2^-128: client_golang's
// default (prometheus.DefNativeHistogramZeroThreshold), so the zero bucket matches too.
const NativeZeroThreshold = 2.938735877055719e-39

// nativeIndexer maps values to Prometheus native-histogram bucket indices of one schema:
// bucket i holds (base^(i-1), base^i] with base = 2^(2^-schema), the DDSketch logarithmic
// mapping with gamma = base. The index is computed as client_golang's histogram does
// (math.Frexp and a search of the octave's bounds), not with a logarithm, so a value lands
// in the bucket client_golang would put it in.
type nativeIndexer struct {
	schema int
	bounds []float64 // the 2^schema bucket upper bounds within [0.5, 1)
	base   float64
	acc    float64 // (base-1)/(base+1)
}

// Schema is the native-histogram schema of the indexer.
func (n *nativeIndexer) Schema() int { return n.schema }

// nativeIndexers are built once, one per schema: Kind.Indexer is called per merged read.
var nativeIndexers = func() (ix [MaxSchema + 1]*nativeIndexer) {
	for s := MinSchema; s <= MaxSchema; s++ {
		ix[s] = newNativeIndexer(s)
	}
	return ix
}()

func newNativeIndexer(schema int) *nativeIndexer {
	m := 1 << schema
	n := &nativeIndexer{schema: schema, bounds: make([]float64, m), base: math.Exp2(math.Exp2(-float64(schema)))}
	for j := range m {
		n.bounds[j] = math.Exp2(float64(j)/float64(m) - 1)
	}
	n.acc = (n.base - 1) / (n.base + 1)
	return n
}

// Index is the native bucket index of v > 0: the smallest i with v <= base^i.
func (n *nativeIndexer) Index(v float64) int {
	frac, exp := math.Frexp(v) // v = frac × 2^exp, frac in [0.5, 1)
	return sort.SearchFloat64s(n.bounds, frac) + (exp-1)*len(n.bounds)
}

// Value is the bucket's point of least relative error, 2·base^i/(1+base): every value of
// (base^(i-1), base^i] is within RelativeAccuracy of it.
func (n *nativeIndexer) Value(index int) float64 {
	return 2 * n.upper(index) / (1 + n.base)
}

// upper is base^index, the bucket's upper bound.
func (n *nativeIndexer) upper(index int) float64 {
	m := len(n.bounds)
	octave, j := index/m, index%m
	if j < 0 {
		octave, j = octave-1, j+m
	}
	return math.Ldexp(n.bounds[j], octave+1)
}

// MinIndexableValue is NativeZeroThreshold: smaller magnitudes count as zero, as in a
// client_golang native histogram.
func (n *nativeIndexer) MinIndexableValue() float64 { return NativeZeroThreshold }

// RelativeAccuracy is (base-1)/(base+1): 1.08% at schema 5.
func (n *nativeIndexer) RelativeAccuracy() float64 { return n.acc }

// NativeSchema returns the native-histogram schema of ix when its bins are exactly native
// buckets (an Indexer of a native Kind), and ok false otherwise.
func NativeSchema(ix Indexer) (schema int, ok bool) {
	if n, isNative := ix.(*nativeIndexer); isNative {
		return n.schema, true
	}
	return 0, false
}

// NativeKeyer maps values to native-histogram bucket indices of one schema: the bucket a
// value is re-bucketed into when bins of another Kind are exported as a native histogram.
type NativeKeyer struct{ n *nativeIndexer }

// NewNativeKeyer returns the bucket mapping of schema, clamped to [MinSchema, MaxSchema].
func NewNativeKeyer(schema int) NativeKeyer {
	return NativeKeyer{nativeIndexers[min(max(schema, MinSchema), MaxSchema)]}
}

// Key is the bucket index of v > 0.
func (k NativeKeyer) Key(v float64) int { return k.n.Index(v) }

// EachBin calls fn for every non-zero bin of the positive side (negative false) or of the
// negative side (negative true, indices of the magnitudes), in ascending index order. O(bins
// in use), no allocation.
func (b *Bins) EachBin(negative bool, fn func(index int, count uint64)) {
	c := &b.pos
	if negative {
		if b.neg == nil {
			return
		}
		c = b.neg
	}
	if c.sum == 0 {
		return
	}
	first, last := c.nonZeroRange()
	for j := first; j <= last; j++ {
		if x := c.get(j); x > 0 {
			fn(c.off+j, x)
		}
	}
}

// BinCount is one non-zero bin: its index and count.
type BinCount struct {
	Index int
	Count uint64
}

// AppendBins appends the non-zero bins of one side (as EachBin visits them) to dst and
// returns it: EachBin without a call per bin, for exporters on a hot path.
func (b *Bins) AppendBins(dst []BinCount, negative bool) []BinCount {
	c := &b.pos
	if negative {
		if b.neg == nil {
			return dst
		}
		c = b.neg
	}
	if c.sum == 0 {
		return dst
	}
	first, last := c.nonZeroRange()
	if c.shift == 0 { // one-byte counts, the common case: no switch per bin
		for j, x := range c.data[first : last+1] {
			if x > 0 {
				dst = append(dst, BinCount{c.off + first + j, uint64(x)})
			}
		}
		return dst
	}
	for j := first; j <= last; j++ {
		if x := c.get(j); x > 0 {
			dst = append(dst, BinCount{c.off + j, x})
		}
	}
	return dst
}

// ZeroCount is the number of values of magnitude at most the Indexer's MinIndexableValue.
func (b *Bins) ZeroCount() uint64 { return b.zero }
