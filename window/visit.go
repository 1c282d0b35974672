package window

import (
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// VisitWindowAt calls fn with one series' window at now, as Read would aggregate it, but
// with the window's bins instead of quantiles: the ring's kept aggregate for a
// full-retention window (no copy), a merge of the window's slots into scratch otherwise.
// fn runs under the series' shard lock: it must be quick and must not keep bins. It returns
// ErrNotFound or ErrBadWindow. The Indexer to read the bins with is RingConfig(metric).Sketch's.
// Exporters use it to publish a window as a histogram without re-reading it per quantile.
func (s *Store) VisitWindowAt(now int64, metric, key string, w time.Duration, scratch *sketch.Bins, fn func(a Agg, bins *sketch.Bins)) error {
	return s.withSeries(metric, key, func(se *series) error {
		return se.ring.visitWindow(now, w, scratch, func(a Agg, bins *sketch.Bins, _, _ int64) { fn(a, bins) })
	})
}

// VisitWindowExemplarsAt is VisitWindowAt that also reads the window's exemplars under the
// same lock: when fn runs, *ex (its storage reused) holds the exemplars the series keeps
// (StoreConfig.Exemplars) of the slots the window's aggregate reads from the ring, at most
// one a slot, oldest first. The slots a window past the retention reads from the tiers
// give none (tiers keep none). *ex is empty for a store without exemplars.
func (s *Store) VisitWindowExemplarsAt(now int64, metric, key string, w time.Duration, scratch *sketch.Bins, ex *[]Exemplar, fn func(a Agg, bins *sketch.Bins)) error {
	return s.withShardSeries(metric, key, func(sh *shard, se *series) error {
		return se.ring.visitWindow(now, w, scratch, func(a Agg, bins *sketch.Bins, lo, hi int64) {
			*ex = (*ex)[:0]
			if se.exemplar {
				*ex = sh.appendExemplars(*ex, se, lo, hi)
			}
			fn(a, bins)
		})
	})
}

// visitWindow calls fn with the window w at now as VisitWindowAt hands it, and with the
// slots [lo, hi] it read from r's own slots (the rest of a tiered window is the tiers').
func (r *Ring) visitWindow(now int64, w time.Duration, scratch *sketch.Bins, fn func(a Agg, bins *sketch.Bins, lo, hi int64)) error {
	k, err := r.windowSlots(w)
	if err != nil {
		return err
	}
	cur := r.at(now)
	if k > r.n { // past the ring's own slots: the tiers too, into scratch
		var a Agg
		a.Series = 1
		scratch.Reset()
		lo, hi := r.foldTiered(&a, cur, k*r.width, scratch)
		fn(a, scratch, lo, hi)
		return nil
	}
	v := r.view()
	defer r.release(v)
	var a Agg
	a.From, a.To = v.span(cur, k)
	a.Series = 1
	lo := cur - k + 1
	if k == v.n && cur == v.cur {
		v.fold(&a, cur, k, func(*slot) {})
		v.foldCurrent()
		fn(a, &v.agg, lo, cur)
		return nil
	}
	scratch.Reset()
	if k == v.n {
		v.fold(&a, cur, k, func(*slot) {})
		v.addWindowAt(cur, scratch) // a now past the current slot: as if advanced, unmoved
	} else {
		v.fold(&a, cur, k, func(sl *slot) { sl.bins.AddTo(scratch) })
	}
	fn(a, scratch, lo, cur)
	return nil
}
