package promapi

import (
	"math"
	"slices"
	"sort"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// kind is which of the series of a slide metric M a name addresses.
type kind uint8

const (
	kindHistogram kind = iota // M: native histogram, cumulative
	kindCount                 // M_count: counter
	kindSum                   // M_sum: counter
	kindMax                   // M_max: gauge, per slot
	kindEnd
)

var kindSuffix = [kindEnd]string{"", "_count", "_sum", "_max"}

// Prometheus' metadata of each kind: type and the help text /api/v1/metadata answers.
var kindType = [kindEnd]string{"histogram", "counter", "counter", "gauge"}

var kindHelp = [kindEnd]string{
	"The values of slide metric %s as a native histogram, cumulative over the ring's slots (one sample per slot end): use rate() or increase() over it.",
	"The number of values of slide metric %s, cumulative over the ring's slots: use rate() or increase().",
	"The sum of the values of slide metric %s, cumulative over the ring's slots: use rate() or increase().",
	"The largest value of slide metric %s in each slot (a gauge, one sample per slot end): max_over_time() reads a window's max.",
}

// sample is one point of a series: f for the float kinds, h for the histogram.
type sample struct {
	t       int64
	f       float64
	hs      *histSeries // the histogram kind's: the series' slots
	through int64       // the histogram kind's: the last slot the sample covers
	first   bool        // the histogram kind's: the series' first sample
}

// promSeries is one series PromQL sees, its samples built when it was selected (under the
// ring's lock, so the series is a consistent copy).
type promSeries struct {
	lset    labels.Labels
	samples []sample
}

func (s *promSeries) Labels() labels.Labels { return s.lset }

// Iterator reads the series' samples, reusing it when it is one of ours (the engine hands
// back the iterator of its previous series), with its histogram scratch.
func (s *promSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	r, ok := it.(*seriesIter)
	if !ok {
		r = &seriesIter{Iterator: storage.NewListSeriesIterator(samples(s.samples))}
	} else {
		r.Iterator.(interface{ Reset(storage.Samples) }).Reset(samples(s.samples))
	}
	r.ss, r.i, r.acc.started = s.samples, -1, false
	return r
}

// samples are a series' points as storage's list iterator reads them.
type samples []sample

func (s samples) Get(i int) chunks.Sample { return &s[i] }
func (s samples) Len() int                { return len(s) }

func (p *sample) T() int64                { return p.t }
func (p *sample) ST() int64               { return 0 }
func (p *sample) F() float64              { return p.f }
func (p *sample) H() *histogram.Histogram { return nil }
func (p *sample) FH() *histogram.FloatHistogram {
	if p.hs == nil {
		return nil
	}
	return p.hs.histogramAt(p)
}
func (p *sample) Copy() chunks.Sample { c := *p; return &c } // histSeries is read-only

func (p *sample) Type() chunkenc.ValueType {
	if p.hs != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

// shape is what building a metric's series needs to know of its ring and the query.
type shape struct {
	width, n   int64 // slot width (ms), slots of the retention
	now        int64 // the read's now (ms)
	live       bool  // now is the clock's now, not a past instant
	mint, maxt int64 // samples kept: [mint, maxt]
	ix         sketch.Indexer
	schema     int32
	exact      bool               // the bins are native buckets (a native:N ring)
	keyer      sketch.NativeKeyer // re-bucketing of other kinds
}

func newShape(rc window.RingConfig, now int64, live bool, mint, maxt int64) shape {
	ix, _ := rc.Sketch.Indexer() // validated by the store
	sh := shape{width: rc.Slot.Milliseconds(), n: int64(rc.Slots), now: now, live: live, mint: mint, maxt: maxt, ix: ix}
	if s, ok := sketch.NativeSchema(ix); ok {
		sh.schema, sh.exact = int32(s), true
	} else {
		sh.schema, sh.keyer = sketch.DefaultSchema, sketch.NewNativeKeyer(sketch.DefaultSchema)
	}
	return sh
}

// points lists the instants a cumulative series has samples at, for a ring whose current
// slot is cur and whose first live slot is first: the start of the retention or of the
// first slot, whichever is later (every count still zero: the counter's creation, as a
// Prometheus series starts at its first sample, or at its created-timestamp zero), and the
// end of each slot from there up to now. A series whose first slot is later than now has
// none, so an instant query before a series' first event and a range query's steps there
// alike answer nothing for it. A live read (now is the clock's now) adds now itself,
// which closes the slot in progress with what it holds so far; a read at a past instant
// stops at the last slot that ended by then, since the slot holding that instant holds
// later events too. through[i] is the last slot index points[i] covers.
func (sh *shape) points(cur, first int64, ts, through []int64) ([]int64, []int64) {
	lo := max(cur-sh.n+1, first)
	last := min(cur, window.FloorDiv(sh.now, sh.width))
	if lo > last {
		return ts, through
	}
	// The zero at a past instant that is its very time is a sample there, as a slot end
	// is (a range query's step on a slot boundary reads it); a live read's now is its own.
	if t0 := lo * sh.width; t0 < sh.now || (t0 == sh.now && !sh.live) {
		ts, through = append(ts, t0), append(through, lo-1)
	}
	for i := lo; i <= last; i++ {
		if e := (i + 1) * sh.width; e < sh.now || (e == sh.now && !sh.live) {
			ts, through = append(ts, e), append(through, i)
		}
	}
	if !sh.live {
		return ts, through
	}
	return append(ts, sh.now), append(through, last)
}

// buckets appends the native buckets of one side of a slot's bins: the bins themselves for
// a native kind, else each bin's representative re-bucketed (as query's histogram export
// does), through tmp.
func (sh *shape) buckets(dst, tmp []sketch.BinCount, b sketch.Slot, neg bool) ([]sketch.BinCount, []sketch.BinCount) {
	if sh.exact {
		return b.AppendBins(dst, neg), tmp
	}
	tmp = b.AppendBins(tmp[:0], neg)
	start := len(dst) // dst holds earlier slots' and series' buckets: never add to those
	for _, bc := range tmp {
		k := sh.keyer.Key(sh.ix.Value(bc.Index))
		if n := len(dst); n > start && dst[n-1].Index == k {
			dst[n-1].Count += bc.Count
			continue
		}
		dst = append(dst, sketch.BinCount{Index: k, Count: bc.Count})
	}
	return dst, tmp
}

// builder turns one series' slots into the samples of the kinds asked for; its scratch is
// reused from series to series of one Select.
type builder struct {
	sh          shape
	ts, through []int64           // the points of the series being built (a part of allTs, allThrough)
	slab        []sketch.BinCount // the histSeries' buckets of one Select that the cache had not
	tmp         []sketch.BinCount // re-bucketing's scratch
	cache       *slotCache        // the metric's kind's
	looks       []look            // what the cache held of a series' slots
	allTs       []int64           // the metric's points at ptsCur, from the retention's start
	allThrough  []int64
	ptsCur      int64 // the current slot allTs and allThrough were listed for
	ptsOK       bool  // they hold ptsCur's points
}

// pointsAt readies b.ts and b.through with the points of a series whose current slot is
// cur and whose live slots are slots: the metric's points (from the retention's start),
// listed once per current slot (every series of a read from one store shares it), from
// the series' first slot on. Their through values run lo−1, lo, lo+1, … one by one (a live
// read's now closes the last slot, which has no end of its own before now), so the
// series' points start at index first−lo: the same as points(cur, first), in O(1).
func (b *builder) pointsAt(cur int64, slots []window.SlotView) {
	if !b.ptsOK || b.ptsCur != cur {
		b.allTs, b.allThrough = b.sh.points(cur, math.MinInt64, b.allTs[:0], b.allThrough[:0])
		b.ptsCur, b.ptsOK = cur, true
	}
	b.ts, b.through = b.allTs[:0], b.allThrough[:0]
	if len(slots) == 0 || len(b.allTs) == 0 {
		return
	}
	first := slots[0].Index
	if last := min(cur, window.FloorDiv(b.sh.now, b.sh.width)); first > last {
		return // the series' first slot is after the read's instant
	}
	if k := max(first-(cur-b.sh.n+1), 0); k < int64(len(b.allTs)) {
		b.ts, b.through = b.allTs[k:], b.allThrough[k:]
	}
}

// build returns the samples of kind k of one series (whose slots VisitSlots handed over),
// inside [mint, maxt]; hs is the series' histSeries for the histogram kind.
func (b *builder) build(k kind, cur int64, slots []window.SlotView, hs *histSeries) []sample {
	if k == kindMax {
		return b.maxima(slots)
	}
	return b.appendSamples(nil, k, cur, slots, hs)
}

// appendSamples is build for a cumulative kind, appending to out.
func (b *builder) appendSamples(out []sample, k kind, cur int64, slots []window.SlotView, hs *histSeries) []sample {
	sh := &b.sh
	b.pointsAt(cur, slots)
	out = slices.Grow(out, len(b.ts))
	start := len(out)
	var count, sum float64
	j := 0
	for p, t := range b.ts {
		for ; j < len(slots) && slots[j].Index <= b.through[p]; j++ {
			count += float64(slots[j].Count)
			sum += slots[j].Sum
		}
		if t < sh.mint || t > sh.maxt {
			continue
		}
		switch k {
		case kindCount:
			out = append(out, sample{t: t, f: count})
		case kindSum:
			out = append(out, sample{t: t, f: sum})
		case kindHistogram:
			out = append(out, sample{t: t, hs: hs, through: b.through[p], first: len(out) == start})
		}
	}
	return out
}

// maxima is M_max: each live slot's max at its end; a live read puts the slots ending at or
// after now in one sample at now, a read at a past instant stops at the last slot ended.
func (b *builder) maxima(slots []window.SlotView) []sample {
	sh := &b.sh
	out := make([]sample, 0, len(slots))
	last, lastIdx := math.Inf(-1), window.FloorDiv(sh.now, sh.width)
	for _, s := range slots {
		if s.Index > lastIdx {
			break
		}
		if e := (s.Index + 1) * sh.width; e < sh.now || (e == sh.now && !sh.live) {
			if e >= sh.mint && e <= sh.maxt {
				out = append(out, sample{t: e, f: s.Max})
			}
			continue
		}
		if sh.live {
			last = max(last, s.Max)
		}
	}
	if !math.IsInf(last, -1) && sh.now >= sh.mint && sh.now <= sh.maxt {
		out = append(out, sample{t: sh.now, f: last})
	}
	return out
}

// ends is the window of an instant rate() or increase() over a cumulative series, for
// thinning its samples to the two the engine's answer depends on: (lo, hi] and true when
// hints ask for one, else false. See thinned.
func ends(hints *storage.SelectHints) (lo, hi int64, ok bool) {
	if hints == nil || hints.Step != 0 || hints.Range <= 0 || (hints.Func != "rate" && hints.Func != "increase") {
		return 0, 0, false
	}
	return hints.End - hints.Range, hints.End, true
}

// thinned returns the first and the last of smp's samples in (lo, hi] when that gives the
// PromQL engine (v0.316's extrapolatedRate and histogramRate) the answer all of them give,
// else smp. A cumulative series of one read does not fall (M_count; M, whose every sample
// after the first says NotCounterReset; M_sum unless values are negative, so its samples
// are checked), so the increase is the last sample less the first, whatever lies between;
// what the samples between change is the extrapolation, through
// their count: the engine extrapolates to a boundary all the way when the sample nearest it
// lies within 1.1 average gaps of it, else half a gap. Thinning makes the average gap
// larger, so it keeps the answer exactly when the full series already extrapolates all the
// way at both ends: both distances within one average gap (a margin under 1.1 that float
// rounding cannot cross). The samples are dense (one per slot end, the retention's start,
// and now), so that holds whenever the range lies within the retention. An instant
// histogram_quantile over rate(M[5m]) then hands the engine 2 histograms a series instead
// of 31 (TestThinnedRateIsExact compares every answer).
func thinned(smp []sample, lo, hi int64) []sample {
	i := sort.Search(len(smp), func(i int) bool { return smp[i].t > lo })
	j := sort.Search(len(smp), func(j int) bool { return smp[j].t > hi }) - 1
	n := j - i + 1
	if n < 3 {
		return smp
	}
	first, last := smp[i].t, smp[j].t
	gap := float64(last-first) / float64(n-1)
	if float64(first-lo) > gap || float64(hi-last) > gap {
		return smp
	}
	for k := i + 1; k <= j; k++ {
		if smp[k].hs == nil && smp[k].f < smp[k-1].f {
			return smp // a float series that fell: the engine counts a reset there
		}
	}
	smp[i+1] = smp[j]
	return smp[i : i+2]
}
