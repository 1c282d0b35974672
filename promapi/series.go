package promapi

import (
	"math"

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
	t int64
	f float64
	h *histogram.FloatHistogram
}

// promSeries is one series PromQL sees, its samples built when it was selected (under the
// ring's lock, so the series is a consistent copy).
type promSeries struct {
	lset    labels.Labels
	samples []sample
}

func (s *promSeries) Labels() labels.Labels { return s.lset }

func (s *promSeries) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	// The copying iterator: AtFloatHistogram copies into the engine's histogram when it
	// passes one, so nothing the engine does to it reaches the samples.
	return storage.NewListSeriesIteratorWithCopy(samples(s.samples))
}

// samples are a series' points as storage's list iterator reads them.
type samples []sample

func (s samples) Get(i int) chunks.Sample { return &s[i] }
func (s samples) Len() int                { return len(s) }

func (p *sample) T() int64                      { return p.t }
func (p *sample) ST() int64                     { return 0 }
func (p *sample) F() float64                    { return p.f }
func (p *sample) H() *histogram.Histogram       { return nil }
func (p *sample) FH() *histogram.FloatHistogram { return p.h }
func (p *sample) Copy() chunks.Sample {
	c := *p
	if p.h != nil {
		c.h = p.h.Copy()
	}
	return &c
}

func (p *sample) Type() chunkenc.ValueType {
	if p.h != nil {
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
// slot is cur: the start of the retention (every count still zero) and the end of each slot
// of the retention up to now. A live read (now is the clock's now) adds now itself, which
// closes the slot in progress with what it holds so far; a read at a past instant stops at
// the last slot that ended by then, since the slot holding that instant holds later events
// too. through[i] is the last slot index points[i] covers.
func (sh *shape) points(cur int64, ts, through []int64) ([]int64, []int64) {
	lo := cur - sh.n + 1
	last := min(cur, window.FloorDiv(sh.now, sh.width))
	if t0 := lo * sh.width; t0 < sh.now {
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

// buckets appends the native buckets of one side of bins: the bins themselves for a native
// kind, else each bin's representative re-bucketed (as query's histogram export does).
func (sh *shape) buckets(dst []sketch.BinCount, b *sketch.Bins, neg bool) []sketch.BinCount {
	if sh.exact {
		return b.AppendBins(dst, neg)
	}
	b.EachBin(neg, func(i int, c uint64) {
		k := sh.keyer.Key(sh.ix.Value(i))
		if n := len(dst); n > 0 && dst[n-1].Index == k {
			dst[n-1].Count += c
			return
		}
		dst = append(dst, sketch.BinCount{Index: k, Count: c})
	})
	return dst
}

// builder turns one series' slots into the samples of the kinds asked for; its scratch is
// reused from series to series of one Select.
type builder struct {
	sh           shape
	want         [kindEnd]bool
	ts, through  []int64
	pos, neg     [][]sketch.BinCount // per live slot
	posLo, posHi int
	negLo, negHi int
}

// build returns the samples of kind k of one series (whose slots VisitSlots handed over),
// inside [mint, maxt]. The histogram kind needs prepare to have run for these slots.
func (b *builder) build(k kind, cur int64, slots []window.SlotView) []sample {
	sh := &b.sh
	if k == kindMax {
		return b.maxima(slots)
	}
	b.ts, b.through = sh.points(cur, b.ts[:0], b.through[:0])
	out := make([]sample, 0, len(b.ts))
	var count, sum, zero float64
	var pos, neg, slab []float64
	var hs []histogram.FloatHistogram
	var pspans, nspans []histogram.Span
	if k == kindHistogram {
		// One slab each for the series' histograms and their buckets, one span per side
		// shared by all (read-only: the engine copies what it changes).
		pw, nw := max(0, b.posHi-b.posLo+1), max(0, b.negHi-b.negLo+1)
		pos, neg = make([]float64, pw), make([]float64, nw)
		slab = make([]float64, 0, len(b.ts)*(pw+nw))
		hs = make([]histogram.FloatHistogram, 0, len(b.ts))
		if pw > 0 {
			pspans = []histogram.Span{{Offset: int32(b.posLo), Length: uint32(pw)}}
		}
		if nw > 0 {
			nspans = []histogram.Span{{Offset: int32(b.negLo), Length: uint32(nw)}}
		}
	}
	j := 0
	for p, t := range b.ts {
		for ; j < len(slots) && slots[j].Index <= b.through[p]; j++ {
			s := &slots[j]
			count += float64(s.Count)
			sum += s.Sum
			if k == kindHistogram {
				zero += float64(s.Bins.ZeroCount())
				for _, bc := range b.pos[j] {
					pos[bc.Index-b.posLo] += float64(bc.Count)
				}
				for _, bc := range b.neg[j] {
					neg[bc.Index-b.negLo] += float64(bc.Count)
				}
			}
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
			// Counts only grow within one read, so every sample after the first says so and
			// the engine skips its bucket-by-bucket reset check.
			hint := histogram.NotCounterReset
			if len(out) == 0 {
				hint = histogram.UnknownCounterReset
			}
			hs = append(hs, histogram.FloatHistogram{
				CounterResetHint: hint, Schema: sh.schema, ZeroThreshold: sh.ix.MinIndexableValue(), ZeroCount: zero,
				Count: count, Sum: sum, PositiveSpans: pspans, NegativeSpans: nspans,
			})
			h := &hs[len(hs)-1]
			if len(pos) > 0 {
				at := len(slab)
				slab = append(slab, pos...)
				h.PositiveBuckets = slab[at:len(slab):len(slab)]
			}
			if len(neg) > 0 {
				at := len(slab)
				slab = append(slab, neg...)
				h.NegativeBuckets = slab[at:len(slab):len(slab)]
			}
			out = append(out, sample{t: t, h: h})
		}
	}
	return out
}

// prepare collects the native buckets of every slot and the range of bucket indices they
// span: a series' histograms share one span per side, so each sample's buckets are one
// slice of the cumulative counts.
func (b *builder) prepare(slots []window.SlotView) {
	for len(b.pos) < len(slots) {
		b.pos, b.neg = append(b.pos, nil), append(b.neg, nil)
	}
	b.posLo, b.posHi, b.negLo, b.negHi = math.MaxInt, math.MinInt, math.MaxInt, math.MinInt
	for j := range slots {
		b.pos[j] = b.sh.buckets(b.pos[j][:0], slots[j].Bins, false)
		b.neg[j] = b.sh.buckets(b.neg[j][:0], slots[j].Bins, true)
		if p := b.pos[j]; len(p) > 0 {
			b.posLo, b.posHi = min(b.posLo, p[0].Index), max(b.posHi, p[len(p)-1].Index)
		}
		if q := b.neg[j]; len(q) > 0 {
			b.negLo, b.negHi = min(b.negLo, q[0].Index), max(b.negHi, q[len(q)-1].Index)
		}
	}
	if b.posLo > b.posHi {
		b.posLo, b.posHi = 0, -1
	}
	if b.negLo > b.negHi {
		b.negLo, b.negHi = 0, -1
	}
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
