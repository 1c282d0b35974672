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
		k, err := se.ring.windowSlots(w)
		if err != nil {
			return err
		}
		cur := se.ring.at(now)
		if k > se.ring.n { // past the ring's own slots: the tiers too, into scratch
			var a Agg
			a.Series = 1
			scratch.Reset()
			se.ring.foldTiered(&a, cur, k*se.ring.width, scratch)
			fn(a, scratch)
			return nil
		}
		r := se.ring.view()
		defer se.ring.release(r)
		var a Agg
		a.From, a.To = r.span(cur, k)
		a.Series = 1
		if k == r.n && cur == r.cur {
			r.fold(&a, cur, k, func(*slot) {})
			r.foldCurrent()
			fn(a, &r.agg)
			return nil
		}
		scratch.Reset()
		if k == r.n {
			r.fold(&a, cur, k, func(*slot) {})
			r.addWindowAt(cur, scratch) // a now past the current slot: as if advanced, unmoved
		} else {
			r.fold(&a, cur, k, func(sl *slot) { sl.bins.AddTo(scratch) })
		}
		fn(a, scratch)
		return nil
	})
}
