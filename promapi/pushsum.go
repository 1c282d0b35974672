package promapi

import (
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/histogram"

	"github.com/slide-metrics/slide/sketch"
)

// The pushdown's sums: a series' difference between two samples in whole counts, a
// group's buckets as exact sums of the series' scaled differences, and the pooled memory
// they live in.

// seriesDelta is a series' difference between two samples, both sides.
type seriesDelta struct{ pos, neg deltaSide }

// exactSum is a running sum with its rounding error kept (Knuth's TwoSum): hi+lo is the
// exact sum of a few terms, and value its correctly rounded float.
type exactSum struct{ hi, lo float64 }

func (e *exactSum) add(x float64) {
	s := float64(e.hi + x)
	bp := float64(s - e.hi)
	e.lo += float64(e.hi-float64(s-bp)) + float64(x-bp)
	e.hi = s
}

func (e exactSum) value() float64 { return e.hi + e.lo }

// deltaSide is one side of one series' difference between two samples: whole counts by
// bucket index from lo, the ones in [from, to) touched (every other count is zero).
type deltaSide struct {
	lo, width, from, to int
	v                   []float64
}

// load readies d for the buckets [lo, lo+n).
func (d *deltaSide) load(lo, n int) {
	d.lo, d.width, d.from, d.to = lo, n, n, 0
	if len(d.v) < n {
		d.v = make([]float64, n)
	}
}

// add adds one slot's buckets of this side (ascending indices).
func (d *deltaSide) add(bins []sketch.BinCount) {
	if len(bins) == 0 {
		return
	}
	d.from, d.to = min(d.from, bins[0].Index-d.lo), max(d.to, bins[len(bins)-1].Index-d.lo+1)
	for _, bc := range bins {
		d.v[bc.Index-d.lo] += float64(bc.Count)
	}
}

// flush adds the counts, times factor, to g (which covers them) and zeroes d. Adding a
// zero count's product leaves a sum as it was (exactly), so when the factor is finite
// every count in [from, to) is added without asking which are zero: half of a series'
// range is empty buckets, and the branch on them mispredicted about every other time.
func (d *deltaSide) flush(g *growDense, factor float64) {
	off := d.lo - g.lo
	if math.IsInf(factor, 0) || math.IsNaN(factor) { // 0×∞ is NaN: add the non-zero ones
		for k := d.from; k < d.to; k++ {
			if c := d.v[k]; c != 0 {
				g.add(off+k, float64(c*factor))
				d.v[k] = 0
			}
		}
		return
	}
	if d.from >= d.to {
		return
	}
	v := d.v[d.from:d.to]
	gv := g.v[2*(off+d.from) : 2*(off+d.to)]
	for k, c := range v {
		p := gv[2*k : 2*k+2 : 2*k+2]
		e := exactSum{p[0], p[1]}
		e.add(float64(c * factor))
		p[0], p[1] = e.hi, e.lo
	}
	clear(v)
}

// growDense is one side of a group's histogram: exact sums by bucket index from lo, grown
// to cover each series' range; v holds each bucket's exactSum, hi then lo.
type growDense struct {
	lo int
	v  []float64
}

func (d *growDense) len() int { return len(d.v) / 2 }

// cover makes d hold indices [lo, lo+n), its sums in memory from ar.
func (d *growDense) cover(ar *floatArena, lo, n int) {
	if len(d.v) == 0 {
		d.lo, d.v = lo, ar.alloc(2*n)
		return
	}
	from, to := min(lo, d.lo), max(lo+n, d.lo+d.len())
	if from == d.lo && to == d.lo+d.len() {
		return
	}
	v := ar.alloc(2 * (to - from))
	copy(v[2*(d.lo-from):], d.v)
	d.lo, d.v = from, v
}

func (d *growDense) add(i int, x float64) {
	p := d.v[2*i : 2*i+2 : 2*i+2]
	e := exactSum{p[0], p[1]}
	e.add(x)
	p[0], p[1] = e.hi, e.lo
}

// floatArena hands out zeroed counts from chunks kept from query to query: a query's
// groups take some hundred buckets a side each, and a chunk is a cleared copy rather than
// garbage.
type floatArena struct {
	chunk  []float64    // what is left of the current chunk
	chunks []*[]float64 // every chunk taken, for free
}

const arenaFloats = 1 << 14

var arenaPool = sync.Pool{New: func() any { s := make([]float64, arenaFloats); return &s }}

func (ar *floatArena) alloc(n int) []float64 {
	if n > arenaFloats/4 {
		return make([]float64, n)
	}
	if len(ar.chunk) < n {
		c := arenaPool.Get().(*[]float64)
		ar.chunks = append(ar.chunks, c)
		ar.chunk = *c
		clear(ar.chunk)
	}
	v := ar.chunk[:n:n]
	ar.chunk = ar.chunk[n:]
	return v
}

// free hands every chunk back: the query is done with its groups' counts.
func (ar *floatArena) free() {
	for _, c := range ar.chunks {
		arenaPool.Put(c)
	}
	ar.chunk, ar.chunks = nil, nil
}

// side appends the group's non-empty buckets (their rounded sums) to bk and their spans to
// spans, as the engine's compacted histograms hold them: HistogramQuantile's iterators
// then step over no empty bucket (each costs them its bounds). It keeps the non-empty
// ones in a first pass without a branch on each bucket (one that mispredicted often), and
// their indices in ix (scratch), then makes the spans from the indices.
func (d *growDense) side(spans []histogram.Span, bk []float64, ix *[]int32) ([]histogram.Span, []float64) {
	n := len(d.v) / 2
	start := len(bk)
	bk = slices.Grow(bk, n)[:start+n]
	out := bk[start:]
	if cap(*ix) < n {
		*ix = make([]int32, n)
	}
	is := (*ix)[:n]
	m := 0
	for i := range n {
		h := d.v[2*i]
		out[m] = h + d.v[2*i+1]
		is[m] = int32(i)
		if h != 0 {
			m++
		}
	}
	next := 0 // the index after the last non-empty bucket (negative for values under 1)
	for j, i := range is[:m] {
		k := d.lo + int(i)
		switch {
		case j == 0:
			spans = append(spans, histogram.Span{Offset: int32(k)})
		case k != next:
			spans = append(spans, histogram.Span{Offset: int32(k - next)})
		}
		spans[len(spans)-1].Length++
		next = k + 1
	}
	return spans, bk[:start+m]
}

func (d *growDense) clear() { clear(d.v) }
