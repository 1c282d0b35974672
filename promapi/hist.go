package promapi

import (
	"math"
	"sort"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// histSeries is the histogram of one series as its slots' buckets, copied out of the ring
// when the series was selected: each sample's cumulative histogram is summed from them
// when the engine reads it, straight into the engine's own FloatHistogram (histIter), so a
// query keeps one bucket list per slot instead of one dense histogram per sample.
type histSeries struct {
	schema       int32
	zt           float64
	posLo, negLo int // the first bucket index of each side's one span
	pw, nw       int // the spans' lengths: every slot's buckets fall inside them
	slots        []slotBins
	bins         []sketch.BinCount
}

// slotBins is one live slot: its index, count, sum, zero count and its buckets,
// bins[p0:p1] positive and bins[p1:n1] negative.
type slotBins struct {
	index      int64
	count      uint64
	sum        float64
	zero       uint64
	p0, p1, n1 int32
}

// histSeries copies the slots' buckets (appended to the builder's slab, shared by the
// series of one Select) and the range of indices they span.
func (b *builder) histSeries(slots []window.SlotView) *histSeries {
	sh := &b.sh
	hs := &histSeries{schema: sh.schema, zt: sh.ix.MinIndexableValue(), slots: make([]slotBins, len(slots))}
	start := len(b.slab)
	posLo, posHi, negLo, negHi := math.MaxInt, math.MinInt, math.MaxInt, math.MinInt
	for j := range slots {
		s := &slots[j]
		p0 := len(b.slab) - start
		b.slab, b.tmp = sh.buckets(b.slab, b.tmp, s.Bins, false)
		p1 := len(b.slab) - start
		b.slab, b.tmp = sh.buckets(b.slab, b.tmp, s.Bins, true)
		n1 := len(b.slab) - start
		if p1 > p0 {
			posLo, posHi = min(posLo, b.slab[start+p0].Index), max(posHi, b.slab[start+p1-1].Index)
		}
		if n1 > p1 {
			negLo, negHi = min(negLo, b.slab[start+p1].Index), max(negHi, b.slab[start+n1-1].Index)
		}
		hs.slots[j] = slotBins{index: s.Index, count: s.Count, sum: s.Sum, zero: s.Bins.ZeroCount(), p0: int32(p0), p1: int32(p1), n1: int32(n1)}
	}
	hs.bins = b.slab[start:len(b.slab):len(b.slab)]
	if posLo <= posHi {
		hs.posLo, hs.pw = posLo, posHi-posLo+1
	}
	if negLo <= negHi {
		hs.negLo, hs.nw = negLo, negHi-negLo+1
	}
	return hs
}

// histAcc is the running sum of a histSeries' slots up to through: an iterator moves it
// forward slot by slot, and starts over when asked for an earlier sample.
type histAcc struct {
	pos, neg         []float64
	count, sum, zero float64
	next             int
	through          int64
	started          bool
}

func (a *histAcc) advance(hs *histSeries, through int64) {
	if !a.started || through < a.through {
		a.pos = append(a.pos[:0], make([]float64, hs.pw)...)
		a.neg = append(a.neg[:0], make([]float64, hs.nw)...)
		a.count, a.sum, a.zero, a.next, a.started = 0, 0, 0, 0, true
	}
	for ; a.next < len(hs.slots) && hs.slots[a.next].index <= through; a.next++ {
		s := &hs.slots[a.next]
		a.count += float64(s.count)
		a.sum += s.sum
		a.zero += float64(s.zero)
		for _, bc := range hs.bins[s.p0:s.p1] {
			a.pos[bc.Index-hs.posLo] += float64(bc.Count)
		}
		for _, bc := range hs.bins[s.p1:s.n1] {
			a.neg[bc.Index-hs.negLo] += float64(bc.Count)
		}
	}
	a.through = through
}

// write fills fh (its slices reused) with the accumulated histogram.
func (a *histAcc) write(hs *histSeries, first bool, fh *histogram.FloatHistogram) {
	// Counts only grow within one read, so every sample after the first says so and the
	// engine skips its bucket-by-bucket reset check.
	fh.CounterResetHint = histogram.NotCounterReset
	if first {
		fh.CounterResetHint = histogram.UnknownCounterReset
	}
	fh.Schema, fh.ZeroThreshold, fh.ZeroCount, fh.Count, fh.Sum = hs.schema, hs.zt, a.zero, a.count, a.sum
	fh.CustomValues = nil
	fh.PositiveSpans, fh.PositiveBuckets = fh.PositiveSpans[:0], fh.PositiveBuckets[:0]
	if hs.pw > 0 {
		fh.PositiveSpans = append(fh.PositiveSpans, histogram.Span{Offset: int32(hs.posLo), Length: uint32(hs.pw)})
		fh.PositiveBuckets = append(fh.PositiveBuckets, a.pos...)
	}
	fh.NegativeSpans, fh.NegativeBuckets = fh.NegativeSpans[:0], fh.NegativeBuckets[:0]
	if hs.nw > 0 {
		fh.NegativeSpans = append(fh.NegativeSpans, histogram.Span{Offset: int32(hs.negLo), Length: uint32(hs.nw)})
		fh.NegativeBuckets = append(fh.NegativeBuckets, a.neg...)
	}
}

// histogramAt builds sample p's histogram on its own (chunks.Sample's FH, for callers
// outside the engine's iteration).
func (hs *histSeries) histogramAt(p *sample) *histogram.FloatHistogram {
	var a histAcc
	a.advance(hs, p.through)
	fh := &histogram.FloatHistogram{}
	a.write(hs, p.first, fh)
	return fh
}

// histIter is storage's list iterator over a histogram series' samples (Next, Seek, At…)
// with AtFloatHistogram summing the current sample's histogram into the caller's.
type histIter struct {
	chunkenc.Iterator
	s   *promSeries
	acc histAcc
}

func (it *histIter) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	t := it.Iterator.AtT()
	ss := it.s.samples
	i := sort.Search(len(ss), func(i int) bool { return ss[i].t >= t })
	p := &ss[i]
	if fh == nil {
		fh = &histogram.FloatHistogram{}
	}
	it.acc.advance(p.hs, p.through)
	it.acc.write(p.hs, p.first, fh)
	return t, fh
}
