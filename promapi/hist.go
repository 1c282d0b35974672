package promapi

import (
	"math"
	"slices"
	"sort"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// histSeries is the histogram of one series as its slots' buckets, copied out of the ring
// when the series was selected: each sample's cumulative histogram is summed from them
// when the engine reads it, straight into the engine's own FloatHistogram (histIter), so a
// query keeps one bucket list per slot instead of one histogram per sample.
type histSeries struct {
	schema       int32
	zt           float64
	posLo, negLo int // the first bucket index of each side
	pw, nw       int // the widths of the sides: every slot's buckets fall inside them
	slots        []slotBins
}

// slotBins is one live slot: its index, count, sum, and its buckets.
type slotBins struct {
	index int64
	count uint64
	sum   float64
	cachedSlot
}

// histSeries takes the slots' native buckets from the cache, or converts them (into the
// builder's slab, shared by the series of one Select) and caches the packed ones; it
// notes the range of indices they span.
func (b *builder) histSeries(series string, slots []window.SlotView) *histSeries {
	hs := &histSeries{slots: make([]slotBins, len(slots))}
	b.fillHistSeries(hs, series, slots)
	return hs
}

// fillHistSeries is histSeries into hs, whose slots it reuses (the pushdown's scratch,
// for a series it is done with before the next).
func (b *builder) fillHistSeries(hs *histSeries, series string, slots []window.SlotView) {
	sh := &b.sh
	*hs = histSeries{schema: sh.schema, zt: sh.ix.MinIndexableValue(), slots: slices.Grow(hs.slots[:0], len(slots))[:len(slots)]}
	hs.posLo, hs.pw, hs.negLo, hs.nw = b.lookSlots(series, slots)
	for j := range slots {
		s := &slots[j]
		hs.slots[j] = slotBins{index: s.Index, count: s.Count, sum: s.Sum, cachedSlot: b.looks[j].c}
	}
}

// lookSlots leaves the native buckets of each of the series' slots in b.looks[j].c,
// from the cache or converted (into the builder's slab; the packed ones are cached), and
// returns the range of indices they span on each side (a width of 0 when a side has none).
func (b *builder) lookSlots(series string, slots []window.SlotView) (posLo, pw, negLo, nw int) {
	sh := &b.sh
	var fresh bool
	b.looks, fresh = b.cache.lookup(series, slots, b.looks[:0])
	insert := false
	pLo, pHi, nLo, nHi := math.MaxInt, math.MinInt, math.MaxInt, math.MinInt
	for j := range slots {
		l := &b.looks[j]
		if l.state != lookHit {
			s := &slots[j]
			start := len(b.slab)
			b.slab, b.tmp = sh.buckets(b.slab, b.tmp, s.Bins, false)
			neg := len(b.slab) - start
			b.slab, b.tmp = sh.buckets(b.slab, b.tmp, s.Bins, true)
			l.c = cachedSlot{bins: b.slab[start:len(b.slab):len(b.slab)], neg: int32(neg), zero: s.Bins.ZeroCount()}
		}
		insert = insert || l.state == lookMiss || (l.state == lookHit && !fresh)
		bins, ng := l.c.bins, l.c.neg
		if ng > 0 {
			pLo, pHi = min(pLo, bins[0].Index), max(pHi, bins[ng-1].Index)
		}
		if int(ng) < len(bins) {
			nLo, nHi = min(nLo, bins[ng].Index), max(nHi, bins[len(bins)-1].Index)
		}
	}
	if insert {
		b.cache.insert(series, slots, b.looks)
	}
	if pLo <= pHi {
		posLo, pw = pLo, pHi-pLo+1
	}
	if nLo <= nHi {
		negLo, nw = nLo, nHi-nLo+1
	}
	return posLo, pw, negLo, nw
}

// histAcc is the running sum of a histSeries' slots up to through: an iterator moves it
// forward slot by slot, and starts over when asked for an earlier sample.
type histAcc struct {
	pos, neg         compactSide
	count, sum, zero float64
	next             int
	through          int64
	started          bool
}

func (a *histAcc) advance(hs *histSeries, through int64) {
	if !a.started || through < a.through {
		a.pos.reset(hs.posLo, hs.pw)
		a.neg.reset(hs.negLo, hs.nw)
		a.count, a.sum, a.zero, a.next, a.started = 0, 0, 0, 0, true
	}
	for ; a.next < len(hs.slots) && hs.slots[a.next].index <= through; a.next++ {
		s := &hs.slots[a.next]
		a.count += float64(s.count)
		a.sum += s.sum
		a.zero += float64(s.zero)
		a.pos.add(s.bins[:s.neg])
		a.neg.add(s.bins[s.neg:])
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
	fh.PositiveSpans, fh.PositiveBuckets = a.pos.write(fh.PositiveSpans, fh.PositiveBuckets)
	fh.NegativeSpans, fh.NegativeBuckets = a.neg.write(fh.NegativeSpans, fh.NegativeBuckets)
}

// compactSide is one side of a running sum, written nearly in the compact form the
// engine's Compact(0) leaves: the counts over the side's whole index range, the runs of
// buckets that hold every non-empty one (bridging gaps of at most spanGap empty buckets)
// and the spans they make. A count never
// goes back to zero (slots only add), so a run only grows: the runs change only when a
// bucket outside them first fills, and the engine's copies of a sample, and its rate's
// subtraction and compaction, read few empty buckets (a cumulative histogram's early
// samples are sparse over the range its later ones fill).
type compactSide struct {
	lo    int       // the bucket index of dense[0]
	dense []float64 // counts
	cover []uint64  // bit i: i is inside a run
	runs  []int32   // start, end, start, end…: ascending, apart by more than spanGap
	spans []histogram.Span
	stale bool // runs changed since spans were made
}

// spanGap is the most empty buckets a span bridges rather than start another (a variable
// only so that a test can compare answers with one span over the whole range). Each span
// costs the engine's bucket walks a step, each empty bucket its copies one: 16 was faster
// than 4 for the instant quantile over narrow histograms (BenchmarkPromQLQuantile, 8%) and
// as fast for the hour's wide ones (BenchmarkQueryRangeVsPrometheus).
var spanGap int32 = 16

func (c *compactSide) reset(lo, width int) {
	c.lo = lo
	c.dense = append(c.dense[:0], make([]float64, width)...)
	c.cover = append(c.cover[:0], make([]uint64, (width+63)/64)...)
	c.runs, c.spans, c.stale = c.runs[:0], c.spans[:0], false
}

// add adds one slot's buckets of this side (inside the side's range, non-zero counts).
func (c *compactSide) add(bins []sketch.BinCount) {
	for _, bc := range bins {
		k := bc.Index - c.lo
		if c.cover[k>>6]&(1<<(k&63)) == 0 {
			c.fill(int32(k))
		}
		c.dense[k] += float64(bc.Count)
	}
}

// fill puts bucket k, outside every run, into one: a new run, or its neighbours grown
// (and joined) to it.
func (c *compactSide) fill(k int32) {
	n := len(c.runs) / 2
	i := sort.Search(n, func(j int) bool { return c.runs[2*j] > k }) // the run after k
	prev := i > 0 && k-c.runs[2*i-1] <= spanGap
	next := i < n && c.runs[2*i]-(k+1) <= spanGap
	var from, to int32 // the buckets newly covered
	switch {
	case prev && next:
		from, to = c.runs[2*i-1], c.runs[2*i]
		c.runs = append(c.runs[:2*i-1], c.runs[2*i+1:]...)
	case prev:
		from, to = c.runs[2*i-1], k+1
		c.runs[2*i-1] = to
	case next:
		from, to = k, c.runs[2*i]
		c.runs[2*i] = from
	default:
		from, to = k, k+1
		c.runs = slices.Insert(c.runs, 2*i, from, to)
	}
	for x := from; x < to; x++ {
		c.cover[x>>6] |= 1 << (x & 63)
	}
	c.stale = true
}

// write appends the spans and buckets to the emptied spans and bk.
func (c *compactSide) write(spans []histogram.Span, bk []float64) ([]histogram.Span, []float64) {
	if c.stale {
		c.spans, c.stale = c.spans[:0], false
		prev := int32(-c.lo) // a first span's offset is its bucket index
		for i := 0; i < len(c.runs); i += 2 {
			c.spans = append(c.spans, histogram.Span{Offset: c.runs[i] - prev, Length: uint32(c.runs[i+1] - c.runs[i])})
			prev = c.runs[i+1]
		}
	}
	spans, bk = append(spans[:0], c.spans...), bk[:0]
	for i := 0; i < len(c.runs); i += 2 {
		bk = append(bk, c.dense[c.runs[i]:c.runs[i+1]]...)
	}
	return spans, bk
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

// seriesIter is storage's list iterator over a promSeries' samples (Next, Seek, At…)
// with AtFloatHistogram summing the current sample's histogram into the caller's, through
// the series' running sum. It follows the list's position through Next (a Seek, which is
// the list's own, is found again by time: a series' times are distinct).
type seriesIter struct {
	chunkenc.Iterator
	ss  []sample
	i   int
	acc histAcc
}

func (it *seriesIter) Next() chunkenc.ValueType {
	it.i++
	return it.Iterator.Next()
}

func (it *seriesIter) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	t := it.Iterator.AtT()
	if it.i < 0 || it.i >= len(it.ss) || it.ss[it.i].t != t {
		it.i = sort.Search(len(it.ss), func(j int) bool { return it.ss[j].t >= t })
	}
	p := &it.ss[it.i]
	if p.hs == nil {
		return t, nil
	}
	if fh == nil {
		fh = &histogram.FloatHistogram{}
	}
	it.acc.advance(p.hs, p.through)
	it.acc.write(p.hs, p.first, fh)
	return t, fh
}
