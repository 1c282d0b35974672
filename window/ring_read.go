package window

import (
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// The reads of a ring: a window of its own slots (Read, read, fold), merged into another
// answer (mergeInto), and the whole retention ahead of the current slot (addWindowAt). A
// window past the retention reads the tiers too (tier.go).

// Read aggregates the last window (current slot and the ones before it) at now into a.
// Quantiles go to a.Quantiles, one per q, clamped to the exact [min, max].
func (r *Ring) Read(now int64, w time.Duration, qs []float64) (Agg, error) {
	var a Agg
	if err := checkQuantiles(qs); err != nil {
		return a, err
	}
	k, err := r.windowSlots(w)
	if err != nil {
		return a, err
	}
	cur := r.at(now)
	if k > r.n {
		return r.readTiered(cur, k, qs), nil
	}
	if r.noSketch {
		a.Series, a.Quantiles = 1, make([]float64, len(qs))
		a.From, a.To = r.span(cur, k)
		r.foldStats(&a, cur, k)
		a.nanQuantiles()
		return a, nil
	}
	if r.slots == nil {
		return r.readRaw(cur, k, qs), nil
	}
	return r.read(cur, k, qs), nil
}

// foldStats is fold without the slots' bins: count, sum, min and max of the k slots up to cur.
func (r *Ring) foldStats(a *Agg, cur, k int64) {
	if k > r.n {
		r.foldTiered(a, cur, k*r.width, nil)
		return
	}
	if r.slots == nil {
		r.foldRaw(a, cur, k, nil)
		return
	}
	r.fold(a, cur, k, func(*slot) {})
}

// read is Read of the k slots up to cur (at's) on a dense ring (or a view).
func (r *Ring) read(cur, k int64, qs []float64) Agg {
	var a Agg
	a.From, a.To = r.span(cur, k)
	a.Series = 1
	a.Quantiles = make([]float64, len(qs))
	if k == r.n && cur == r.cur {
		r.fold(&a, cur, k, func(*slot) {})
		if a.Count == 0 {
			a.nanQuantiles()
			return a
		}
		r.foldCurrent()
		r.agg.Quantiles(r.ix, qs, a.Quantiles[:0]) // one pass over the kept aggregate
		a.clampQuantiles()
		return a
	}
	// Shorter windows, and a whole one at a now past the current slot: the union of their
	// slots' bins, summed into scratch.
	b := scratchBins.Get().(*sketch.Bins)
	if k == r.n {
		r.fold(&a, cur, k, func(*slot) {})
		if a.Count > 0 {
			r.addWindowAt(cur, b)
		}
	} else {
		r.fold(&a, cur, k, func(s *slot) { s.bins.AddTo(b) })
	}
	a.readQuantiles(b, r.ix, qs)
	b.Clear()
	scratchBins.Put(b)
	return a
}

// fold adds count, sum, min and max of the k slots up to cur into a and calls each for
// every live one.
func (r *Ring) fold(a *Agg, cur, k int64, each func(*slot)) {
	if r.slots == nil {
		if len(r.raw) > 0 {
			t := r.view()
			t.fold(a, cur, k, each)
			r.release(t)
		}
		return
	}
	for i := cur - k + 1; i <= cur; i++ {
		s := &r.slots[r.pos(i)]
		if s.count == 0 || s.idx != i {
			continue
		}
		a.add(s.count, s.sum, s.min, s.max)
		each(s)
	}
}

// mergeInto adds the k slots up to cur (at's) into a (count, sum, min, max) and into bins.
func (r *Ring) mergeInto(cur, k int64, a *Agg, bins *sketch.Bins) {
	if k > r.n {
		if r.noSketch {
			bins = nil
		}
		r.foldTiered(a, cur, k*r.width, bins)
		return
	}
	if r.slots == nil {
		r.foldRaw(a, cur, k, bins)
		return
	}
	if k == r.n {
		r.fold(a, cur, k, func(*slot) {})
		if cur != r.cur {
			r.addWindowAt(cur, bins)
			return
		}
		r.foldCurrent()
		bins.AddBins(&r.agg)
		return
	}
	r.fold(a, cur, k, func(s *slot) { s.bins.AddTo(bins) })
}

// addWindowAt adds into dst the bins of the whole window (retention) of a dense ring with
// cur current, for cur past the ring's current slot, without moving the ring: the kept
// aggregate plus the slots an advance to cur would add and minus those it would subtract
// (counts are integers: the same bins, bit for bit), or, when that touches more slots
// than the window holds live, the window's live slots summed. dst may hold other series'
// bins (a merge): the aggregate is added before any of it is subtracted.
func (r *Ring) addWindowAt(cur int64, dst *sketch.Bins) {
	if d := cur - r.cur; d >= r.n || 2*d+1 >= int64(r.live) {
		for i := cur - r.n + 1; i <= cur; i++ {
			if s := &r.slots[r.pos(i)]; s.count > 0 && s.idx == i {
				s.bins.AddTo(dst)
			}
		}
		return
	}
	// agg holds every live slot of (r.cur-n, r.cur), and r.cur once curInAgg; the window at
	// cur is (cur-n, cur]: [r.cur, cur] joins, (r.cur-n, cur-n] leaves.
	dst.AddBins(&r.agg)
	for i := r.cur; i <= cur; i++ {
		if s := &r.slots[r.pos(i)]; s.count > 0 && s.idx == i && (i != r.cur || !r.curInAgg) {
			s.bins.AddTo(dst)
		}
	}
	for i := r.cur - r.n + 1; i <= cur-r.n; i++ {
		if s := &r.slots[r.pos(i)]; s.count > 0 && s.idx == i {
			s.bins.SubFrom(dst)
		}
	}
}
