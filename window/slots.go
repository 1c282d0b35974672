package window

import "github.com/slide-metrics/slide/sketch"

// SlotView is one live slot of a series as VisitSlots hands it out: its absolute index
// (floor(ts / width)), count, sum, exact min and max, and its bins as the ring keeps them
// (open or packed: read them with sketch.Slot's methods, AppendBins without a decode).
// Bins is the ring's own: read it inside the visit, do not keep it.
type SlotView struct {
	Index         int64
	Count         uint64
	Sum, Min, Max float64
	Bins          sketch.Slot
}

// VisitSlots calls fn once for each series of metric that sel selects (nil: every series),
// with its series string, the slot current at now (cur: what a read at now takes as its
// last slot) and the live slots of the retention up to cur, oldest first; slots ahead of
// cur (events inside the skew) are left out, as reads leave them out. fn runs under the
// series' shard lock, so it must not call the Store, must be quick and must copy what it
// keeps; it returns false to stop the visit. stop is asked as ReadKey asks it, once per
// series compared. The Indexer to read the bins with is Indexer(metric)'s, the slot width
// RingConfig(metric).Slot's.
//
// It is the per-slot read of exporters that show a ring slot by slot (promapi: one sample
// per slot end). Cost: one pass over each selected series' slots; nothing is decoded.
func (s *Store) VisitSlots(now int64, metric string, sel *Selector, stop func() bool, fn func(series string, cur int64, slots []SlotView) bool) {
	s.VisitSlotsIn(now, metric, sel, nil, stop, fn)
}

// VisitSlotsIn is VisitSlots of the series fed by the partitions part accepts (nil: every
// series; a series fed by no partition has partition -1): a cluster member's read of the
// partitions it serves.
func (s *Store) VisitSlotsIn(now int64, metric string, sel *Selector, part func(p int32) bool, stop func() bool, fn func(series string, cur int64, slots []SlotView) bool) {
	var views []SlotView
	s.eachSelected(metric, sel, stop, func(se *series) bool {
		if part != nil && !part(se.partition) {
			return true
		}
		r := se.ring.view()
		defer se.ring.release(r)
		cur := r.at(now)
		views = views[:0]
		for i := cur - r.n + 1; i <= cur; i++ {
			sl := &r.slots[r.pos(i)]
			if sl.count == 0 || sl.idx != i {
				continue
			}
			views = append(views, SlotView{Index: i, Count: sl.count, Sum: sl.sum, Min: sl.min, Max: sl.max, Bins: sl.bins})
		}
		return fn(se.key, cur, views)
	})
}

// VisitFirstSlots is VisitSlotsIn without the slots: fn gets each selected series' cur and
// the index of its first live slot (live false, first 0, when it has none up to cur),
// which is slots[0].Index of what VisitSlotsIn would hand. It is the read of listings,
// which need no more to tell whether a series has samples in a range (promapi's label and
// series listings). Nothing is built: a sparse ring's raw events are looked at, not made
// into a ring of slots. part is as VisitSlotsIn takes it (nil: every series); fn runs
// under the series' shard lock. Cost: at most one pass over each selected series' slots,
// stopping at its first live one.
func (s *Store) VisitFirstSlots(now int64, metric string, sel *Selector, part func(p int32) bool, stop func() bool, fn func(series string, cur, first int64, live bool) bool) {
	s.eachSelected(metric, sel, stop, func(se *series) bool {
		if part != nil && !part(se.partition) {
			return true
		}
		cur, first, live := se.ring.firstLive(now)
		return fn(se.key, cur, first, live)
	})
}

// firstLive returns the slot current at now and the first live slot of the retention up
// to it, as the ring view() gives would hold it (live false when there is none).
func (r *Ring) firstLive(now int64) (cur, first int64, live bool) {
	cur = r.at(now)
	lo := cur - r.n + 1
	if r.slots == nil {
		// A raw event's slot is live when its count is: the view sums the events' counts.
		for _, e := range r.raw {
			if e.n > 0 && e.idx >= lo && e.idx <= cur && (!live || e.idx < first) {
				first, live = e.idx, true
			}
		}
		return cur, first, live
	}
	for i := lo; i <= cur; i++ {
		if sl := &r.slots[r.pos(i)]; sl.count > 0 && sl.idx == i {
			return cur, i, true
		}
	}
	return cur, 0, false
}
