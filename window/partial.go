package window

import (
	"time"

	"github.com/slide-metrics/slide/sketch"
)

// Partial is a window aggregate before its quantiles are read: count, sum, exact min and
// max, and the merged bins of the slots it covers. Partials of disjoint sets of series
// merge exactly (Merge), so the answer of several instances that each hold part of a
// metric's series equals the answer of one instance holding them all: the cluster package
// ships them between instances (sketch.Bins encode compactly). The zero value is empty.
// A Partial is not safe for concurrent use.
type Partial struct {
	From, To int64 // span [From, To) in unix ms; 0, 0 when no series was read
	Count    uint64
	Sum      float64
	Min, Max float64 // meaningful when Count > 0
	Series   int     // series merged into it
	Bins     sketch.Bins
	NoBins   bool // the bins were not gathered (the caller needs no quantile)
}

// Reset empties p, keeping its bins' memory for reuse.
func (p *Partial) Reset() {
	b := p.Bins
	b.Reset()
	*p = Partial{Bins: b}
}

// Merge adds o into p. Spans are the union: the latest To wins, as instances may read a
// moment apart, and of equal Tos the earliest From, as reads of a tiered ring may round
// a window's start out to different tier slots (issue #29). Bins merge when both sides have them.
func (p *Partial) Merge(o *Partial) {
	if o.Series == 0 && o.Count == 0 {
		return
	}
	p.widen(o.From, o.To)
	p.Series += o.Series
	p.NoBins = p.NoBins || o.NoBins
	if o.Count == 0 {
		return
	}
	addPart(&p.Count, &p.Sum, &p.Min, &p.Max, o.Count, o.Sum, o.Min, o.Max)
	if !p.NoBins {
		p.Bins.AddBins(&o.Bins)
	}
}

// widen makes p's span [from, to) when p has none or to is later, and takes the earlier
// from when to is p's.
func (p *Partial) widen(from, to int64) {
	if p.Series == 0 || to > p.To || to == p.To && from < p.From {
		p.From, p.To = from, to
	}
}

// add folds one series' aggregate a (count .. max) into p.
func (p *Partial) add(a *Agg) {
	p.widen(a.From, a.To)
	p.Series++
	if a.Count > 0 {
		addPart(&p.Count, &p.Sum, &p.Min, &p.Max, a.Count, a.Sum, a.Min, a.Max)
	}
}

// Agg reads p's quantiles qs with ix (the Indexer of the metric's ring sketch) and returns
// the aggregate a local read would give: quantiles clamped to [Min, Max], NaN when empty.
func (p *Partial) Agg(ix sketch.Indexer, qs []float64) Agg {
	a := Agg{From: p.From, To: p.To, Count: p.Count, Sum: p.Sum, Min: p.Min, Max: p.Max, Series: p.Series}
	if p.Count == 0 {
		a.Min, a.Max = 0, 0
	}
	a.Quantiles = make([]float64, len(qs))
	if p.NoBins {
		a.nanQuantiles()
		return a
	}
	a.readQuantiles(&p.Bins, ix, qs)
	return a
}

// Indexer is the bin indexer of metric's ring sketch, for Partial.Agg.
func (s *Store) Indexer(metric string) sketch.Indexer {
	ix, _ := s.RingConfig(metric).Sketch.Indexer() // validated by NewStore
	return ix
}

// SeriesMatch selects series by key and by the partition that last fed them (-1 for
// events that did not come from Kafka).
type SeriesMatch func(key string, partition int32) bool

// MergePartial folds every series of metric accepted by match into p, over the last window
// at now. Unlike ReadMerged it does not read quantiles and reports no ErrNotFound: p.Series
// says how many series matched. It returns ErrBadWindow for a window the ring cannot read.
// Series are visited one shard at a time, as in ReadMerged.
func (s *Store) MergePartial(now int64, metric string, match SeriesMatch, window time.Duration, p *Partial) error {
	k, err := readSlots(s.RingConfig(metric), window)
	if err != nil {
		return err
	}
	s.scanMetric(metric, match, func(se *series) { se.foldInto(now, k, p) })
	return nil
}

// foldInto folds se's window of k slots at now into p, with its bins unless p.NoBins; the
// caller holds se's shard lock.
func (se *series) foldInto(now, k int64, p *Partial) {
	var one Agg
	cur := se.ring.at(now)
	if p.NoBins {
		se.ring.foldStats(&one, cur, k)
	} else {
		se.ring.mergeInto(cur, k, &one, &p.Bins)
	}
	if k <= se.ring.n {
		one.From, one.To = se.ring.span(cur, k) // foldTiered states a tiered span itself
	}
	p.add(&one)
}

// EachPartial calls fn with the partial of every series of metric accepted by match, over
// the last window at now, under its shard's lock: fn must be quick and must copy what it
// keeps of p, which is reused. With bins false, the partials carry no bins (NoBins).
func (s *Store) EachPartial(now int64, metric string, match SeriesMatch, window time.Duration, bins bool, fn func(key string, partition int32, p *Partial)) error {
	k, err := readSlots(s.RingConfig(metric), window)
	if err != nil {
		return err
	}
	var p Partial
	s.scanMetric(metric, match, func(se *series) {
		p.Reset()
		p.NoBins = !bins
		se.foldInto(now, k, &p)
		fn(se.key, se.partition, &p)
	})
	return nil
}

// EachSeries calls fn with the metric, key and partition of every live series, under its
// shard's lock (fn must be quick), in no particular order.
func (s *Store) EachSeries(fn func(metric, key string, partition int32)) {
	s.each(func(se *series) { fn(se.metric, se.key, se.partition) })
}

// SeriesID names a series.
type SeriesID struct{ Metric, Key string }

// MergeKey folds the series (metric, key) into p over the last window at now when ok
// accepts the partition that last fed it: MergePartial for one exact key, at the cost of
// one lookup instead of a scan of every series.
func (s *Store) MergeKey(now int64, metric, key string, ok func(partition int32) bool, window time.Duration, p *Partial) error {
	k, err := readSlots(s.RingConfig(metric), window)
	if err != nil {
		return err
	}
	err = s.withSeries(metric, key, func(se *series) error {
		if ok(se.partition) {
			se.foldInto(now, k, p)
		}
		return nil
	})
	if err == ErrNotFound {
		return nil // a key this instance does not hold adds nothing
	}
	return err
}
