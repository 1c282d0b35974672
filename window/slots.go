package window

import "github.com/slide-metrics/slide/sketch"

// SlotView is one live slot of a series as VisitSlots hands it out: its absolute index
// (floor(ts / width)), count, sum, exact min and max, and its bins when asked for. Bins is
// the ring's own or a decoded scratch copy: read it inside the visit, do not keep it.
type SlotView struct {
	Index         int64
	Count         uint64
	Sum, Min, Max float64
	Bins          *sketch.Bins
}

// VisitSlots calls fn once for each series of metric that sel selects (nil: every series),
// with its series string, the slot current at now (cur: what a read at now takes as its
// last slot) and the live slots of the retention up to cur, oldest first; slots ahead of
// cur (events inside the skew) are left out, as reads leave them out. bins false leaves
// SlotView.Bins nil and decodes nothing. fn runs under the series' shard lock, so it must
// not call the Store, and it
// must be quick and copy what it keeps; it returns false to stop the visit. stop is asked as
// ReadKey asks it, once per series compared. The Indexer to read the bins with is
// Indexer(metric)'s, the slot width RingConfig(metric).Slot's.
//
// It is the per-slot read of exporters that show a ring slot by slot (promapi: one sample
// per slot end). Cost: one pass over each selected series' slots, and each packed slot's
// bins decoded once when bins is true.
func (s *Store) VisitSlots(now int64, metric string, sel *Selector, bins bool, stop func() bool, fn func(series string, cur int64, slots []SlotView) bool) {
	var views []SlotView
	var scratch []sketch.Bins
	s.eachSelected(metric, sel, stop, func(se *series) bool {
		r := se.ring.view()
		defer se.ring.release(r)
		cur := r.at(now)
		if bins && int64(len(scratch)) < r.n {
			scratch = make([]sketch.Bins, r.n)
		}
		views = views[:0]
		for i := cur - r.n + 1; i <= cur; i++ {
			sl := &r.slots[r.pos(i)]
			if sl.count == 0 || sl.idx != i {
				continue
			}
			v := SlotView{Index: i, Count: sl.count, Sum: sl.sum, Min: sl.min, Max: sl.max}
			if bins {
				v.Bins = sl.bins.View(&scratch[len(views)])
			}
			views = append(views, v)
		}
		return fn(se.key, cur, views)
	})
}
