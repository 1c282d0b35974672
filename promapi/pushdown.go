package promapi

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/parser/posrange"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// The pushdown answers the quantile shape SREs type every day without the engine:
// histogram_quantile(φ, rate|increase(M[r])), optionally under sum by (…) or
// sum without (…), no offset, no @, M one slide metric's native histogram. The engine
// spends most of such a query copying, subtracting, extrapolating and adding whole
// histograms, one per sample and series (BenchmarkPromQLQuantile); the pushdown takes, per
// series and eval instant, the two samples the engine's rate would read (the querier's own
// samples, thinned as the engine's Select thins them), sums the slots' buckets between them
// into the series' difference, scales it by the engine's extrapolation factor for that
// series, adds it to its group's exact sums (pushsum.go), and hands the group's histogram
// to Prometheus' own promql.HistogramQuantile.
// Anything else is the engine's. TestPushdownEqualsEngine holds every answer to the
// engine's over random stores, shapes and instants.

// evalSpan is the instants a query evaluates at (ms): start to end by step; step 0 is an
// instant query at start.
type evalSpan struct{ start, end, step int64 }

// engineMillis is t in ms as the engine reads a query's times.
func engineMillis(t time.Time) int64 { return t.UnixNano() / int64(time.Millisecond) }

// quantileShape is a recognised histogram_quantile(φ, [sum by|without (…)]
// rate|increase(selector[range])).
type quantileShape struct {
	phi      float64
	phiPos   posrange.PositionRange // of φ, for the engine's invalid-quantile warning
	innerPos posrange.PositionRange // of the histogram argument
	agg      bool                   // under sum
	without  bool
	grouping []string
	isRate   bool
	rng      int64   // ms
	rangeSec float64 // as the engine divides a rate by it
	matchers []*labels.Matcher
}

// recognise reports whether expr is the pushdown's shape, and its parts.
func recognise(expr parser.Expr) (quantileShape, bool) {
	var sh quantileShape
	call, ok := expr.(*parser.Call)
	if !ok || call.Func == nil || call.Func.Name != "histogram_quantile" || len(call.Args) != 2 {
		return sh, false
	}
	num, ok := call.Args[0].(*parser.NumberLiteral)
	if !ok {
		return sh, false
	}
	sh.phi, sh.phiPos, sh.innerPos = num.Val, call.Args[0].PositionRange(), call.Args[1].PositionRange()
	inner := call.Args[1]
	if agg, ok := inner.(*parser.AggregateExpr); ok {
		if agg.Op != parser.SUM || agg.Param != nil || slices.Contains(agg.Grouping, labels.MetricName) {
			return sh, false
		}
		sh.agg, sh.without, sh.grouping = true, agg.Without, agg.Grouping
		inner = agg.Expr
	}
	rc, ok := inner.(*parser.Call)
	if !ok || rc.Func == nil || (rc.Func.Name != "rate" && rc.Func.Name != "increase") || len(rc.Args) != 1 {
		return sh, false
	}
	sh.isRate = rc.Func.Name == "rate"
	ms, ok := rc.Args[0].(*parser.MatrixSelector)
	if !ok || ms.RangeExpr != nil || ms.Range <= 0 {
		return sh, false
	}
	vs, ok := ms.VectorSelector.(*parser.VectorSelector)
	if !ok || vs.OriginalOffset != 0 || vs.OriginalOffsetExpr != nil || vs.Offset != 0 || vs.Timestamp != nil ||
		vs.StartOrEnd != 0 || vs.Anchored || vs.Smoothed {
		return sh, false
	}
	sh.rng, sh.rangeSec, sh.matchers = ms.Range.Milliseconds(), ms.Range.Seconds(), vs.LabelMatchers
	return sh, sh.rng > 0
}

// errNotPushed says the pushdown declined a query it recognised (several metrics, float
// series, too many series, a NaN sum, a read error): the engine answers it, errors and all.
var errNotPushed = errors.New("promapi: not pushed down")

// pdSeries is one selected series: its group, slots and samples (the engine's, before
// any window; each sample's f is its cumulative count, which the engine's rate reads).
type pdSeries struct {
	group int
	hs    *histSeries
	smp   []sample
}

// pdGroup is one output series: its labels, and at the step being evaluated the summed
// rate (or increase) of its series as dense bucket counts.
type pdGroup struct {
	lset        labels.Labels
	pos, neg    growDense
	count, zero exactSum
	has         bool // a series of the group has a rate at this step
	floats      []promql.FPoint
}

// pushdown answers a recognised query over span, or errNotPushed (the engine's turn) or a
// context's error. Its notes are the engine's warnings and infos for it.
func (a *API) pushdown(ctx context.Context, expr parser.Expr, text string, span evalSpan) ([]byte, notes, error) {
	sh, ok := recognise(expr)
	steps := int64(0) // after the first
	if span.step > 0 {
		steps = (span.end - span.start) / span.step
	}
	if !ok || span.end < span.start || steps > maxPoints || span.start-sh.rng > span.start {
		return nil, notes{}, errNotPushed // times far outside int64's milliseconds: the engine's
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	mint, maxt := span.start-sh.rng, span.end
	q, _ := a.q.Querier(mint, maxt)
	qr := q.(*querier)
	defer qr.Close()
	instant := span.step == 0
	rd := pdReads.Get().(*pdRead)
	defer rd.release()
	rd.sh, rd.instant, rd.t, rd.mint = &sh, instant, span.start, mint
	rd.budget, rd.perGroup = int64(a.cfg.MaxSamples), steps+1
	if err := a.pdSelect(ctx, qr, rd, mint, maxt); err != nil {
		return nil, notes{}, err
	}
	var annos annotations.Annotations
	for _, w := range []error{rd.evicted, rd.short, rd.empty} {
		if w != nil {
			annos.Add(w) // Select's warnings on the engine
		}
	}
	if math.IsNaN(sh.phi) || sh.phi < 0 || sh.phi > 1 {
		annos.Add(annotations.NewInvalidQuantileWarning(sh.phi, sh.phiPos))
	}
	var fh histogram.FloatHistogram
	if instant {
		rd.points = slices.Grow(rd.points[:0], len(rd.groups))[:len(rd.groups)]
	}
	stop := stopper(ctx)
	for i := range steps + 1 {
		t := span.start + i*span.step
		if !instant { // an instant query's rates were summed as its series were read
			lo := t - sh.rng
			for i := range rd.series {
				s := &rd.series[i]
				rd.add(s.group, s.hs, s.smp, lo, t)
				if stop() {
					return nil, notes{}, ctx.Err()
				}
			}
		}
		for _, gi := range rd.touched {
			g := &rd.groups[gi]
			fh = histogram.FloatHistogram{Schema: rd.schema, ZeroThreshold: rd.zt,
				ZeroCount: g.zero.value(), Count: g.count.value(), CounterResetHint: histogram.GaugeType,
				PositiveSpans: fh.PositiveSpans[:0], NegativeSpans: fh.NegativeSpans[:0],
				PositiveBuckets: fh.PositiveBuckets[:0], NegativeBuckets: fh.NegativeBuckets[:0]}
			fh.PositiveSpans, fh.PositiveBuckets = g.pos.side(fh.PositiveSpans, fh.PositiveBuckets, &rd.ix)
			fh.NegativeSpans, fh.NegativeBuckets = g.neg.side(fh.NegativeSpans, fh.NegativeBuckets, &rd.ix)
			v, more := promql.HistogramQuantile(sh.phi, &fh, "", sh.innerPos)
			annos.Merge(more)
			if instant { // one point a group, from one slice
				g.floats = rd.points[gi : gi : gi+1]
			}
			g.floats = append(g.floats, promql.FPoint{T: t, F: v})
			if i < steps { // after the last step the arena's chunks are cleared when next taken
				g.pos.clear()
				g.neg.clear()
			}
			g.count, g.zero, g.has = exactSum{}, exactSum{}, false
		}
		rd.touched = rd.touched[:0]
		if err := ctx.Err(); err != nil {
			return nil, notes{}, err
		}
	}
	n := notesOf(annos, text)
	out := rd.out[:0] // the groups with points, sorted by labels (the engine's order)
	for i := range rd.groups {
		if len(rd.groups[i].floats) > 0 {
			out = append(out, pdOut{lset: rd.groups[i].lset, g: i})
		}
	}
	slices.SortFunc(out, func(x, y pdOut) int { return labels.Compare(x.lset, y.lset) })
	rd.out = out
	if instant { // appendQueryData of the vector, without the vector
		b := append(make([]byte, 0, 64*len(out)+64), `{"resultType":"vector","result":[`...)
		for i, o := range out {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSample(b, promql.Sample{Metric: o.lset, T: span.start, F: rd.groups[o.g].floats[0].F})
		}
		return append(b, "]}"...), n, nil
	}
	mat := make(promql.Matrix, 0, len(out))
	for _, o := range out {
		mat = append(mat, promql.Series{Metric: o.lset, Floats: rd.groups[o.g].floats})
	}
	return appendQueryData(nil, mat), n, nil
}

// pdRead is a pushdown's read: its groups, and for a range query its series (an instant
// query adds each series' rate to its group as it reads it, and keeps none).
type pdRead struct {
	sh      *quantileShape
	instant bool
	t       int64 // an instant query's eval time
	mint    int64 // the first window's start (exclusive)
	evicted error // the windows read a series from an evicted start (see evicted)
	short   error // the range is shorter than two slots (see shortRange)
	empty   error // the selector selects no slide name (see emptyHint)
	series  []pdSeries
	groups  []pdGroup
	touched []int // the groups added to at the step being evaluated
	arena   floatArena
	ix      []int32     // growDense.side's scratch
	delta   seriesDelta // one series' difference, scratch
	schema  int32
	zt      float64
	// budget is what is left of MaxSamples for the samples the read holds: each kept
	// series' samples and each group's points (perGroup: the query's steps). Past it the
	// query is the engine's, which refuses it by its own count (or answers it).
	budget, perGroup int64

	byKey  map[string]int  // groups by groupKey
	points []promql.FPoint // an instant query's, one a group
	out    []pdOut         // the groups answered, in the answer's order
}

// pdOut is a group answered: its labels (sorted by, without moving the groups) and index.
type pdOut struct {
	lset labels.Labels
	g    int
}

// pdReads keeps reads' scratch (groups, their index, the points, the answer's order)
// from query to query.
var pdReads = sync.Pool{New: func() any { return &pdRead{byKey: map[string]int{}} }}

// release hands rd back once the answer is written (it holds no reference into it).
func (rd *pdRead) release() {
	rd.arena.free()
	clear(rd.groups)
	clear(rd.byKey)
	clear(rd.series)
	clear(rd.out)
	rd.evicted, rd.short, rd.empty = nil, nil, nil
	rd.sh, rd.groups, rd.series, rd.touched, rd.out = nil, rd.groups[:0], rd.series[:0], rd.touched[:0], rd.out[:0]
	if cap(rd.groups) > 1<<16 || cap(rd.series) > 1<<16 {
		return // a huge query's: let it go
	}
	pdReads.Put(rd)
}

// add adds a series' rate over (lo, t] to group gi, noting the group touched.
func (rd *pdRead) add(gi int, hs *histSeries, smp []sample, lo, t int64) {
	g := &rd.groups[gi]
	if addRate(&rd.arena, &rd.delta, g, hs, smp, lo, t, rd.sh.isRate, rd.sh.rangeSec) && !g.has {
		g.has = true
		rd.touched = append(rd.touched, gi)
	}
}

// pdSelect reads the selected series as Select would for the engine (the same builder,
// slot cache and samples), each with its group. It declines (errNotPushed) unless the
// selector selects one slide metric's histogram and nothing else.
func (a *API) pdSelect(ctx context.Context, qr *querier, rd *pdRead, mint, maxt int64) error {
	sh := rd.sh
	s, err := qr.selectionOf(ctx, sh.matchers)
	if err != nil {
		return errNotPushed
	}
	if s.none {
		return nil
	}
	if len(s.metrics) == 0 {
		rd.empty = qr.emptyHint(ctx, sh.matchers) // Select's warning on the engine
		return nil
	}
	if len(s.metrics) > 1 || s.kinds[0] != [kindEnd]bool{kindHistogram: true} {
		return errNotPushed
	}
	m := s.metrics[0]
	rc := qr.q.store.RingConfig(m)
	if sh.rng > rc.Retention().Milliseconds() {
		return errNotPushed // the engine answers it, with Select's warning of the retention
	}
	b := builder{sh: newShape(rc, qr.now, qr.live, mint, maxt), cache: qr.q.caches.of(rc.Sketch)}
	b.slab = *slabPool.Get().(*[]sketch.BinCount)
	rd.schema, rd.zt = b.sh.schema, b.sh.ix.MinIndexableValue()
	var (
		lb       = labels.NewScratchBuilder(8)
		base     labels.Labels
		gb       = labels.NewBuilder(labels.EmptyLabels())
		key      []byte
		declined bool
		n        int
	)
	grouping := slices.Clone(sh.grouping)
	slices.Sort(grouping)
	var ev evicted // an instant query's only, as on the engine (evicted)
	if rd.instant {
		ev = qr.evictedFor(rc, rd.mint, maxt, sh.rng)
	}
	verr := qr.visit(ctx, m, &s, stopper(ctx), func(str string, cur int64, slots []window.SlotView) bool {
		if len(slots) == 0 {
			return true
		}
		ev.note(cur, slots)
		var (
			hs  *histSeries
			smp []sample
			w   instantWindow
		)
		if rd.instant {
			b.pointsAt(cur, slots)
			if w = windowOf(b.ts, rd.t-sh.rng, rd.t); !w.any {
				return true
			}
		} else {
			hs = b.histSeries(str, slots)
			if smp = b.build(kindHistogram, cur, slots, hs); len(smp) == 0 {
				return true
			}
		}
		if n++; a.cfg.MaxSeries > 0 && n > a.cfg.MaxSeries {
			declined = true // the engine answers cost_limit
			return false
		}
		key = groupKey(key[:0], str, sh, grouping)
		g, ok := rd.byKey[string(key)]
		if !ok {
			fillLabels(&lb, m, str)
			lb.Overwrite(&base) // base is read only until gb.Labels' copy
			gb.Reset(base)
			gb.Del(labels.MetricName)
			if sh.agg && sh.without {
				gb.Del(sh.grouping...)
			} else if sh.agg {
				gb.Keep(sh.grouping...)
			}
			if rd.budget -= rd.perGroup; rd.budget < 0 {
				declined = true
				return false
			}
			g = len(rd.groups)
			rd.byKey[string(key)] = g
			rd.groups = append(rd.groups, pdGroup{lset: gb.Labels()})
		}
		if rd.instant {
			if !rd.addInstant(&b, g, str, slots, w) {
				declined = true
				return false
			}
			b.slab = b.slab[:0] // the series' converted buckets are summed: reuse them
			return true
		}
		var cnt, sum float64
		j := 0
		for p := range smp {
			for ; j < len(hs.slots) && hs.slots[j].index <= smp[p].through; j++ {
				cnt += float64(hs.slots[j].count)
			}
			smp[p].f = cnt
		}
		for _, sl := range hs.slots {
			sum += sl.sum
		}
		if math.IsNaN(sum) {
			// NaN observations: HistogramQuantile reads a histogram's sum only to take its
			// NaN paths, which are left to the engine; any other sum answers alike.
			declined = true
			return false
		}
		if rd.budget -= int64(len(smp)); rd.budget < 0 {
			declined = true
			return false
		}
		rd.series = append(rd.series, pdSeries{group: g, hs: hs, smp: smp})
		return true
	})
	qr.slabs = append(qr.slabs, b.slab)
	if err := ctx.Err(); err != nil {
		return err
	}
	if verr != nil || declined {
		return errNotPushed
	}
	rd.evicted = ev.warning(m, rc)
	fn := "increase"
	if sh.isRate {
		fn = "rate"
	}
	rd.short = shortRange(m, rc, fn, sh.rng)
	return nil
}

// groupKey appends to dst what tells series str's group apart: the values of the by
// labels (sorted), or every label but the without ones and the name.
func groupKey(dst []byte, str string, sh *quantileShape, sorted []string) []byte {
	if !sh.agg || sh.without {
		if !slices.Contains(sh.grouping, window.KeyLabel) {
			dst = append(append(dst, window.SeriesKeyOf(str)...), 0xff)
		}
		window.EachLabel(str, func(n, v string) bool {
			if !slices.Contains(sh.grouping, n) {
				dst = append(append(append(append(dst, n...), 0xff), v...), 0xff)
			}
			return true
		})
		return dst
	}
	for _, n := range sorted {
		v := ""
		if n == window.KeyLabel {
			v = window.SeriesKeyOf(str)
		} else {
			v = window.LabelValue(str, n)
		}
		dst = append(append(dst, v...), 0xff)
	}
	return dst
}

// addRate adds series s's rate (or increase) over (lo, t] to its group, as the engine's
// extrapolatedRate and histogramRate compute it from the window's first and last samples
// (a series counts up within one read, so there is no reset between them), and reports
// whether there was one (fewer than two samples in the window give none).
func addRate(ar *floatArena, d *seriesDelta, g *pdGroup, hs *histSeries, smp []sample, lo, t int64, isRate bool, rangeSec float64) bool {
	i := sort.Search(len(smp), func(i int) bool { return smp[i].t > lo })
	j := sort.Search(len(smp), func(j int) bool { return smp[j].t > t }) - 1
	if j-i < 1 {
		return false
	}
	firstCount := smp[i].f
	dc := smp[j].f - firstCount
	factor := extrapolation(smp[i].t, smp[j].t, lo, t, j-i, firstCount, dc, isRate, rangeSec)
	from, through := smp[i].through, smp[j].through
	a := sort.Search(len(hs.slots), func(k int) bool { return hs.slots[k].index > from })
	d.load(hs.posLo, hs.pw, hs.negLo, hs.nw)
	var zero float64
	for k := a; k < len(hs.slots) && hs.slots[k].index <= through; k++ {
		zero += d.add(&hs.slots[k].cachedSlot)
	}
	d.addTo(ar, g, dc, zero, factor)
	return true
}

// extrapolation is the factor the engine's extrapolatedRate (promql v0.316, for a counter
// histogram without start timestamps) scales the increase dc between the samples at
// firstT and lastT by, gaps samples apart, over the window (lo, t]; firstCount is the
// first sample's count.
func extrapolation(firstT, lastT, lo, t int64, gaps int, firstCount, dc float64, isRate bool, rangeSec float64) float64 {
	durationToStart := float64(firstT-lo) / 1000
	durationToEnd := float64(t-lastT) / 1000
	sampledInterval := float64(lastT-firstT) / 1000
	avg := sampledInterval / float64(gaps)
	threshold := avg * 1.1
	if durationToStart >= threshold {
		durationToStart = avg / 2
	}
	durationToZero := durationToStart
	if dc > 0 && firstCount >= 0 {
		durationToZero = sampledInterval * (firstCount / dc)
	}
	if durationToZero < durationToStart {
		durationToStart = durationToZero
	}
	if durationToEnd >= threshold {
		durationToEnd = avg / 2
	}
	factor := 1.0
	if sampledInterval != 0 {
		factor = (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	}
	if isRate {
		factor /= rangeSec
	}
	return factor
}

// The engine subtracts the first histogram from the last (exact: counts are whole),
// multiplies by the factor (one rounding a bucket) and sums the group's series with
// compensation; here each series' difference is summed exactly from its slots, scaled
// once, and added to the group with an error-free sum, so that the group's counts are
// the correctly rounded sums whatever order the series came in (a quantile that lands
// between two buckets must not flip with the order).

// load readies d for a series whose buckets span [posLo, posLo+pw) and [negLo, negLo+nw).
func (d *seriesDelta) load(posLo, pw, negLo, nw int) {
	d.pos.load(posLo, pw)
	d.neg.load(negLo, nw)
}

// add adds one slot's buckets to d and returns its zero count.
func (d *seriesDelta) add(c *cachedSlot) float64 {
	d.pos.add(c.bins[:c.neg])
	d.neg.add(c.bins[c.neg:])
	return float64(c.zero)
}

// addTo adds d (whose count is dc and zero count zero), times factor, to g and zeroes d.
func (d *seriesDelta) addTo(ar *floatArena, g *pdGroup, dc, zero, factor float64) {
	g.count.add(float64(dc * factor))
	g.zero.add(float64(zero * factor))
	if d.pos.from < d.pos.to {
		g.pos.cover(ar, d.pos.lo, d.pos.width)
		d.pos.flush(&g.pos, factor)
	}
	if d.neg.from < d.neg.to {
		g.neg.cover(ar, d.neg.lo, d.neg.width)
		d.neg.flush(&g.neg, factor)
	}
}
